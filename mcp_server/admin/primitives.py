"""Admin of what code registers (``PrimitiveSetting``): every tool, prompt, resource and resource
template of the default server has a row, created when the list is first shown, that switches it
on or off, overrides its title, description and (tools) annotations, exposed name, hidden and fixed
arguments (curation, ``mcp_server.primitives.curated``), and restricts who sees it."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from .. import signals
from ..models import PrimitiveSetting
from ..primitives.tool import tool_annotations
from ..registry import curation
from ..site import get_server
from .common import JSONText, RestrictedForm, SwitchActions, json_area, restriction, server_name

Kind = PrimitiveSetting.Kind
# The server's dict of each kind: by name (tools, prompts), URI (resources) or URI template.
_REGISTRIES = {Kind.TOOL: "tools", Kind.PROMPT: "prompts", Kind.RESOURCE: "resources",
               Kind.RESOURCE_TEMPLATE: "resource_templates"}


def registered(row: PrimitiveSetting) -> Any:
    """What code registers under the row's kind and name (None: nothing any more)."""
    return getattr(get_server(), _REGISTRIES[row.kind]).get(row.name)


def described(row: PrimitiveSetting) -> str:
    return f"{row.get_kind_display().lower()} {row.name}"


def add_missing_rows() -> None:
    """A row for every primitive code registers on the default server. No signal is sent (a
    new row changes nothing anyone sees), and a row another request just made is left alone."""
    server = get_server()
    PrimitiveSetting.objects.bulk_create([
        PrimitiveSetting(server=server.name, kind=kind, name=name)
        for kind, attribute in _REGISTRIES.items() for name in list(getattr(server, attribute))
    ], ignore_conflicts=True)


def try_it_url(tool_name: str) -> str | None:
    """The "Try it" page of a tool, where the project routes it (another app provides it)."""
    try:
        return reverse("mcp_server_try_it", args=[tool_name])
    except NoReverseMatch:
        return None


class PrimitiveSettingForm(RestrictedForm):
    annotations = JSONText(
        required=False, widget=json_area(6),
        help_text='Tools only: replaces the annotations the code gives (empty: keep them), as a '
                  'JSON object of hints in snake_case or camelCase, for example '
                  '{"read_only_hint": true, "destructive_hint": false}.')
    hidden_arguments = JSONText(
        required=False, widget=json_area(3),
        help_text='Tools only: arguments left out of the input schema, as a JSON list of names, for '
                  'example ["verbose"]; a call never passes them, so the tool\'s default applies. '
                  'A required argument cannot be hidden: fix it instead.')
    fixed_arguments = JSONText(
        required=False, widget=json_area(4),
        help_text='Tools only: arguments left out of the input schema and always passed with the '
                  'value given here, whatever the client sends, as a JSON object, for example '
                  '{"tenant": "acme"}. Each value must match its argument\'s schema.')

    class Meta:
        model = PrimitiveSetting
        fields = ["enabled", "exposed_name", "title", "description", "annotations", "hidden_arguments",
                  "fixed_arguments", "permission", "groups"]
        help_texts = {
            "exposed_name": "Tools only: the name clients see and call instead of the code's (empty: "
                            "keep it). 1 to 128 characters from A-Z, a-z, 0-9, _, . and -; not the "
                            "name of another tool.",
            "title": "Replaces the title the code gives (empty: keep it).",
            "description": "Replaces the description the code gives (empty: keep it).",
        }

    def clean_enabled(self) -> bool:
        enabled = self.cleaned_data.get("enabled", False)
        if enabled and "enabled" in self.changed_data and registered(self.instance) is None:
            raise ValidationError(f"{described(self.instance)} is no longer registered in code: it "
                                  "cannot be enabled.")
        return enabled

    def clean_annotations(self) -> Any:
        value = self.cleaned_data.get("annotations")
        if value is None:
            return None
        if self.instance.kind != Kind.TOOL:
            kind = self.instance.get_kind_display().lower()
            raise ValidationError(f"Only tools have annotations; a {kind} has none: leave this empty.")
        try:
            tool_annotations(value)
        except ValueError as exc:
            raise ValidationError(f"{exc}. Known hints: read_only_hint, destructive_hint, "
                                  "idempotent_hint, open_world_hint (true or false), and title.") from None
        return value

    def clean_exposed_name(self) -> str:
        value = self.cleaned_data.get("exposed_name") or ""
        if value.strip() and value.strip() != self.instance.name:
            self._tools_only("an exposed name")
        return _checked(curation.exposed_name, value, code_name=self.instance.name,
                        registered=get_server().tools, server_name=self.instance.server, pk=self.instance.pk)

    def clean_hidden_arguments(self) -> list:
        value = self.cleaned_data.get("hidden_arguments")
        if value:
            self._tools_only("hidden arguments")
        return _checked(curation.hidden_arguments, value)

    def clean_fixed_arguments(self) -> dict:
        value = self.cleaned_data.get("fixed_arguments")
        if value:
            self._tools_only("fixed arguments")
        return _checked(curation.fixed_arguments, value)

    def clean(self) -> dict:
        cleaned = super().clean()
        tool = registered(self.instance) if self.instance.kind == Kind.TOOL else None
        _checked(curation.arguments, tool, cleaned.get("hidden_arguments"), cleaned.get("fixed_arguments"))
        return cleaned

    def _tools_only(self, what: str) -> None:
        if self.instance.kind != Kind.TOOL:
            kind = self.instance.get_kind_display().lower()
            raise ValidationError(f"Only tools have {what}; a {kind} has none: leave this empty.")


