"""Where SSE events are written before they are sent, so a client can resume on any process.

An event id on the wire is ``"<stream>/<sequence>"``: the stream (``get`` or ``post:<id>``)
and a number that grows with every stored event; ``"<stream>/0"`` primes a stream.
"""

from __future__ import annotations

import datetime
from typing import Protocol

from django.db.models import Q
from django.utils import timezone

from ..invoke import run_in_thread

GET_STREAM = "get"
BROADCAST_STREAM = "broadcast"


def post_stream(request_id: object) -> str:
    """The stream name of a POST; ``i``/``s`` keep the id 5 apart from the id "5"."""
    return f"post:{'i' if isinstance(request_id, int) else 's'}{request_id}"


def event_id(stream: str, sequence: int) -> str:
    return f"{stream}/{sequence}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    stream, _, sequence = value.rpartition("/")
    if not stream or not sequence.isdigit():
        return None
    return stream, int(sequence)


class EventStore(Protocol):
    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        """Store one event; returns its sequence number, or None when the session is gone."""

    async def replay(self, session_id: str, stream: str, after: int) -> list[tuple[int, dict, str]]:
        """The events of ``stream`` after ``after``: ``(sequence, message, level)`` in order.

        The ``get`` stream includes broadcast events (to every session) since the session began.
        """

    async def purge(self, older_than: datetime.timedelta) -> int: ...


class DatabaseEventStore:
    """Events as rows of ``mcp_server.StreamEvent``."""

    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        return await run_in_thread(self._append, session_id, stream, message, level)

    @staticmethod
    def _append(session_id: str | None, stream: str, message: dict, level: str) -> int | None:
        from django.db import IntegrityError

        from ..models import StreamEvent

        try:
            return StreamEvent.objects.create(
                session_id=session_id, stream=stream, message=message, level=level
            ).pk
        except IntegrityError:
            if session_id is None:
                raise
            # The session was deleted (DELETE, expiry) while one of its requests still ran in
            # some process: nobody will read this event, and that is not a failure.
            return None

    async def replay(self, session_id: str, stream: str, after: int) -> list[tuple[int, dict, str]]:
        return await run_in_thread(self._replay, session_id, stream, after)

    @staticmethod
    def _replay(session_id: str, stream: str, after: int) -> list[tuple[int, dict, str]]:
        from ..models import Session, StreamEvent

        mine = Q(session_id=session_id, stream=stream)
        if stream == GET_STREAM:
            started = Session.objects.filter(pk=session_id).values_list("created_at", flat=True)
            mine |= Q(session__isnull=True, stream=BROADCAST_STREAM, created_at__gte=started[:1])
        rows = StreamEvent.objects.filter(mine, pk__gt=after).order_by("pk")
        return list(rows.values_list("pk", "message", "level"))

    async def purge(self, older_than: datetime.timedelta) -> int:
        from ..models import StreamEvent

        cutoff = timezone.now() - older_than
        deleted, _ = await run_in_thread(StreamEvent.objects.filter(created_at__lt=cutoff).delete)
        return deleted
