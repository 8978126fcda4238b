"""One HTTP response written as Server-Sent Events."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_protocol import sse

from .send_window import MAX_BUFFERED_BYTES_KEY, SEND_WINDOW_KEY, STALL_SECONDS, SendWindow

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


# How long an event held back (a POST stream's priming event) waits for company: a handler that
# answers within it sends one chunk with both, one write for the ASGI server instead of two.
HOLD_SECONDS = 0.1


class SSEResponse:
    """Writes events one at a time; after the client is gone every write returns False.

    ``max_buffered_bytes``: under daphne, once this many bytes wait for the client, writing waits
    for it to read, and a client that reads nothing for a while is cut off (see
    :class:`.send_window.SendWindow`); the events are stored, so the client resumes with
    Last-Event-ID. None: no limit. ``stall_timeout``: how long a write waits for a client that
    reads nothing before it is cut off.
    """

    # One per open stream: slots, and the start message dropped once sent.
    __slots__ = ("_flush", "_flushing", "_held", "_lock", "_send", "_stall_timeout", "_start", "_window",
                 "closed", "started")

    def __init__(self, send: Callable[[dict], Awaitable[Any]],
                 headers: list[tuple[bytes, bytes]] | None = None, *,
                 max_buffered_bytes: int | None = None, stall_timeout: float = STALL_SECONDS):
        self._send = send
        self._start: dict[str, Any] | None = {
            "type": "http.response.start", "status": 200,
            "headers": SSE_HEADERS + list(headers or ())}  # a list of its own: a middleware may edit it
        self._window: SendWindow | None = None
        self._stall_timeout = stall_timeout
        if max_buffered_bytes is not None:
            self._window = SendWindow(stall_timeout)
            self._start[MAX_BUFFERED_BYTES_KEY] = max_buffered_bytes
            self._start[SEND_WINDOW_KEY] = self._window
        self._lock = asyncio.Lock()
        self.started = False
        self.closed = False
        self._held = b""
        self._flush: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task | None = None

    @property
    def begun(self) -> bool:
        """Whether anything was written, or held to be written."""
        return self.started or bool(self._held)

    def hold(self, data: str, event_id: str | None = None) -> None:
        """Write an event with the next one, or within :data:`HOLD_SECONDS` if none comes."""
        self._held += sse.event(data, event_id=event_id)
        if self._flush is None:
            loop = asyncio.get_running_loop()
            self._flush = loop.call_at(loop.time() + HOLD_SECONDS, self._flush_held)  # call_later's

    def take_back(self) -> bool:
        """Whether nothing of the response went out, nor is on its way; then nothing will (what
        was held is dropped, and the response is closed), and the request may still be answered
        otherwise (a 429 in plain JSON)."""
        if self.started or self._flushing is not None or self.closed:
            return False
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._held, self.closed = b"", True
        return True

    def _flush_held(self) -> None:
        self._flush = None
        if self._held and not self.closed:
            self._flushing = asyncio.ensure_future(self._write(b""))

    async def _write(self, chunk: bytes, more: bool = True) -> bool:
        # The lock as ``async with`` takes it, without the two coroutines of its __aenter__ and
        # __aexit__ (this runs for every event).
        lock = self._lock
        await lock.acquire()
        try:
            if self.closed:
                return False
            if self._held:
                chunk, self._held = self._held + chunk, b""
                if self._flush is not None:
                    self._flush.cancel()
                    self._flush = None
            elif not chunk and more:
                return True  # nothing to write
            window = self._window
            # (Its wait() only when it is closed: a coroutine spared on every other write.)
            if window is not None and window.closed and not await window.wait():
                self.closed = True  # the client read nothing for too long: it was cut off
                return False
            try:
                if not self.started:
                    self.started = True
                    start, self._start = self._start, None
                    await self._send(start)
                body = {"type": "http.response.body", "body": chunk, "more_body": more}
                if self._window is None:
                    await self._send(body)
                elif self._window.honoured:
                    body[SEND_WINDOW_KEY] = self._window  # how daphne's request finds it
                    await self._send(body)
                else:
                    # A server whose send() waits for the client (uvicorn): a client that reads
                    # nothing for the stall timeout is given up on, as under daphne.
                    await asyncio.wait_for(self._send(body), self._stall_timeout)
            except Exception:  # the connection is gone, or the client stalled
                self.closed = True
                return False
            if not more:
                self.closed = True
            return True
        finally:
            lock.release()

    # event() and comment() return the write's coroutine to await (one layer less per event).
    def event(self, data: str, event_id: str | None = None,
              retry_ms: int | None = None, *, last: bool = False) -> Awaitable[bool]:
        """Write one event; ``last`` ends the response with it (one write less than finish())."""
        return self._write(sse.event(data, event_id=event_id, retry_ms=retry_ms), more=not last)

    def comment(self, text: str) -> Awaitable[bool]:
        return self._write(sse.comment(text))

    async def finish(self) -> None:
        if self.closed:
            return  # ended already (a last event), or the client is gone: nothing to write
        if self._held:
            await self._write(b"")  # what was held, then the end, each as before
        await self._write(b"", more=False)

    def disconnected(self) -> None:
        self.closed = True
        if self._window is not None:
            self._window.detach()  # a write waiting for the client stops waiting
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
