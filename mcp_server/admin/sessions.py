"""Admin of the default server's MCP sessions: who is connected, with what, holding what open;
"terminate" ends a session in every process, as the client's DELETE does."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest

from ..models import Session
from ..site import get_transport
from .common import ReadOnlyAdmin


async def _held(transport: Any, session_ids: list[str]) -> list[int]:
    # The counter of the session's claims (open streams, requests in flight) in the shared
    # state, kept by every process (StreamableHTTPTransport._held_key).
    return list(await asyncio.gather(*(transport.state.count(f"held:{sid}") for sid in session_ids)))


def held_now(session_ids: list[str]) -> dict[str, int]:
    """How many streams and requests each session holds open now, in every process."""
    if not session_ids:
        return {}
    return dict(zip(session_ids, async_to_sync(_held)(get_transport(), session_ids), strict=True))


def terminate(session_id: str) -> None:
    """End a session everywhere: its row, events and subscriptions go, its streams and requests
    end in whichever process holds them, and its next request gets 404."""
    async_to_sync(get_transport().end_session)(session_id)


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ["id", "client_name", "client_version", "protocol_version", "owner", "last_activity",
                    "created_at", "open_now"]
    list_filter = ["protocol_version"]
    search_fields = ["id", "owner__username"]
    ordering = ["-last_activity"]
    list_select_related = ["owner"]
    actions = ["terminate_selected"]
    fields = ["id", "client_name", "client_version", "protocol_version", "owner", "principal", "origin",
              "client_capabilities", "log_level", "last_activity", "created_at", "open_now",
              "stored_events", "stored_bytes"]
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The default server's sessions: those its transport can end.
        return super().get_queryset(request).filter(server=get_transport().group)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        counts = held_now([session.pk for session in changelist.result_list])
        for session in changelist.result_list:
            session.held_now = counts[session.pk]  # one round of lookups for the whole page
        return changelist

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_server.delete_session")

    @admin.display(description="client")
    def client_name(self, session: Session) -> str:
        return (session.client_info or {}).get("name", "")

    @admin.display(description="client version")
    def client_version(self, session: Session) -> str:
        return (session.client_info or {}).get("version", "")

    @admin.display(description="open streams and requests")
    def open_now(self, session: Session) -> int:
        held = getattr(session, "held_now", None)
        return held_now([session.pk])[session.pk] if held is None else held

    @admin.action(description="Terminate selected MCP sessions", permissions=["terminate"])
    def terminate_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        ended = 0
        for session_id in queryset.values_list("pk", flat=True):
            terminate(session_id)
            ended += 1
        self.message_user(request, f"Terminated {ended} session(s) in every process.", messages.SUCCESS)
