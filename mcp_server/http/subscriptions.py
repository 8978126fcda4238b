"""Resource subscriptions as rows, so any process can tell who wants to hear about a URI."""

from __future__ import annotations

from ..invoke import run_in_thread


class SubscriptionStore:
    async def add(self, session_id: str, uri: str) -> None:
        await run_in_thread(self._add, session_id, uri)

    async def remove(self, session_id: str, uri: str) -> None:
        await run_in_thread(self._remove, session_id, uri)

    async def sessions_for(self, uri: str) -> list[str]:
        return await run_in_thread(self._sessions_for, uri)

    @staticmethod
    def _add(session_id: str, uri: str) -> None:
        from ..models import ResourceSubscription

        ResourceSubscription.objects.get_or_create(session_id=session_id, uri=uri)

    @staticmethod
    def _remove(session_id: str, uri: str) -> None:
        from ..models import ResourceSubscription

        ResourceSubscription.objects.filter(session_id=session_id, uri=uri).delete()

    @staticmethod
    def _sessions_for(uri: str) -> list[str]:
        from ..models import ResourceSubscription

        return list(ResourceSubscription.objects.filter(uri=uri).values_list("session_id", flat=True))
