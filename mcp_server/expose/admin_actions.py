"""``ModelAdmin`` actions as tools: ``admin_action_tools(Ticket, actions=["close_tickets"])``.

Each tool runs one action of the model's admin on the objects its arguments select (primary keys,
and/or exact values of the admin's ``list_filter`` fields), as the admin's change list would, for
the Django user behind the request: the admin site's own check (active staff), the permissions the
action names in ``allowed_permissions`` (``has_change_permission`` when it names none), the
actions the admin offers that user (``get_actions``), and only the rows ``get_queryset`` shows it.
What the action says with ``message_user`` comes back in the result, and so does a response it
returns (a file download, a redirect).
"""

from __future__ import annotations

from collections.abc import Iterable
from email.message import Message
from typing import Any

from django.contrib.messages.storage.base import BaseStorage
from django.core.exceptions import PermissionDenied
from django.db import models, router, transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponseBase, QueryDict

from mcp_protocol.content import Text

from ..errors import invalid_params
from ..primitives.tool import Tool, check_tool_name
from ..primitives.tool_response import ToolResponse
from . import model_fields
from .refusals import Refused, refusal, user_of

__all__ = ["admin_action_tools"]

# Selecting more objects than this at once is refused: an action is usually destructive, and an
# assistant that meant a few should not act on a whole table by a filter too wide.
DEFAULT_MAX_OBJECTS = 1000


def admin_action_tools(model: type[models.Model], actions: Iterable[str], *, site: Any = None,
                       prefix: str = "", annotations: dict | None = None,
                       max_objects: int = DEFAULT_MAX_OBJECTS) -> list[Tool]:
    """One tool per action name of ``model``'s admin on ``site`` (``django.contrib.admin.site``).

    A tool is named after its action (``prefix`` + name) and annotated destructive unless
    ``annotations`` says otherwise. ``max_objects``: the most objects one call may act on.
    The model must be registered when this runs (import the app's ``admin`` module first).
    """
    if site is None:
        from django.contrib import admin

        site = admin.site
    if isinstance(actions, str) or not actions:
        raise ValueError("actions is a list of action names, such as ['close_tickets']")
    if isinstance(max_objects, bool) or not isinstance(max_objects, int) or max_objects < 1:
        raise ValueError(f"max_objects must be a positive integer, not {max_objects!r}")
    model_admin = _model_admin(site, model)
    filters = _list_filter_fields(model, model_admin)
    return [_action_tool(model, model_admin, site, name, filters, prefix, annotations, max_objects)
            for name in actions]


def _model_admin(site: Any, model: type[models.Model]) -> Any:
    registry = getattr(site, "_registry", {})
    if model not in registry:
        raise ValueError(f"{model_fields.label(model)} is not registered with the admin site "
                         f"{getattr(site, 'name', site)!r}: import the app's admin module first")
    return registry[model]


def _list_filter_fields(model: type[models.Model], model_admin: Any) -> dict[str, models.Field]:
    """The admin's ``list_filter`` entries that name a field (``SimpleListFilter`` classes, which
    filter by code of their own, cannot be offered as plain values)."""
    fields = {}
    for entry in model_admin.list_filter or ():
        path = entry[0] if isinstance(entry, (tuple, list)) else entry
        if isinstance(path, str):
            try:
                fields[path] = model_fields.resolve(model, path)
            except ValueError:
                continue  # a relation or type we do not offer: the admin keeps it, the tool does not
    return fields


