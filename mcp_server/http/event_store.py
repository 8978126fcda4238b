"""Where SSE events are written before they are sent, so a client can resume on any process.

An event id on the wire is ``"<stream>/<sequence>"``: the stream (``get`` or ``post:<key>``)
and a number that grows with every stored event; ``"<stream>/0"`` primes a stream.

Each session keeps at most ``max_events`` events of at most ``max_bytes`` in all: past either,
its oldest events are dropped, and a stream that lost events remembers the last one it lost, so
a resume from before it is refused (:class:`EventsDropped`) instead of silently skipping them.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from django.db.models import Q
from django.utils import timezone

from mcp_protocol import jsonrpc

from ..invoke import run_in_thread
from ..ports import awaited_sizes, note_encoded
from ..rows import insert_row
from .limits import check_limits
from .redis_client import RedisClients, Script

GET_STREAM = "get"
BROADCAST_STREAM = "broadcast"

# A string request id is named literally in its stream (and so in every event id of the stream)
# only when it is short and plain; any other id is named by a digest, so that a long id is not
# copied into each stored event, event id and key, and a name never holds a space or a slash.
_LITERAL_ID = re.compile(r"[A-Za-z0-9._~-]{1,64}")


@dataclass(frozen=True)
class HashedRequestId:
    """A request known by its stream's name alone: a long or unusual id is named by a digest
    (see :func:`post_stream`), from which the id cannot be read back."""

    stream: str


def broadcast_stream(group: str) -> str:
    """The stream a server's broadcasts are stored in, named after its group of processes, so
    that servers sharing a store never replay each other's."""
    return f"{BROADCAST_STREAM}:{group}"


