"""A stream the client listens on: the session's GET stream, or a POST stream it resumed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from mcp_protocol import jsonrpc

from .. import logging_levels
from .event_store import GET_STREAM, EventsDropped, event_id, post_stream
from .liveness import request_lost, request_stopped
from .mailbox import TIMED_OUT, Mailbox
from .redis_client import RedisUnavailable
from .sse import SSEResponse

if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.http")
T = TypeVar("T")

# A broadcast hands one message to every GET stream of the process: it is encoded for the first
# and the text reused for the others. (The message is held here, so no other takes its identity.)
_last_encoded: tuple[dict, str] | None = None


def _encoded(message: dict) -> str:
    global _last_encoded
    last = _last_encoded
    if last is not None and last[0] is message:
        return last[1]
    text = jsonrpc.encode(message)
    _last_encoded = (message, text)
    return text


class ListenStream:
    """Writes events handed to this process for one stream, after replaying what was missed."""

    # One per open stream: no per-instance dict, and nothing made before it is needed.
    __slots__ = ("_after", "_backlog", "_done", "_ending", "_last_written", "_queue", "_replayed",
                 "final_id", "overflowed", "session_id", "slot", "sse", "stream", "token", "transport")

    def __init__(self, transport: StreamableHTTPTransport, session_id: str, stream: str,
                 sse: SSEResponse, token: str, final_id: object = None):
        self.transport = transport
        self.session_id = session_id
        self.stream = stream
        self.sse = sse
        self.token = token
        # For a resumed POST stream: the id of its request, whose response ends the stream.
        self.final_id = final_id
        self._queue = Mailbox()  # of (sequence, message, level), or None: the end
        # Live events do not arrive in sequence order (concurrent broadcasts, say), so an event is
        # skipped only when the client had it (at or before Last-Event-ID) or the replay wrote it
        # (made with the first: a GET stream opened afresh never needs it).
        self._after = 0
        self._replayed: set[int] | None = None
        self._backlog: list[tuple[int, dict, str]] | None = None
        self._done = False
        self.overflowed = False
        # The highest sequence written here, and the retry hint the stream ends with (end()).
        self._last_written = 0
        self._ending: int | None = None
        # The session's stream slot this stream holds (see limits.StreamSlots), renewed with it.
        self.slot = -1

    def push(self, sequence: int, message: dict, level: str = "") -> None:
        if self.overflowed:
            return  # the stream is being cut off; the client resumes from the store
        if self._queue.qsize() >= self.transport.options.max_queued_stream_events:
            # Writing does not keep up (a server whose send() waits on a client that stopped
            # reading): skipping events would leave a silent gap, so the stream ends instead.
            self.overflowed = True
            self._queue.put_nowait(None)
            return
        self._queue.put_nowait((sequence, message, level))

    def close(self) -> None:
        self._queue.put_nowait(None)

    def end(self, retry_ms: int) -> None:
        """End the stream with an SSE retry hint and the id to resume from (its process drains):
        the client resumes it with Last-Event-ID on another process, where what was stored
        meanwhile is replayed. The events queued before it are written first."""
        if self._ending is None:
            self._ending = retry_ms
            self._queue.put_nowait(None)

    async def _hint_resume(self, retry_ms: int) -> None:
        # The id of the last event written (or resumed from); on a stream that has had none, the
        # store's last sequence now: every event stored for it later is replayed after that.
        last: int | None = max(self._last_written, self._after)
        if not last and self._backlog is None:
            last_sequence = getattr(self.transport.events, "last_sequence", None)
            last = await last_sequence() if last_sequence is not None else None
        await self.sse.event("", None if last is None else event_id(self.stream, last), retry_ms=retry_ms)

    async def load_backlog(self, after: int) -> None:
        """Read the events after ``after`` that :meth:`run` replays first; raises
        :class:`~.event_store.EventsDropped` (before the response starts) if some are gone."""
        self._after = after
        self._backlog = await self._replay(after)

    async def run(self, after: int | None) -> None:
        """Replay the events after ``after`` (if resuming), then write live ones until closed."""
        if after is not None:
            if self._backlog is None:
                await self.load_backlog(after)
            for sequence, message, level in self._backlog:
                self._remember(sequence)
                if not await self._emit(sequence, message, level) or self._done:
                    return
        loop = asyncio.get_running_loop()
        interval = self.transport.options.keepalive_interval
        keepalive_at = loop.time() + interval
        # A resumed POST stream also watches the process serving its request, which may die.
        watch = self.final_id is not None
        wait = min(interval, self.transport.options.process_heartbeat_interval) if watch else interval
        if watch and not self._done:
            await self._unless_redis_fails(self._watch_request())
        while not self._done and not self.sse.closed:
            item = await self._queue.get(max(0.0, min(wait, keepalive_at - loop.time())))
            if item is TIMED_OUT:
                if watch:
                    await self._unless_redis_fails(self._watch_request())
                if loop.time() < keepalive_at:
                    continue
                keepalive_at = loop.time() + interval
                if not await self.sse.comment("keepalive"):
                    return
                if not await self._unless_redis_fails(
                        self.transport.renew_stream(self.session_id, self.stream, self.token), True):
                    return  # another process holds it now
                await self._unless_redis_fails(
                    self.transport.stream_slots.renew(self.session_id, self.slot, self.token))
                continue
            if item is None:
                if self._ending is not None and not self.overflowed and not self.sse.closed:
                    await self._hint_resume(self._ending)
                return
            if not await self._write(*item):
                return

    @staticmethod
    async def _unless_redis_fails(call: Awaitable[T], meanwhile: T | None = None) -> T | None:
        """``call``'s result, or ``meanwhile`` while Redis does not answer (a failover, say): the
        stream waits on, and the watch or renewal is made again at the next interval, rather
        than ending the stream of a request that may still be answered."""
        try:
            return await call
        except RedisUnavailable as exc:
            logger.info("a listening stream waits for Redis: %s", exc)
            return meanwhile

    async def _watch_request(self) -> None:
        """A resumed POST stream's request: if its process died, its error is stored and comes
        here; if it runs nowhere, its response was stored before it let go of its id (look
        again), or it is lost and the stream ends with an error rather than waiting forever."""
        transport, request_id = self.transport, self.final_id
        if (await transport.settle_orphaned_request(self.session_id, request_id)
                or await transport.request_in_flight(self.session_id, request_id)):
            return
        try:
            stored = await self._replay(self._after)
        except EventsDropped:
            stored = []  # what is left of the response is gone: the stream ends with the error
        for sequence, message, level in stored:
            if not await self._write(sequence, message, level) or self._done:
                return
        if await transport.request_cancelled(self.session_id, request_id):
            self._done = True  # a cancelled request has no response: the stream just ends
            return
        await self.sse.event(jsonrpc.encode(request_lost(request_id)))
        self._done = True

    async def _replay(self, after: int) -> list[tuple[int, dict, str]]:
        """The stored events after ``after``. On a resumed POST stream, when its id was sent again
        after its process died (a live process serves it now), the error the earlier request got
        and what came before it belong to that earlier request: they are left out (for good)."""
        events = await self.transport.events.replay(self.session_id, self.stream, after,
                                                    broadcasts=self.transport.broadcast_stream)
        if self.final_id is None:
            return events
        stopped = request_stopped(self.final_id)
        earlier = [index for index, (_sequence, message, _level) in enumerate(events) if message == stopped]
        if earlier and await self.transport.request_served_alive(self.session_id, self.final_id):
            for sequence, _message, _level in events[:earlier[-1] + 1]:
                self._remember(sequence)
            return events[earlier[-1] + 1:]
        return events

    def _remember(self, sequence: int) -> None:
        if self._replayed is None:
            self._replayed = {sequence}
        else:
            self._replayed.add(sequence)

    async def _write(self, sequence: int, message: dict, level: str) -> bool:
        if sequence <= self._after or (self._replayed is not None and sequence in self._replayed):
            return True  # the client has it already
        return await self._emit(sequence, message, level)

    async def _emit(self, sequence: int, message: dict, level: str) -> bool:
        if level and not await self._level_passes(level):
            return True
        written = await self.sse.event(_encoded(message), event_id(self.stream, sequence))
        if written:
            self._last_written = max(self._last_written, sequence)
        if self.final_id is not None:
            # A resumed POST stream may read its events again (_watch_request): none twice. (Not
            # kept for a GET stream, which lives long and never reads them again.)
            self._remember(sequence)
        # A resumed POST stream ends with its request's response (matched by stream name, which
        # names a long id by its digest), or with an error that could name no id.
        if self.stream != GET_STREAM and "method" not in message and "id" in message \
                and (message["id"] is None or post_stream(message["id"]) == self.stream):
            self._done = True
        return written

    async def _level_passes(self, level: str) -> bool:
        record = await self.transport.sessions.peek(self.session_id)
        return record is not None and logging_levels.passes(level, record.log_level or None)

    def disconnected(self) -> None:
        self.sse.disconnected()
        self._queue.put_nowait(None)
