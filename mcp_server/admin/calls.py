"""Admin of background tool calls (``ToolCall``), newest first: what runs where and how far it
got; "cancel" stops a call wherever it runs, as a client's ``notifications/cancelled`` does."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from ..background.launch import cancel_call
from ..models import ToolCall
from ..site import get_transport
from .common import ReadOnlyAdmin


def _json(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool", "short_arguments", "state", "task", "session_id", "owner", "started_at",
                    "progress_now", "worker"]
    # Tasks (the Tasks extension) are calls too: the "task" filter shows them beside running calls.
    list_filter = ["state", "task"]
    search_fields = ["id", "tool", "session_id"]
    ordering = ["-created_at"]
    list_select_related = ["owner"]
    actions = ["cancel_selected"]
    fields = ["id", "tool", "arguments_json", "state", "session_id", "request_id", "protocol_version",
              "owner", "created_at", "started_at", "finished_at", "progress_now", "delivery", "worker",
              "attempts", "cancel_requested", "task", "input_requests_json", "error", "response_json"]
    readonly_fields = fields

    @admin.display(description="input requests")
    def input_requests_json(self, call: ToolCall) -> str:
        return _json(call.input_requests) if call.input_requests else "—"

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_server.change_toolcall")

    @admin.display(description="arguments")
    def short_arguments(self, call: ToolCall) -> str:
        text = json.dumps(call.arguments, ensure_ascii=False)
        return text if len(text) <= 60 else text[:59] + "…"

    @admin.display(description="arguments")
    def arguments_json(self, call: ToolCall) -> str:
        return _json(call.arguments)

    @admin.display(description="response")
    def response_json(self, call: ToolCall) -> str:
        return _json(call.response) if call.response is not None else "-"

    @admin.display(description="progress")
    def progress_now(self, call: ToolCall) -> str:
        if call.progress is None:
            return "-"
        done = f"{call.progress:g}" + (f"/{call.total:g}" if call.total is not None else "")
        return f"{done} {call.message}".strip()

    @admin.action(description="Cancel selected calls", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        transport = get_transport()
        asked = ended = finished = 0
        for call_id in queryset.values_list("pk", flat=True):
            call = async_to_sync(cancel_call)(transport, call_id)
            if call is None:
                continue
            if call.state == ToolCall.State.CANCELLED and call.started_at is None:
                ended += 1  # cancelled before it started
            elif not call.finished:
                asked += 1  # its runner stops it within moments
            else:
                finished += 1
        self.message_user(request, f"Cancelled {ended} queued call(s); asked {asked} running call(s) to "
                                   f"stop; {finished} had already ended.", messages.SUCCESS)
