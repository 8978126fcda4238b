"""How a response's writer learns that its client stopped reading (under daphne)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# Keys of an ``http.response.start`` message (SSEResponse sets them; other servers ignore them):
# how many bytes may wait for the client before writing must wait too, and the SendWindow that
# tells the writer so. The window rides on each ``http.response.body`` message too, so that the
# server finds it without keeping it on its request.
MAX_BUFFERED_BYTES_KEY = "mcp.max_buffered_bytes"
SEND_WINDOW_KEY = "mcp.send_window"
# How long a write waits, by default, for a client whose buffer is full to read some of it before
# the client is cut off (the SSE_STALL_TIMEOUT setting).
STALL_SECONDS = 10.0


def _stalled(opened: asyncio.Future) -> None:
    if not opened.done():
        opened.set_result(False)


class SendWindow:
    """Whether a response's connection can take more, shared by its writer and daphne's request.

    Daphne's ``send()`` never waits: Twisted keeps whatever the application writes in memory until
    the client reads it. Under :func:`cut_off_slow_daphne_readers` the window is the response's
    producer on its connection: Twisted pauses it when the socket's buffer fills and resumes it
    when the client has read it; the bytes written while paused are counted, and past the limit
    the window closes until the next resume. A writer facing a closed window waits (as ``send()``
    would under uvicorn), and a client that reads nothing for ``stall_timeout`` seconds is cut
    off. What was not sent is stored: the client resumes with Last-Event-ID.

    One per open stream under daphne: slots, and a future only while a writer waits.
    """

    __slots__ = ("_cut", "_opened", "_paused", "_written_while_paused", "buffer_limit",
                 "closed", "honoured", "stall_timeout")

    def __init__(self, stall_timeout: float = STALL_SECONDS) -> None:
        self.stall_timeout = stall_timeout
        # Whether a writer must wait (wait()) before it writes on.
        self.closed = False
        self._opened: asyncio.Future | None = None  # what a waiting writer waits on
        self._cut: Callable[[], None] | None = None
        # Whether the server took the window (daphne with cut_off_slow_daphne_readers); under any
        # other server, send() itself waits for the client, and the writer bounds each wait.
        self.honoured = False
        self.buffer_limit = 0
        self._paused = False
        self._written_while_paused = 0

    @property
    def attached(self) -> bool:
        """Whether a server still applies the window (until the response ends or is cut off)."""
        return self._cut is not None

    def attach(self, cut: Callable[[], None], buffer_limit: int = 0) -> None:
        """A server applies the window: ``cut`` aborts the connection (called once the window is
        detached); past ``buffer_limit`` bytes written while the connection is paused, the window
        closes."""
        self._cut = cut
        self.buffer_limit = buffer_limit
        self.honoured = True

    def close(self) -> None:
        self.closed = True

    def open(self) -> None:
        self.closed = False
        opened = self._opened
        if opened is not None and not opened.done():
            opened.set_result(True)

    def detach(self) -> None:
        """The response ended (or the connection went): nothing to wait for any more."""
        self._cut = None
        self.open()

    def written(self, size: int) -> None:
        """``size`` bytes of the response were handed to the connection."""
        if self._paused:
            self._written_while_paused += size
            if self._written_while_paused > self.buffer_limit:
                self.close()

    # IPushProducer: Twisted calls these as the connection's send buffer fills and drains.
    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        self._written_while_paused = 0
        self.open()

    def stopProducing(self) -> None:
        self.detach()

    async def wait(self) -> bool:
        """True when writing may go on; False when the client was cut off. One writer at a time
        (the response's lock)."""
        if not self.closed:
            return True
        loop = asyncio.get_running_loop()
        opened = self._opened = loop.create_future()
        timer = loop.call_later(self.stall_timeout, _stalled, opened)
        try:
            if await opened:
                return True
        finally:
            timer.cancel()
            self._opened = None
        cut, self._cut = self._cut, None
        if cut is not None:
            cut()
        return False
