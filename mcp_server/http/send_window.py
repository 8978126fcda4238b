"""How a response's writer learns that its client stopped reading (under daphne)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# Keys of an ``http.response.start`` message (SSEResponse sets them; other servers ignore them):
# how many bytes may wait for the client before writing must wait too, and the SendWindow that
# tells the writer so.
MAX_BUFFERED_BYTES_KEY = "mcp.max_buffered_bytes"
SEND_WINDOW_KEY = "mcp.send_window"
# How long a write waits, by default, for a client whose buffer is full to read some of it before
# the client is cut off (the SSE_STALL_TIMEOUT setting).
STALL_SECONDS = 10.0


class SendWindow:
    """Whether a response's connection can take more, shared by its writer and daphne's request.

    Daphne's ``send()`` never waits: Twisted keeps whatever the application writes in memory until
    the client reads it. The request (see :func:`cut_off_slow_daphne_readers`) closes the window
    once more than the limit waits for the client and opens it when the client has read it; a
    writer facing a closed window waits (as ``send()`` would under uvicorn), and a client that
    reads nothing for ``stall_timeout`` seconds is cut off. What was not sent is stored: the client
    resumes with Last-Event-ID.
    """

    def __init__(self, stall_timeout: float = STALL_SECONDS) -> None:
        self.stall_timeout = stall_timeout
        self._open = asyncio.Event()
        self._open.set()
        self._cut: Callable[[], None] | None = None
        # Whether the server took the window (daphne with cut_off_slow_daphne_readers); under any
        # other server, send() itself waits for the client, and the writer bounds each wait.
        self.honoured = False

    def attach(self, cut: Callable[[], None]) -> None:
        self._cut = cut
        self.honoured = True

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def detach(self) -> None:
        """The response ended (or the connection went): nothing to wait for any more."""
        self._cut = None
        self._open.set()

    async def wait(self) -> bool:
        """True when writing may go on; False when the client was cut off."""
        if self._open.is_set():
            return True
        try:
            await asyncio.wait_for(self._open.wait(), self.stall_timeout)
            return True
        except TimeoutError:
            cut, self._cut = self._cut, None
            if cut is not None:
                cut()
            return False
