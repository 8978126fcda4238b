"""A server run as a child process, spoken to with JSON lines on its stdin and stdout."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence

from mcp_protocol import jsonrpc

from ..errors import ConnectionClosedError, NotConnectedError, TransportError
from .base import Deliver, Fail, OnSent

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
STDERR_TAIL_BYTES = 16 * 1024
# The server's last lines on stderr kept for ``stderr_lines`` (a traceback's end, a log line that
# says why), and the characters kept of each: a server that writes megabytes costs nothing more.
DEFAULT_STDERR_TAIL_LINES = 20
STDERR_LINE_CHARS = 1000


class StdioTransport:
    """``StdioTransport(command, args=[], env=None, read_timeout=None)``.

    ``read_timeout`` (seconds) bounds how long a request waits while the server says nothing;
    ``env`` is added to this process's environment. The server's stderr is read as it comes:
    ``stderr_lines`` holds its last ``stderr_tail_lines`` lines (20), where a failed tool's
    traceback or a forgotten ``migrate``'s "no such table" shows; ``stderr_tail`` its last 16 KiB.
    """

    # close(): how long to wait for the process to exit after closing its stdin, then after SIGTERM.
    close_wait = 2.0

    def __init__(self, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                 read_timeout: float | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 cwd: str | None = None, stderr_tail_lines: int = DEFAULT_STDERR_TAIL_LINES):
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be a positive integer, not {max_line_bytes!r}")
        if isinstance(stderr_tail_lines, bool) or not isinstance(stderr_tail_lines, int) \
                or stderr_tail_lines <= 0:
            raise ValueError(f"stderr_tail_lines must be a positive integer, not {stderr_tail_lines!r}")
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.read_timeout = read_timeout
        self.max_line_bytes = max_line_bytes
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._stderr_tail = bytearray()
        self._stderr_lines: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._stderr_partial = bytearray()  # the line being written, not ended yet
        self._stderr_task: asyncio.Task | None = None
        self._broken: TransportError | None = None

    @property
    def stderr_tail(self) -> str:
        """The last 16 KiB the server wrote on stderr."""
        return self._stderr_tail.decode("utf-8", "replace")

    @property
    def stderr_tail_lines(self) -> int:
        return self._stderr_lines.maxlen or DEFAULT_STDERR_TAIL_LINES

    @property
    def stderr_lines(self) -> list[str]:
        """The server's last lines on stderr (``stderr_tail_lines`` at most, each cut at 1000
        characters), a line it has not ended yet included: what to show when a call failed or
        the server exited. After ``close()``, everything the server wrote before it exited."""
        lines = list(self._stderr_lines)
        if self._stderr_partial:
            lines = [*lines, _line(self._stderr_partial)][-self.stderr_tail_lines:]
        return lines

    async def start(self, deliver: Deliver, fail: Fail) -> None:
        self._broken = None
        self._stderr_tail.clear()
        self._stderr_lines.clear()
        self._stderr_partial.clear()
        try:
            self.process = await asyncio.create_subprocess_exec(
                self.command, *self.args, cwd=self.cwd, env={**os.environ, **self.env},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=self.max_line_bytes,
            )
        except OSError as exc:
            raise TransportError(f"cannot start the server {self.command!r}: {exc}") from exc
        self._stderr_task = asyncio.create_task(self._drain_stderr(self.process))
        self._tasks = [asyncio.create_task(self._read(self.process, deliver, fail)), self._stderr_task]

    def _break(self, fail: Fail, error: TransportError) -> None:
        """The connection is unusable: every waiting request fails, and so does every later one."""
        self._broken = error
        fail(error)

    async def _read(self, process: asyncio.subprocess.Process, deliver: Deliver, fail: Fail) -> None:
        stdout = process.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                # The rest of that line would be read as new frames: nothing after it can be trusted.
                self._break(fail, TransportError(
                    f"a message from the server exceeds max_line_bytes ({self.max_line_bytes})"))
                return
            if not line:
                status = await process.wait()
                await self._stderr_read()  # its last words, which may still be in the pipe
                last = self.stderr_lines[-1:]
                self._break(fail, ConnectionClosedError(
                    f"the server process exited with status {status}"
                    + (f"; its last words: {last[0].strip()}" if last else "")
                ))
                return
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                fail(TransportError(f"the server wrote a line that is not JSON: {line[:200]!r}"))
                continue
            await deliver(message)

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        while True:
            chunk = await process.stderr.read(4096)
            if not chunk:
                if self._stderr_partial:
                    self._stderr_lines.append(_line(self._stderr_partial))
                    self._stderr_partial.clear()
                return
            self._stderr_tail.extend(chunk)
            del self._stderr_tail[:-STDERR_TAIL_BYTES]
            *ended, rest = chunk.split(b"\n")
            for piece in ended:
                self._stderr_partial.extend(piece)
                self._stderr_lines.append(_line(self._stderr_partial))
                self._stderr_partial.clear()
            # A line that never ends is kept to its first characters (4 bytes each at most).
            self._stderr_partial.extend(rest[:max(0, 4 * STDERR_LINE_CHARS - len(self._stderr_partial))])

    async def _stderr_read(self) -> None:
        """Wait (``close_wait`` at most: a child of the server may hold the pipe open) until the
        exited server's stderr is read to its end."""
        task = self._stderr_task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), self.close_wait)

    async def send(self, message: dict, *, on_sent: OnSent | None = None) -> None:
        if self.process is None:
            raise NotConnectedError("call connect() before sending (the server is not started)")
        if self._broken is not None:
            raise type(self._broken)(str(self._broken))
        data = jsonrpc.encode(message).encode("utf-8") + b"\n"
        # One writer at a time, so a cancel line never lands inside (or before) its request.
        async with self._write_lock:
            stdin = self.process.stdin
            try:
                stdin.write(data)
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ConnectionClosedError(f"the server process is gone: {exc}") from exc
        if on_sent is not None:
            on_sent()

    async def close(self) -> None:
        """Close stdin, then wait 2 s (``close_wait``), SIGTERM, wait 2 s, SIGKILL."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(Exception):
            process.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
            try:
                await asyncio.wait_for(process.wait(), self.close_wait)
                break
            except TimeoutError:
                continue
        await self._stderr_read()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def __repr__(self) -> str:
        return f"<StdioTransport {self.command} {' '.join(self.args)}>"


def _line(raw: bytes | bytearray) -> str:
    text = bytes(raw).decode("utf-8", "replace").rstrip("\r")
    return text if len(text) <= STDERR_LINE_CHARS else text[:STDERR_LINE_CHARS - 1] + "…"

