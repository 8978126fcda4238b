"""Resource subscriptions as rows, so any process can tell who wants to hear about a URI."""

from __future__ import annotations

from mcp_protocol.errors import INVALID_REQUEST, MCPError

from ..invoke import run_in_thread


class TooManySubscriptions(MCPError):
    code = INVALID_REQUEST


class SubscriptionStore:
    """The subscriptions of one server's sessions (``server``: as in ``SessionStore``).
    ``limit``: the most URIs one session may be subscribed to (None: no limit)."""

    def __init__(self, limit: int | None = None, server: str = ""):
        self.limit = limit
        self.server = server

    async def add(self, session_id: str, uri: str) -> None:
        await run_in_thread(self._add, session_id, uri)

    async def remove(self, session_id: str, uri: str) -> None:
        await run_in_thread(self._remove, session_id, uri)

    async def sessions_for(self, uri: str) -> list[str]:
        return await run_in_thread(self._sessions_for, uri, self.server)

    def _add(self, session_id: str, uri: str) -> None:
        from django.db import transaction

        from ..models import ResourceSubscription, Session

        with transaction.atomic(using=ResourceSubscription.objects.db):
            if self.limit is not None:
                # The session's row lock makes count-then-add one step for concurrent subscribes.
                list(Session.objects.select_for_update().filter(pk=session_id).values_list("pk"))
                mine = ResourceSubscription.objects.filter(session_id=session_id)
                if not mine.filter(uri=uri).exists() and mine.count() >= self.limit:
                    raise TooManySubscriptions(
                        f"Too many subscriptions: this session is subscribed to {self.limit} "
                        f"resources, the most allowed; unsubscribe from one first",
                        data={"limit": self.limit})
            ResourceSubscription.objects.get_or_create(session_id=session_id, uri=uri)

    @staticmethod
    def _remove(session_id: str, uri: str) -> None:
        from ..models import ResourceSubscription

        ResourceSubscription.objects.filter(session_id=session_id, uri=uri).delete()

    @staticmethod
    def _sessions_for(uri: str, server: str) -> list[str]:
        from ..models import ResourceSubscription

        subscribed = ResourceSubscription.objects.filter(uri=uri, session__server=server)
        return list(subscribed.values_list("session_id", flat=True))
