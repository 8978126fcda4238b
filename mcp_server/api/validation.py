"""The checks admin forms make on registry rows, as DRF field errors (400 with a message per field).

The texts come from ``mcp_server.registry.stored``; this module says which field each is about.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from rest_framework.exceptions import ValidationError

from ..primitives.tool import tool_annotations
from ..registry.stored import check_prompt, check_resource_template
from ..site import get_server

# A message that names no placeholder and is valid whatever the arguments: checks them alone.
_NEUTRAL_MESSAGES = [{"role": "user", "text": ""}]


def permission(value: str) -> str:
    """An existing permission as "app_label.codename", or blank (no restriction)."""
    if not value:
        return value
    app_label, dot, codename = value.partition(".")
    if not dot or not Permission.objects.filter(content_type__app_label=app_label,
                                                codename=codename).exists():
        raise ValidationError(f'No permission "{value}": give one as "app_label.codename" '
                              '(such as "mcp_server.view_session").')
    return value


def annotations(value: Any) -> Any:
    """Tool annotations as code takes them (snake_case or camelCase hints), or null."""
    try:
        tool_annotations(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return value


def curated(check: Any, *args: Any, **kwargs: Any) -> Any:
    """A curation check's value (``mcp_server.registry.curation``), its ValueError as a 400."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def prompt(arguments: Any, messages: Any) -> None:
    """``check_prompt``, its message put on the field it is about."""
    try:
        check_prompt(arguments, _NEUTRAL_MESSAGES)
    except ValueError as exc:
        raise ValidationError({"arguments": [str(exc)]}) from None
    try:
        check_prompt(arguments, messages)
    except ValueError as exc:
        raise ValidationError({"messages": [str(exc)]}) from None


def resource_template(uri_template: str, text: str) -> None:
    """``check_resource_template``, its message put on the field it is about."""
    try:
        check_resource_template(uri_template, "")
    except ValueError as exc:
        raise ValidationError({"uri_template": [str(exc)]}) from None
    try:
        check_resource_template(uri_template, text)
    except ValueError as exc:
        raise ValidationError({"text": [str(exc)]}) from None


def not_registered_in_code(kind: str, key: str, what: str) -> None:
    """Refuse a row for a name (or URI) that code registers: code would win, the row never show."""
    if key in getattr(get_server(), kind):
        raise ValidationError(f"{what} {key!r} is registered in code; change its settings under "
                              f"registered-{kind.replace('_', '-')}/ instead.")


def unique(model: Any, field: str, value: Any, server: str, instance: Any, what: str) -> None:
    """One row per name (or URI) and server (the models' unique constraints), said per field."""
    rows = model.objects.filter(server=server, **{field: value})
    if instance is not None:
        rows = rows.exclude(pk=instance.pk)
    if rows.exists():
        raise ValidationError(f"{what} {value!r} exists already.")
