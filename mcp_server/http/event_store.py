"""Where SSE events are written before they are sent, so a client can resume on any process.

An event id on the wire is ``"<stream>/<sequence>"``: the stream (``get`` or ``post:<id>``)
and a number that grows with every stored event; ``"<stream>/0"`` primes a stream.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from django.db.models import Q
from django.utils import timezone

from ..invoke import run_in_thread
from .redis_client import RedisClients, Script

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

    async def forget(self, session_id: str) -> None:
        """Drop a session's events (it was deleted or expired)."""


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

    async def forget(self, session_id: str) -> None:
        """Nothing to do: a session's rows go with it (on delete cascade)."""


# KEYS: the sequence counter, the events of the session (or the broadcasts), the session's shared
# state entry ("" for a broadcast). ARGV: stream, level, message JSON, time (ms), retention (ms).
# Returns the new sequence number, or -1 when the session's entry is gone.
_APPEND = Script("""
if KEYS[3] ~= '' and redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
local sequence = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], sequence,
           sequence .. ' ' .. ARGV[4] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return sequence
""")

# KEYS: the broadcasts. ARGV: the cutoff time (ms). Broadcasts are kept in sequence order, which
# is time order: remove from the oldest while older than the cutoff.
_PURGE = Script("""
local removed = 0
while true do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  local first_space = string.find(oldest[1], ' ', 1, true)
  local second_space = string.find(oldest[1], ' ', first_space + 1, true)
  if tonumber(string.sub(oldest[1], first_space + 1, second_space - 1)) >= tonumber(ARGV[1]) then break end
  redis.call('ZREM', KEYS[1], oldest[1])
  removed = removed + 1
end
return removed
""")


class RedisEventStore:
    """Events in Redis, for deployments with ``REDIS_URL``: no database row and no worker thread
    per event, one round trip instead.

    Each session's events are a sorted set (score: the sequence number, from one counter shared by
    every process) that expires ``retention`` seconds after its last event, and is dropped when the
    session ends; broadcasts are one more sorted set, purged by age. An event of a session whose
    shared-state entry is gone is only stored when the session's row still exists.
    """

    def __init__(self, url: str, retention: float, prefix: str = "mcp:",
                 session_key: Callable[[str], str] | None = None, clients: Any = None):
        self.clients = clients if clients is not None else RedisClients(url)
        self.retention = retention
        self.prefix = prefix
        self._session_key = session_key or (lambda session_id: f"session:{session_id}")

    def _events_key(self, session_id: str | None) -> str:
        return f"{self.prefix}events:{session_id if session_id is not None else BROADCAST_STREAM}"

    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        from mcp_protocol import jsonrpc

        keys = [f"{self.prefix}events:sequence", self._events_key(session_id),
                self.prefix + self._session_key(session_id) if session_id is not None else ""]
        args = [stream, level, jsonrpc.encode(message), int(time.time() * 1000),
                max(1, int(self.retention * 1000))]
        connection = self.clients.get()
        sequence = await connection.run_script(_APPEND, keys, args)
        if sequence >= 0:
            return sequence
        # The shared-state entry expired (a session that never expires, idle for a day) or the
        # session is gone: its row decides.
        if not await run_in_thread(_session_exists, session_id):
            return None
        return await connection.run_script(_APPEND, [*keys[:2], ""], args)

    async def replay(self, session_id: str, stream: str, after: int) -> list[tuple[int, dict, str]]:
        connection = self.clients.get()
        found = [event for event in _parse_events(
            await connection.execute("ZRANGEBYSCORE", self._events_key(session_id), f"({after}", "+inf"))
            if event[1] == stream]
        if stream == GET_STREAM:
            started = await run_in_thread(_session_started_ms, session_id)
            if started is not None:
                broadcasts = await connection.execute(
                    "ZRANGEBYSCORE", self._events_key(None), f"({after}", "+inf")
                found += [event for event in _parse_events(broadcasts) if event[2] >= started]
        found.sort(key=lambda event: event[0])
        return [(sequence, json.loads(text), level) for sequence, _stream, _ms, level, text in found]

    async def purge(self, older_than: datetime.timedelta) -> int:
        cutoff = int((time.time() - older_than.total_seconds()) * 1000)
        return await self.clients.get().run_script(_PURGE, [self._events_key(None)], [cutoff])

    async def forget(self, session_id: str) -> None:
        await self.clients.get().execute("DEL", self._events_key(session_id))


def _parse_events(members: list[str]) -> list[tuple[int, str, int, str, str]]:
    """``(sequence, stream, time in ms, level, message JSON)`` of stored members."""
    events = []
    for member in members:
        sequence, ms, stream, level, text = member.split(" ", 4)
        events.append((int(sequence), stream, int(ms), level, text))
    return events


def _session_exists(session_id: str) -> bool:
    from ..models import Session

    return Session.objects.filter(pk=session_id).exists()


def _session_started_ms(session_id: str) -> int | None:
    from ..models import Session

    started = Session.objects.filter(pk=session_id).values_list("created_at", flat=True).first()
    return None if started is None else int(started.timestamp() * 1000)
