"""What the registry's admin pages share: the default server's name, the restriction fields and
their check, JSON edited as indented text, and the switch actions that announce a change once."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest
from django.utils import timezone

from .. import signals
from ..site import get_server


def server_name() -> str:
    """The default server's name: the rows admin manages are this server's."""
    return get_server().name


class JSONText(forms.JSONField):
    """A JSON field shown indented, so that a list of objects reads one key per line."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, InvalidJSONInput):
            return value  # what the user typed, to correct it
        if value is None:
            return ""  # a new row's field: empty, not "null"
        return json.dumps(value, indent=2, ensure_ascii=False)


def json_area(rows: int = 8) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows, "cols": 80, "style": "font-family: monospace"})


class RestrictedForm(forms.ModelForm):
    """The fields every registry row has: who may see it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance._state.adding:
            self.instance.server = server_name()

    def clean_permission(self) -> str:
        value = self.cleaned_data.get("permission", "").strip()
        if not value:
            return ""
        app_label, dot, codename = value.partition(".")
        if not dot or not Permission.objects.filter(
                content_type__app_label=app_label, codename=codename).exists():
            raise ValidationError(
                f'There is no permission "{value}". Name an existing one as "app_label.codename", '
                'for example "mcp_server.view_session".')
        return value


@admin.display(description="restricted to")
def restriction(row: Any) -> str:
    """Who may see the row's entry (``groups`` prefetched)."""
    groups = sorted(group.name for group in row.groups.all())
    parts = ([row.permission] if row.permission else []) + \
        ([f"groups: {', '.join(groups)}"] if groups else [])
    return "; ".join(parts) or "anyone"


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows that belong to the transport or the runner: shown, never edited; their own actions
    (terminate, cancel) are how they change."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SwitchActions(admin.ModelAdmin):
    """Enable or disable the selected rows with one UPDATE, announced once (one ``list_changed``
    per list they touch) when the transaction commits. ``queryset.update`` sends no signal."""

    actions = ["enable_selected", "disable_selected"]

    def list_of(self, row: Any) -> str:
        """Which list (``tools``, ``prompts``, ``resources``) a row belongs to."""
        raise NotImplementedError

    def switchable(self, queryset: QuerySet, enabled: bool) -> QuerySet:
        """The selected rows that may take the new state."""
        return queryset

    def refused(self, request: HttpRequest, queryset: QuerySet, enabled: bool) -> None:
        """Tell the administrator about selected rows that cannot take the new state."""

    @admin.action(description="Enable selected %(verbose_name_plural)s", permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.switch(request, queryset, True)

    @admin.action(description="Disable selected %(verbose_name_plural)s", permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.switch(request, queryset, False)

    def switch(self, request: HttpRequest, queryset: QuerySet, enabled: bool) -> None:
        selected = queryset.count()
        with transaction.atomic():
            rows = list(self.switchable(queryset, enabled).exclude(enabled=enabled))
            lists: dict[str, set[str]] = defaultdict(set)
            for row in rows:
                lists[row.server].add(self.list_of(row))
            changed = queryset.model.objects.filter(pk__in=[row.pk for row in rows]).update(
                enabled=enabled, updated_at=timezone.now())
            for server, touched in lists.items():
                signals.announce(server, touched)
        self.refused(request, queryset, enabled)
        state = "enabled" if enabled else "disabled"
        self.message_user(request, f"{changed} {state}, {selected - changed} left as they were.",
                          messages.SUCCESS if changed else messages.INFO)