def post_stream(request_id: object) -> str:
    """The stream name of a POST; ``i``/``s`` keep the id 5 apart from the id "5"."""
    if isinstance(request_id, HashedRequestId):
        return request_id.stream
    if isinstance(request_id, int) and not isinstance(request_id, bool) and abs(request_id) < 10**18:
        return f"post:i{request_id}"
    if isinstance(request_id, str) and _LITERAL_ID.fullmatch(request_id):
        return f"post:s{request_id}"
    kind = "i" if isinstance(request_id, int) else "s"
    digest = hashlib.sha256(f"{kind}{request_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"post:h{digest}"


def request_id_of(stream: str) -> object:
    """The request id of a ``post:`` stream (None for another stream); a digest-named one is a
    :class:`HashedRequestId`."""
    if not stream.startswith("post:"):
        return None
    kind, value = stream[5:6], stream[6:]
    if kind == "h":
        return HashedRequestId(stream)
    return int(value) if kind == "i" and value.lstrip("-").isdigit() else value


def request_key(request_id: Any) -> str:
    """A request id as a key: the id 5 and the id "5" are different requests."""
    return post_stream(request_id).removeprefix("post:")


def event_id(stream: str, sequence: int) -> str:
    return f"{stream}/{sequence}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    stream, _, sequence = value.rpartition("/")
    if not stream or not sequence.isdigit() or len(value) > 128:
        return None
    return stream, int(sequence)


LIMITS_REASON = "to keep the session within its stored-event limits"


class EventsDropped(Exception):
    """Events a resumed stream would replay were dropped to keep the session within its limits."""

    def __init__(self, stream: str, after: int, dropped_through: int, reason: str = LIMITS_REASON):
        super().__init__(f"events of stream {stream!r} after {after} were dropped (through "
                         f"{dropped_through}) {reason}")
        self.stream = stream
        self.after = after
        self.dropped_through = dropped_through
        self.reason = reason


class EventStore(Protocol):
    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        """Store one event; returns its sequence number, or None when the session is gone."""

    async def replay(self, session_id: str, stream: str, after: int,
                     broadcasts: str = BROADCAST_STREAM) -> list[tuple[int, dict, str]]:
        """The events of ``stream`` after ``after``: ``(sequence, message, level)`` in order.

        The ``get`` stream includes the events of the stream ``broadcasts`` (stored with no session:
        each server's notifications to all its sessions) since the session began. Raises
        :class:`EventsDropped` when some of them were dropped (the session's limits).
        """

    async def purge(self, older_than: datetime.timedelta) -> int:
        """Remove the broadcast events (of every server) older than ``older_than``; a store may
        remove a session's old events too (they also expire with the retention)."""

    async def forget(self, session_id: str) -> None:
        """Drop a session's events (it was deleted or expired)."""

    # Optional (the built-in stores have it): ``async def last_sequence(self) -> int``, the highest
    # sequence handed out so far. A draining process names it to the client of a listening stream
    # that got no event yet, so that it resumes from there (see listen.ListenStream.end).


# A \u0000 escape in JSON text: after an even run of backslashes (an odd one escapes the last).
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
# What a session may keep by default: its oldest events are dropped past either.
MAX_EVENTS = 1000
MAX_BYTES = 16 * 1024 * 1024


class DatabaseEventStore:
    """Events as rows of ``mcp_server.StreamEvent``.

    A session row counts its events and their bytes, updated with each event (the update also
    tells whether the session still exists). Past a limit, the oldest events are dropped down to
    :data:`LOW_WATER` of it, so the drop (a scan of the session's events) runs once every many
    events rather than on each one.
    """

    def __init__(self, *, max_events: int | None = MAX_EVENTS, max_bytes: int | None = MAX_BYTES):
        check_limits(max_events=max_events, max_bytes=max_bytes)
        self.max_events = max_events
        self.max_bytes = max_bytes

    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        return await run_in_thread(self._append, session_id, stream, message, level)

    def _append(self, session_id: str | None, stream: str, message: dict, level: str) -> int | None:
        from django.db import DataError

        text = jsonrpc.encode(message)
        if awaited_sizes:
            note_encoded(message, text)
        size = len(text.encode("utf-8"))
        try:
            return self._insert(session_id, stream, text, level, size)
        except DataError:
            # PostgreSQL's jsonb takes no NUL, and a handler's result may hold one: the event is
            # kept as the wire carries it, with U+FFFD for it.
            return self._insert(session_id, stream, _NUL_ESCAPE.sub("\\1\ufffd", text), level, size)

    def _insert(self, session_id: str | None, stream: str, text: str, level: str,
                size: int) -> int | None:
        from django.db import router, transaction

        from ..models import StreamEvent

        using = router.db_for_write(StreamEvent)
        row = {"session": session_id, "stream": stream, "message": text, "level": level,
               "size": size, "dropped": False, "created_at": timezone.now()}
        if session_id is None:
            return insert_row(using, StreamEvent, row)
        with transaction.atomic(using=using):
            # The row lock taken here orders this event against a delete of the session.
            totals = _count_event(session_id, size)
            if totals is None:
                # The session was deleted (DELETE, expiry) while one of its requests still ran in
                # some process: nobody will read this event, and that is not a failure.
                return None
            sequence = insert_row(using, StreamEvent, row)
            if self._over(*totals, 1.0):
                self._drop_oldest(session_id)
        return sequence

    def _over(self, count: int, total: int, share: float) -> bool:
        return (self.max_events is not None and count > self.max_events * share) or \
            (self.max_bytes is not None and total > self.max_bytes * share)

    def _drop_oldest(self, session_id: str) -> None:
        """Drop the session's oldest events down to :data:`LOW_WATER` of the limits; the last
        dropped event of each stream stays as a marker (no message) that a resume runs into."""
        from django.db.models import Count, Sum

        from ..models import Session, StreamEvent

        kept = StreamEvent.objects.filter(session_id=session_id, dropped=False)
        # Counted afresh: purge() removes old rows without touching the counts.
        totals = kept.aggregate(count=Count("pk"), total=Sum("size"))
        count, total = totals["count"], totals["total"] or 0
        dropped: list[int] = []
        markers: dict[str, int] = {}
        for pk, stream, size in kept.order_by("pk").values_list("pk", "stream", "size").iterator():
            if not self._over(count, total, LOW_WATER):
                break
            dropped.append(pk)
            markers[stream] = pk
            count, total = count - 1, total - size
        if dropped:
            StreamEvent.objects.filter(session_id=session_id, dropped=True, stream__in=list(markers)).delete()
            StreamEvent.objects.filter(pk__in=set(dropped) - set(markers.values())).delete()
            StreamEvent.objects.filter(pk__in=list(markers.values())).update(dropped=True, message={}, size=0)
        Session.objects.filter(pk=session_id).update(stored_events=count, stored_bytes=total)

    async def replay(self, session_id: str, stream: str, after: int,
                     broadcasts: str = BROADCAST_STREAM) -> list[tuple[int, dict, str]]:
        return await run_in_thread(self._replay, session_id, stream, after, broadcasts)

    @staticmethod
    def _replay(session_id: str, stream: str, after: int, broadcasts: str) -> list[tuple[int, dict, str]]:
        from ..models import Session, StreamEvent

        mine = Q(session_id=session_id, stream=stream)
        if stream == GET_STREAM:
            started = Session.objects.filter(pk=session_id).values_list("created_at", flat=True)
            mine |= Q(session__isnull=True, stream=broadcasts, created_at__gte=started[:1])
        rows = StreamEvent.objects.filter(mine, pk__gt=after).order_by("pk")
        found = list(rows.values_list("pk", "message", "level", "dropped"))
        lost = [pk for pk, _message, _level, dropped in found if dropped]
        if lost:
            raise EventsDropped(stream, after, lost[-1])
        return [(pk, message, level) for pk, message, level, _dropped in found]

    async def purge(self, older_than: datetime.timedelta) -> int:
        from ..models import StreamEvent

        cutoff = timezone.now() - older_than
        deleted, _ = await run_in_thread(StreamEvent.objects.filter(created_at__lt=cutoff).delete)
        return deleted

    async def forget(self, session_id: str) -> None:
        """Nothing to do: a session's rows go with it (on delete cascade)."""

    async def last_sequence(self) -> int:
        """The highest sequence handed out so far (0: none)."""
        from django.db.models import Max

        from ..models import StreamEvent

        found = await run_in_thread(lambda: StreamEvent.objects.aggregate(last=Max("pk"))["last"])
        return found or 0


def _count_event(session_id: str, size: int) -> tuple[int, int] | None:
    """Add one event of ``size`` bytes to the session's counts: the new ``(count, bytes)``, or None
    when the session is gone. One statement where the database can return what it updated."""
    from django.db import connections, router
    from django.db.models import F

    from ..models import Session

    using = router.db_for_write(Session)
    connection = connections[using]
    if connection.vendor in ("postgresql", "sqlite"):
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {quote(Session._meta.db_table)} SET {quote('stored_events')} = "
                f"{quote('stored_events')} + 1, {quote('stored_bytes')} = {quote('stored_bytes')} + %s "
                f"WHERE {quote('id')} = %s RETURNING {quote('stored_events')}, {quote('stored_bytes')}",
                [size, session_id])
            row = cursor.fetchone()
        return None if row is None else (row[0], row[1])
    rows = Session.objects.using(using).filter(pk=session_id)
    if not rows.update(stored_events=F("stored_events") + 1, stored_bytes=F("stored_bytes") + size):
        return None
    return rows.values_list("stored_events", "stored_bytes").get()