def _checked(check: Any, *args: Any, **kwargs: Any) -> Any:
    """``check``'s value, its ValueError as the form's error."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


@admin.register(PrimitiveSetting)
class PrimitiveSettingAdmin(SwitchActions):
    form = PrimitiveSettingForm
    list_display = ["kind", "name", "enabled", "is_registered", "exposed_name", "title_override",
                    "description_override", restriction, "try_it"]
    list_display_links = ["name"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    ordering = ["kind", "name"]
    filter_horizontal = ["groups"]
    readonly_fields = ["server", "kind", "name", "is_registered", "code_title", "code_description",
                       "code_annotations", "code_arguments", "try_it", "updated_at"]
    fieldsets = [
        (None, {"fields": ["server", "kind", "name", "is_registered", "try_it", "enabled"]}),
        ("Overrides", {"fields": ["exposed_name", "title", "code_title", "description", "code_description",
                                  "annotations", "code_annotations"]}),
        ("Arguments (tools)", {"fields": ["hidden_arguments", "fixed_arguments", "code_arguments"]}),
        ("Who may see it", {"fields": ["permission", "groups"],
                            "description": "No permission and no group: anyone. Disabled: nobody."}),
        (None, {"fields": ["updated_at"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(server=server_name()).prefetch_related("groups")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rows come from what code registers

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        if self.has_view_or_change_permission(request):
            add_missing_rows()
        return super().changelist_view(request, extra_context)

    # Columns and read-only fields ------------------------------------------------------------
    @admin.display(description="registered in code", boolean=True)
    def is_registered(self, row: PrimitiveSetting) -> bool:
        return registered(row) is not None

    @admin.display(description="title override", ordering="title")
    def title_override(self, row: PrimitiveSetting) -> str:
        return row.title

    @admin.display(description="description override")
    def description_override(self, row: PrimitiveSetting) -> str:
        return row.description if len(row.description) <= 80 else row.description[:79] + "…"

    @admin.display(description="title in code")
    def code_title(self, row: PrimitiveSetting) -> str:
        return getattr(registered(row), "title", None) or "-"

    @admin.display(description="description in code")
    def code_description(self, row: PrimitiveSetting) -> str:
        return getattr(registered(row), "description", None) or "-"

    @admin.display(description="annotations in code")
    def code_annotations(self, row: PrimitiveSetting) -> str:
        annotations = getattr(registered(row), "annotations", None) if row.kind == Kind.TOOL else None
        return format_html("<code>{}</code>", json.dumps(annotations)) if annotations else "-"

    @admin.display(description="arguments in code")
    def code_arguments(self, row: PrimitiveSetting) -> str:
        tool = registered(row) if row.kind == Kind.TOOL else None
        if tool is None:
            return "-"
        return format_html("<code>{}</code>", json.dumps(tool.input_schema.to_dict(), indent=1))

    @admin.display(description="try it")
    def try_it(self, row: PrimitiveSetting) -> str:
        url = try_it_url(row.exposed_name or row.name) \
            if row.kind == Kind.TOOL and registered(row) is not None else None
        return format_html('<a href="{}">Try it</a>', url) if url else ""

    def get_list_display(self, request: HttpRequest) -> list:
        shown = list(super().get_list_display(request))
        if not any(try_it_url(name) for name in list(get_server().tools)[:1]):
            shown.remove("try_it")  # the project does not route the inspector
        return shown

    # Switch actions ----------------------------------------------------------------------------
    def list_of(self, row: PrimitiveSetting) -> str:
        return signals.list_of_kind(row.kind)

    def switchable(self, queryset: QuerySet, enabled: bool) -> QuerySet:
        if not enabled:
            return queryset
        return queryset.filter(pk__in=[row.pk for row in queryset if registered(row) is not None])

    def refused(self, request: HttpRequest, queryset: QuerySet, enabled: bool) -> None:
        gone = [described(row) for row in queryset if enabled and not row.enabled and registered(row) is None]
        if gone:
            self.message_user(request, f"No longer registered in code, so not enabled: {', '.join(gone)}.",
                              messages.WARNING)