def _action_tool(model: type[models.Model], model_admin: Any, site: Any, name: str,
                 filters: dict[str, models.Field], prefix: str, annotations: dict | None,
                 max_objects: int) -> Tool:
    found = model_admin.get_action(name)
    if found is None:
        raise ValueError(f"{type(model_admin).__name__} has no action {name!r}")
    # Django 6.1 returns an Action (attributes; unpacking it is deprecated), earlier ones a tuple.
    if isinstance(found, tuple):
        function, name, description = found
    else:
        function, name, description = found.func, found.name, found.description
    plural = str(model._meta.verbose_name_plural)
    pk = model._meta.pk
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": model_fields.json_schema(pk), "minItems": 1,
                    "maxItems": max_objects,
                    "description": f"Primary keys of the {plural} to act on"},
            "filters": {
                "type": "object",
                "properties": {path: {**model_fields.json_schema(field),
                                      "description": f"Only {plural} whose {path} is this"}
                               for path, field in filters.items()},
                "additionalProperties": False,
                "description": f"Act on the {plural} with these values (with ids: those of the ids "
                               "that also have them)",
            },
        },
        "additionalProperties": False,
    }
    runner = _ActionRunner(model, model_admin, site, function, name, str(description), filters,
                           max_objects)
    return Tool.define(
        runner, name=check_tool_name(f"{prefix}{name}"), title=str(description),
        description=(f"{description} (an admin action on {plural}). Select them by ids and/or "
                     f"filters; at most {max_objects} at once. Runs with your admin permissions."),
        input_schema=schema,
        annotations={"destructive_hint": True, "read_only_hint": False, "idempotent_hint": False,
                     "open_world_hint": False, **(annotations or {})},
    )


class _CollectedMessages(BaseStorage):
    """Message storage that keeps what ``message_user`` adds, for the tool result."""

    def _get(self, *args: Any, **kwargs: Any) -> tuple[list, bool]:
        return [], True

    def _store(self, messages: list, response: Any, *args: Any, **kwargs: Any) -> list:
        return []


class _ActionRunner:
    def __init__(self, model: type[models.Model], model_admin: Any, site: Any, function: Any,
                 name: str, description: str, filters: dict[str, models.Field], max_objects: int):
        self.model, self.model_admin, self.site = model, model_admin, site
        self.function, self.name, self.description = function, name, description
        self.filters, self.max_objects = filters, max_objects

    def __call__(self, arguments: dict, server_context: Any = None) -> Any:
        selection = self._selection(arguments)  # -32602 before anything else
        try:
            user = user_of(server_context)
            request = _request_for(user)
            self._check_permissions(request, user)
            return self._run(request, selection, arguments.get("ids"))
        except Refused as exc:
            return refusal(exc)

    def _selection(self, arguments: dict) -> Q:
        ids, filters = arguments.get("ids"), arguments.get("filters")
        if ids is None and not filters:
            raise invalid_params(f"Invalid params: {self.name} needs 'ids' or 'filters' to select "
                                 f"what it acts on")
        query = Q()
        if ids is not None:
            if not isinstance(ids, list) or not ids:
                raise invalid_params("Invalid params: 'ids' is a non-empty list of primary keys")
            if len(ids) > self.max_objects:
                raise invalid_params(f"Invalid params: at most {self.max_objects} ids at once")
            try:
                pks = [model_fields.parse(self.model._meta.pk, value, "ids") for value in ids]
            except ValueError as exc:
                raise invalid_params(f"Invalid params: {exc}") from None
            query &= Q(pk__in=pks)
        if filters is not None:
            if not isinstance(filters, dict):
                raise invalid_params("Invalid params: 'filters' is an object of field values")
            for path, value in filters.items():
                field = self.filters.get(path)
                if field is None:
                    raise invalid_params(
                        f"Invalid params: {path!r} is not a filter of {self.name}; the filters are "
                        f"{', '.join(self.filters) or 'none'}", data={"field": path})
                try:
                    parsed = model_fields.parse(field, value, f"filters.{path}")
                except ValueError as exc:
                    raise invalid_params(f"Invalid params: {exc}", data={"field": path}) from None
                query &= Q(**{f"{path}__isnull": True}) if parsed is None else Q(**{path: parsed})
        return query

    def _check_permissions(self, request: HttpRequest, user: Any) -> None:
        who = user.get_username()
        if not self.site.has_permission(request):
            raise Refused(f"{self.name}: {who!r} may not use the admin site (an active staff "
                          "member may).")
        for permission in getattr(self.function, "allowed_permissions", None) or ("change",):
            if not getattr(self.model_admin, f"has_{permission}_permission")(request):
                raise Refused(f"{self.name}: {who!r} lacks the {permission!r} permission on "
                              f"{self.model._meta.verbose_name_plural} that this action needs.")
        if self.name not in self.model_admin.get_actions(request):
            raise Refused(f"{self.name}: the admin does not offer this action to {who!r}.")

    def _run(self, request: HttpRequest, selection: Q, ids: list | None) -> dict:
        queryset = self.model_admin.get_queryset(request).filter(selection)
        with transaction.atomic(using=router.db_for_write(self.model)):
            selected = list(queryset.values_list("pk", flat=True)[:self.max_objects + 1])
            if not selected:
                raise Refused(f"{self.name}: no {self.model._meta.verbose_name_plural} match "
                              "the selection (or none you may see); nothing was done.")
            if len(selected) > self.max_objects:
                raise Refused(f"{self.name}: the selection has more than {self.max_objects} "
                              f"{self.model._meta.verbose_name_plural}; narrow it. Nothing was done.")
            try:
                response = self.function(self.model_admin, request, queryset.filter(pk__in=selected))
            except PermissionDenied as exc:
                raise Refused(f"{self.name}: permission denied{f' ({exc})' if str(exc) else ''}; "
                              "nothing was done.") from None
            described = _describe(response) if isinstance(response, HttpResponseBase) else None
            if described is not None and described["kind"] == "page":
                # An intermediate page (delete_selected's confirmation) waits for a second POST
                # that a tool cannot send: undo whatever ran before it.
                transaction.set_rollback(True, using=router.db_for_write(self.model))
        messages = [{"level": message.level_tag or str(message.level), "message": str(message)}
                    for message in request._messages]
        return self._result(selected, ids, messages, described)

    def _result(self, selected: list, ids: list | None, messages: list[dict],
                response: dict | None) -> Any:

        found = {str(pk) for pk in selected}
        report: dict[str, Any] = {
            "action": self.name, "model": model_fields.label(self.model),
            "selected": len(selected), "ids": [model_fields.to_json(pk) for pk in selected],
            "messages": messages,
        }
        if ids is not None:
            report["missing_ids"] = [value for value in ids if str(value) not in found]
        lines = [f"{self.description}: ran on {len(selected)} "
                 f"{self.model._meta.verbose_name_plural} (ids {', '.join(map(str, report['ids']))})."]
        if report.get("missing_ids"):
            lines.append(f"Not found, or not yours to see: {', '.join(map(str, report['missing_ids']))}.")
        lines += [f"{m['level']}: {m['message']}" for m in messages]
        error = False
        if response is not None:
            report["response"] = response
            lines.append(_say(response))
            error = response["kind"] == "page" or response["status"] >= 400
        return ToolResponse([Text("\n".join(lines))], structured_content=report, error=error)