# What a drop leaves of the limits: the next drop is many events away.
LOW_WATER = 0.9


# KEYS: the sequence counter, the events of the stream (or the broadcasts), the session's index of
# events, the session's byte count, its shared-state entry ("" for a broadcast), and optionally a
# shared-state key to read once the event is stored (who holds the stream: see append_watched),
# then optionally a request's claim and its session's count of claims, the claim released once the
# event is stored (see append_releasing).
# ARGV: stream, level, message JSON, time (ms), retention (ms), the clock in microseconds (the
# counter's start when missing), max events, max bytes (0: no limit), the prefix of stream keys,
# and with a claim, the value it must hold to be released ("" for any).
# Returns the new sequence number (with the watched key: {sequence, its value}), or -1 when the
# session's entry is gone (nothing is stored, and the claim is left as it is).
#
# The counter starts from the clock whenever it is missing (first use, or Redis lost its data): a
# sequence then stays above every one handed out before, so a client resuming after an old id
# never misses an event that reused a number. ('%.0f': Lua would write a large number as 1e+15.)
# Each stream is a sorted set of its own (score: sequence), so a resume reads only its stream; the
# index (members "<sequence> <bytes> <stream>") orders the session's events for dropping the
# oldest, which leaves a "dropped" member in its stream, scored by the last sequence it lost.
_APPEND = Script("""
if KEYS[5] ~= '' and redis.call('EXISTS', KEYS[5]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[6], 'NX') end
local sequence = string.format('%.0f', redis.call('INCR', KEYS[1]))
redis.call('ZADD', KEYS[2], sequence, sequence .. ' ' .. ARGV[4] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
if KEYS[3] == '' then return tonumber(sequence) end  -- a broadcast
local size = string.len(ARGV[3])
redis.call('ZADD', KEYS[3], sequence, sequence .. ' ' .. size .. ' ' .. ARGV[1])
local bytes = redis.call('INCRBY', KEYS[4], size)
local count = redis.call('ZCARD', KEYS[3])
local max_events, max_bytes = tonumber(ARGV[7]), tonumber(ARGV[8])
while (max_events > 0 and count > max_events) or (max_bytes > 0 and bytes > max_bytes) do
  local oldest = redis.call('ZPOPMIN', KEYS[3])
  if #oldest == 0 then break end
  local first = string.find(oldest[1], ' ', 1, true)
  local second = string.find(oldest[1], ' ', first + 1, true)
  local dropped = string.sub(oldest[1], 1, first - 1)
  local stream_key = ARGV[9] .. string.sub(oldest[1], second + 1)
  redis.call('ZREMRANGEBYSCORE', stream_key, dropped, dropped)
  redis.call('ZADD', stream_key, dropped, 'dropped')
  redis.call('PEXPIRE', stream_key, ARGV[5])
  bytes = redis.call('DECRBY', KEYS[4], tonumber(string.sub(oldest[1], first + 1, second - 1)))
  count = count - 1
end
redis.call('PEXPIRE', KEYS[3], ARGV[5])
redis.call('PEXPIRE', KEYS[4], ARGV[5])
if KEYS[7] then
  local claim = redis.call('GET', KEYS[7])
  if claim and (ARGV[10] == '' or claim == ARGV[10]) then
    redis.call('DEL', KEYS[7])
    if redis.call('EXISTS', KEYS[8]) == 1 then redis.call('DECR', KEYS[8]) end
  end
end
if KEYS[6] then return {tonumber(sequence), redis.call('GET', KEYS[6])} end
return tonumber(sequence)
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

# KEYS: the session's index, its byte count, its listening stream; optionally a counter to read and
# remove, then keys to remove and counters to take one from (each that exists, once per time named).
# ARGV: the prefix of stream keys; with those keys, how many of them are removed (the rest counted).
_FORGET = Script("""
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local first = string.find(member, ' ', 1, true)
  local second = string.find(member, ' ', first + 1, true)
  redis.call('DEL', ARGV[1] .. string.sub(member, second + 1))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if ARGV[2] then
  local removed = 4 + tonumber(ARGV[2])
  for i = 5, removed do redis.call('DEL', KEYS[i]) end
  for i = removed + 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('DECR', KEYS[i]) end
  end
end
if KEYS[4] then return redis.call('GETDEL', KEYS[4]) end
return 0
""")


class RedisEventStore:
    """Events in Redis, for deployments with ``REDIS_URL``: no database row and no worker thread
    per event, one round trip instead.

    Each stream of a session is a sorted set (score: the sequence number, from one counter shared
    by every process) that expires ``retention`` seconds after its last event; a session's index
    and byte count keep it within ``max_events`` and ``max_bytes``, and everything is dropped when
    the session ends. Broadcasts are one more sorted set, purged by age. An event of a session
    whose shared-state entry is gone is only stored when the session's row still exists.
    """

    def __init__(self, url: str, retention: float, prefix: str = "mcp:",
                 session_key: Callable[[str], str] | None = None, *,
                 max_events: int | None = MAX_EVENTS, max_bytes: int | None = MAX_BYTES,
                 clients: Any = None):
        check_limits(max_events=max_events, max_bytes=max_bytes)
        self.clients = clients if clients is not None else RedisClients(url)
        self.retention = retention
        self.prefix = prefix
        self._session_key = session_key or (lambda session_id: f"session:{session_id}")
        self.max_events = max_events
        self.max_bytes = max_bytes

    def _stream_prefix(self, session_id: str) -> str:
        return f"{self.prefix}events:{session_id}:stream:"

    def _stream_key(self, session_id: str | None, stream: str) -> str:
        if session_id is None:  # a server's broadcasts
            return f"{self.prefix}events:{stream}"
        return self._stream_prefix(session_id) + stream

    def _session_keys(self, session_id: str) -> list[str]:
        """The session's index of events and its byte count."""
        return [f"{self.prefix}events:{session_id}:index", f"{self.prefix}events:{session_id}:bytes"]

    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        sequence, _value = await self._append(session_id, stream, message, level, None)
        return sequence

    # These two return the coroutine of _append to await (one layer less per event stored).
    def append_watched(self, session_id: str, stream: str, message: dict, watched: str, level: str = "",
                       *, text: str | None = None) -> Awaitable[tuple[int | None, str | None]]:
        """Store an event of a session's stream and, in the same step, read the shared-state key
        ``watched`` (unprefixed; this store shares the state's Redis and prefix): the sequence
        (None: the session is gone) and the key's value. One round trip instead of two, and
        atomic: the value is the one right after the event was stored. ``text``: the message's
        JSON text, when the caller has it already (it writes it out too: encoded once)."""
        return self._append(session_id, stream, message, level, self.prefix + watched, text=text)

    def append_releasing(self, session_id: str, stream: str, message: dict, watched: str,
                         claim: str, counter: str, expected: str | None, level: str = "", *,
                         text: str | None = None) -> Awaitable[tuple[int | None, str | None]]:
        """:meth:`append_watched`, and once the event is stored, in the same step, the shared-state
        key ``claim`` removed (only while it holds ``expected``, when given) and one taken from
        ``counter`` (all unprefixed): a request's response stored and its id let go of in one
        round trip. When the session is gone (the sequence is None), the claim is left as it is."""
        return self._append(session_id, stream, message, level, self.prefix + watched,
                            (self.prefix + claim, self.prefix + counter, expected or ""), text=text)

    async def _append(self, session_id: str | None, stream: str, message: dict, level: str,
                      watched: str | None,
                      release: tuple[str, str, str] | None = None, *,
                      text: str | None = None) -> tuple[int | None, str | None]:
        index, size = self._session_keys(session_id) if session_id is not None else ("", "")
        keys = [f"{self.prefix}events:sequence", self._stream_key(session_id, stream), index, size,
                self.prefix + self._session_key(session_id) if session_id is not None else ""]
        if watched is not None:
            keys.append(watched)
        now = time.time()
        if text is None:
            text = jsonrpc.encode(message)
        if awaited_sizes:
            note_encoded(message, text)
        args = [stream, level, text, int(now * 1000), max(1, int(self.retention * 1000)),
                int(now * 1_000_000), self.max_events or 0, self.max_bytes or 0,
                self._stream_prefix(session_id) if session_id is not None else ""]
        if release is not None:  # (a watched key comes first: KEYS[7] and KEYS[8])
            keys += release[:2]
            args.append(release[2])
        connection = self.clients.get()
        reply = await connection.run_script(_APPEND, keys, args)
        if session_id is None:
            await connection.execute("SADD", self._broadcast_keys, keys[1])  # for purge()
        if reply == -1:
            # The shared-state entry expired (a session that never expires, idle for a day) or
            # the session is gone: its row decides.
            if not await run_in_thread(_session_exists, session_id):
                return None, None
            reply = await connection.run_script(_APPEND, [*keys[:4], "", *keys[5:]], args)
        if isinstance(reply, list):
            return int(reply[0]), reply[1]
        return reply, None

    async def replay(self, session_id: str, stream: str, after: int,
                     broadcasts: str = BROADCAST_STREAM) -> list[tuple[int, dict, str]]:
        connection = self.clients.get()
        found = await connection.execute(
            "ZRANGEBYSCORE", self._stream_key(session_id, stream), f"({after}", "+inf", "WITHSCORES")
        if "dropped" in found[::2]:
            position = found.index("dropped")
            raise EventsDropped(stream, after, int(float(found[position + 1])))
        events = _parse_events(found[::2])
        if stream == GET_STREAM:
            started = await run_in_thread(_session_started_ms, session_id)
            if started is not None:
                broadcasts = await connection.execute(
                    "ZRANGEBYSCORE", self._stream_key(None, broadcasts), f"({after}", "+inf")
                events += [event for event in _parse_events(broadcasts) if event[1] >= started]
                events.sort(key=lambda event: event[0])
        return [(sequence, json.loads(text), level) for sequence, _ms, level, text in events]

    @property
    def _broadcast_keys(self) -> str:
        """The set of the keys of every server's broadcasts."""
        return f"{self.prefix}events:broadcast-streams"

    async def purge(self, older_than: datetime.timedelta) -> int:
        cutoff = int((time.time() - older_than.total_seconds()) * 1000)
        connection = self.clients.get()
        removed = 0
        for key in await connection.execute("SMEMBERS", self._broadcast_keys):
            removed += await connection.run_script(_PURGE, [key], [cutoff])
        return removed

    async def last_sequence(self) -> int:
        """The highest sequence handed out so far (0: none)."""
        found = await self.clients.get().execute("GET", f"{self.prefix}events:sequence")
        return int(found) if found else 0

    async def forget(self, session_id: str) -> None:
        await self.clients.get().run_script(
            _FORGET, [*self._session_keys(session_id), self._stream_key(session_id, GET_STREAM)],
            [self._stream_prefix(session_id)])

    async def forget_taking(self, session_id: str, counter: str, removed: list[str] = (),
                            uncounted: list[str] = ()) -> int:
        """:meth:`forget`, and in the same round trip the value of ``counter`` read and removed
        (0: absent), the keys ``removed`` removed and one taken from each of the counters
        ``uncounted`` that exists (as the shared state's ``delete_uncounting``). The keys are the
        shared state's, unprefixed: this store shares the state's Redis and prefix."""
        keys = [*self._session_keys(session_id), self._stream_key(session_id, GET_STREAM),
                self.prefix + counter]
        args = [self._stream_prefix(session_id)]
        if removed or uncounted:
            keys += [self.prefix + key for key in (*removed, *uncounted)]
            args.append(len(removed))
        value = await self.clients.get().run_script(_FORGET, keys, args)
        return int(value) if value else 0


def _parse_events(members: list[str]) -> list[tuple[int, int, str, str]]:
    """``(sequence, time in ms, level, message JSON)`` of stored members."""
    events = []
    for member in members:
        sequence, ms, level, text = member.split(" ", 3)
        events.append((int(sequence), int(ms), level, text))
    return events


def _session_exists(session_id: str) -> bool:
    from ..models import Session

    return Session.objects.filter(pk=session_id).exists()


def _session_started_ms(session_id: str) -> int | None:
    from ..models import Session

    started = Session.objects.filter(pk=session_id).values_list("created_at", flat=True).first()
    return None if started is None else int(started.timestamp() * 1000)
