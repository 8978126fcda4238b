"""SSE events in the memory of the one process that serves every session (the embedded default).

Where a single process serves the sessions (no ``REDIS_URL``, an in-process channel layer, the
background calls run here: ``site.build_stores``), nobody else ever reads a stored event, so it
need not be a database row: on SQLite each row was a write transaction on the worker thread, the
single writer that every request's other writes queue behind.

What memory cannot keep is what a restart loses. So sequences start from the clock (in
microseconds, as :class:`~.event_store.RedisEventStore` starts its counter), which keeps every one
above the sequences a previous process handed out, and a resume that may need an event stored
before this process started is refused with :class:`~.event_store.EventsDropped`: an id this
process did not hand out, or ``<stream>/0`` of a session older than this store. Nothing is
skipped silently.

The limits and their semantics are those of the other stores: each session keeps at most
``max_events`` events of at most ``max_bytes`` in all, its oldest dropped past either, and a
stream remembers the last event it lost, so a resume from before it is refused.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from mcp_protocol import jsonrpc

from ..invoke import run_in_thread
from ..ports import awaited_sizes, note_encoded
from .event_store import BROADCAST_STREAM, GET_STREAM, MAX_BYTES, MAX_EVENTS, EventsDropped
from .limits import check_limits

# Why a resume from before this process is refused (the 410 a client gets says it).
RESTART_REASON = ("with the memory of the process that stored them, which has restarted (a single "
                  "process keeps its events in memory)")

# One stored event: (sequence, time stored (s), level, message JSON).
Event = tuple[int, float, str, str]


@dataclass
class _Stream:
    events: deque[Event] = field(default_factory=deque)
    # The last sequence this stream lost to the limits or to the retention (0: none).
    dropped_through: int = 0


@dataclass
class _Session:
    streams: dict[str, _Stream] = field(default_factory=dict)
    # Every kept event of the session, oldest first: (sequence, bytes, stream), for the limits.
    order: deque[tuple[int, int, str]] = field(default_factory=deque)
    size: int = 0


class MemoryEventStore:
    """Events in this process's memory, for a deployment that one process serves.

    Never the store of several processes: each would hold events the others' clients resume
    from. ``site.build_stores`` chooses it only where a single process serves every session, and
    ``EVENT_STORE_CLASS`` may still name :class:`~.event_store.DatabaseEventStore` there.
    """

    def __init__(self, *, max_events: int | None = MAX_EVENTS, max_bytes: int | None = MAX_BYTES):
        check_limits(max_events=max_events, max_bytes=max_bytes)
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.started = time.time()
        # The first sequence of this process: above any a previous process handed out, unless
        # that one stored more than a million events a second or the clock went back.
        self.first_sequence = int(self.started * 1_000_000)
        self._next = self.first_sequence
        self._sessions: dict[str, _Session] = {}
        self._broadcasts: dict[str, deque[Event]] = {}
        # Sessions that ended here (forget), with when: an event a request of theirs still sends
        # is not stored (append returns None, as the other stores do for a deleted session).
        self._gone: dict[str, float] = {}
        # Appends come from every event loop of the process (a sync caller runs its own).
        self._lock = threading.Lock()

    async def append(self, session_id: str | None, stream: str, message: dict,
                     level: str = "") -> int | None:
        text = jsonrpc.encode(message)
        if awaited_sizes:
            note_encoded(message, text)
        return self._append_text(session_id, stream, text, level)

    def _append_text(self, session_id: str | None, stream: str, text: str, level: str = "") -> int | None:
        """Store one event already encoded; its sequence, or None when the session ended here."""
        size = len(text.encode("utf-8", "surrogatepass"))
        now = time.time()
        with self._lock:
            if session_id is not None and session_id in self._gone:
                return None
            sequence = self._next
            self._next += 1
            event = (sequence, now, level, text)
            if session_id is None:
                self._broadcasts.setdefault(stream, deque()).append(event)
                return sequence
            session = self._sessions.get(session_id)
            if session is None:
                session = self._sessions[session_id] = _Session()
            kept = session.streams.get(stream)
            if kept is None:
                kept = session.streams[stream] = _Stream()
            kept.events.append(event)
            session.order.append((sequence, size, stream))
            session.size += size
            self._keep_within_limits(session)
        return sequence

    def _keep_within_limits(self, session: _Session) -> None:
        """Drop the session's oldest events while it is past a limit; each stream that loses one
        remembers it (the oldest of the session is the oldest of its stream)."""
        while session.order and (
                (self.max_events is not None and len(session.order) > self.max_events)
                or (self.max_bytes is not None and session.size > self.max_bytes)):
            sequence, size, name = session.order.popleft()
            stream = session.streams[name]
            stream.events.popleft()
            stream.dropped_through = sequence
            session.size -= size

    async def replay(self, session_id: str, stream: str, after: int,
                     broadcasts: str = BROADCAST_STREAM) -> list[tuple[int, dict, str]]:
        if after and not self.first_sequence <= after < self._next:
            # Not an id of this process: a previous one's, whose events are lost with it.
            raise EventsDropped(stream, after, max(after, self.first_sequence - 1), RESTART_REASON)
        with self._lock:
            session = self._sessions.get(session_id)
            kept = session.streams.get(stream) if session is not None else None
            if kept is not None and after < kept.dropped_through:
                raise EventsDropped(stream, after, kept.dropped_through)
            events = [event for event in kept.events if event[0] > after] if kept is not None else []
            shared = [event for event in self._broadcasts.get(broadcasts, ())
                      if event[0] > after] if stream == GET_STREAM else []
        if not after or shared:
            started = await run_in_thread(_session_started, session_id)
            if started is None:
                return []  # the session is gone
            if not after and started < self.started:
                # From its start, of a session older than this process: what a previous one
                # stored for it is lost with it.
                raise EventsDropped(stream, after, self.first_sequence - 1, RESTART_REASON)
            if shared:
                events = sorted(events + [event for event in shared if event[1] >= started])
        return [(sequence, json.loads(text), level) for sequence, _at, level, text in events]

    async def purge(self, older_than: datetime.timedelta) -> int:
        """Remove the events (broadcasts and sessions') stored longer ago than ``older_than``; a
        stream that keeps newer ones remembers its last one removed, as a dropped one."""
        cutoff = time.time() - older_than.total_seconds()
        removed = 0
        with self._lock:
            for name, events in list(self._broadcasts.items()):
                while events and events[0][1] < cutoff:
                    events.popleft()
                    removed += 1
                if not events:
                    del self._broadcasts[name]
            for session_id, session in list(self._sessions.items()):
                while session.order:
                    sequence, size, name = session.order[0]
                    stream = session.streams[name]
                    if stream.events[0][1] >= cutoff:
                        break
                    session.order.popleft()
                    stream.events.popleft()
                    stream.dropped_through = sequence
                    session.size -= size
                    removed += 1
                if not session.order:
                    # Nothing left to replay: as with the other stores, an event past the
                    # retention is gone, and so is what the session held here.
                    del self._sessions[session_id]
            for session_id, ended in list(self._gone.items()):
                if ended < cutoff:
                    del self._gone[session_id]
        return removed

    async def forget(self, session_id: str) -> None:
        """Drop a session's events; an event its requests still send is not stored."""
        with self._lock:
            self._sessions.pop(session_id, None)
            self._gone[session_id] = time.time()

    async def last_sequence(self) -> int:
        """The highest sequence handed out so far (0: none)."""
        return self._next - 1 if self._next > self.first_sequence else 0


def _session_started(session_id: str) -> float | None:
    """When the session began (a timestamp), or None when it is gone."""
    from ..models import Session

    created = Session.objects.filter(pk=session_id).values_list("created_at", flat=True).first()
    return None if created is None else created.timestamp()