def _request_for(user: Any) -> HttpRequest:
    """The POST the change list would have received, as far as an action reads one."""
    request = HttpRequest()
    request.method = "POST"
    request.user = user
    request.GET, request.POST = QueryDict(mutable=True), QueryDict(mutable=True)
    request.META.update({"REQUEST_METHOD": "POST", "SCRIPT_NAME": ""})
    request._messages = _CollectedMessages(request)
    return request


def _describe(response: HttpResponseBase) -> dict[str, Any]:
    status = response.status_code
    described: dict[str, Any] = {"status": status,
                                 "content_type": response.get("Content-Type", "")}
    if 300 <= status < 400 and response.has_header("Location"):
        return {**described, "kind": "redirect", "location": response["Location"]}
    disposition = Message()
    disposition["Content-Disposition"] = response.get("Content-Disposition", "")
    filename = disposition.get_filename()
    html = described["content_type"].split(";")[0].strip().lower() == "text/html"
    if html and not filename:
        # A page (often unrendered: a TemplateResponse) is read by a person, not by the tool.
        return {**described, "kind": "page"}
    if response.streaming:
        size = sum(len(chunk) for chunk in response.streaming_content)
    else:
        size = len(response.content)
    response.close()
    return {**described, "kind": "file", "filename": filename, "size": size}


def _say(response: dict[str, Any]) -> str:
    if response["kind"] == "redirect":
        return f"The action redirected to {response['location']} (HTTP {response['status']})."
    if response["kind"] == "page":
        return (f"The action answered with a web page (HTTP {response['status']}), such as a "
                "confirmation page, that a tool cannot answer: nothing it did was kept. Use the "
                "admin site for this action.")
    name = f" {response['filename']!r}" if response["filename"] else ""
    return (f"The action returned a file{name} ({response['content_type']}, {response['size']} "
            f"bytes, HTTP {response['status']}).")
