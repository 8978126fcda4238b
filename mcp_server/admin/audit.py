"""Admin of the audit trail (``AuditRecord``): read-only, newest first, filtered by user, OAuth
client, method, name and outcome, searchable, and exported as CSV or JSON (the filtered list,
from the links above it, or the selected rows, from the actions)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html

from ..audit import export
from ..models import AuditRecord
from .common import ReadOnlyAdmin

FORMATS = {"csv": ("text/csv; charset=utf-8", export.to_csv), "json": ("application/json", export.to_json)}


class _RowValueFilter(admin.SimpleListFilter):
    """The values of one of the trail's columns that its rows hold (at most 200 choices)."""

    field = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = AuditRecord.objects.exclude(**{self.field: ""}).order_by(self.field) \
            .values_list(self.field, flat=True).distinct()[:200]
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class ClientFilter(_RowValueFilter):
    """The OAuth clients that appear in the trail (its rows, not the registrations)."""

    title = "OAuth client"
    parameter_name = field = "client_id"


class NameFilter(_RowValueFilter):
    """The tools, prompts and resources that appear in the trail."""

    title = "name"
    parameter_name = field = "name"


class UserFilter(_RowValueFilter):
    """The users that appear in the trail, by the name each row kept (a deleted user stays)."""

    title = "user"
    parameter_name = field = "username"


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    change_list_template = "admin/mcp_server/auditrecord/change_list.html"
    list_display = ["time", "method", "name", "outcome", "error_code", "username", "client_id", "session_id",
                    "duration_ms", "background_call"]
    list_filter = [UserFilter, ClientFilter, "method", NameFilter, "outcome"]
    date_hierarchy = "time"
    search_fields = ["name", "username", "client_id", "subject", "session_id", "arguments_digest",
                     "background_call", "trace_id"]
    ordering = ["-time", "-id"]
    actions = ["export_csv", "export_json"]
    fields = ["time", "method", "name", "outcome", "error_code", "user", "username", "client_id", "subject",
              "authentication", "session_id", "request_id", "protocol_version", "arguments_digest",
              "arguments_json", "duration_ms", "result_size", "background_call", "task", "trace_id"]
    readonly_fields = fields

    @admin.display(description="duration (ms)", ordering="duration")
    def duration_ms(self, row: AuditRecord) -> str:
        return f"{row.duration * 1000:.1f}"

    @admin.display(description="arguments (redacted)")
    def arguments_json(self, row: AuditRecord) -> str:
        if row.arguments is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(row.arguments, indent=2, ensure_ascii=False))

    def get_urls(self) -> list:
        export_view = self.admin_site.admin_view(self.export_view)
        return [path("export/<str:fmt>/", export_view, name="mcp_server_auditrecord_export"),
                *super().get_urls()]

    def export_view(self, request: HttpRequest, fmt: str) -> HttpResponse:
        """The rows of the list as filtered and searched by the query string, all pages."""
        if fmt not in FORMATS:
            raise Http404
        if not self.has_view_permission(request):
            raise PermissionDenied
        changelist = self.get_changelist_instance(request)
        return _download(changelist.get_queryset(request), fmt)

    @admin.action(description="Export selected rows as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        return _download(queryset, "csv")

    @admin.action(description="Export selected rows as JSON", permissions=["view"])
    def export_json(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        return _download(queryset, "json")


def _download(queryset: QuerySet, fmt: str) -> HttpResponse:
    content_type, render = FORMATS[fmt]
    response = HttpResponse(render(export.rows_of(queryset)), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="mcp-audit-{stamp}.{fmt}"'
    return response
