"""A server run as a child process, spoken to with JSON lines on its stdin and stdout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence

from mcp_protocol import jsonrpc

from ..errors import ConnectionClosedError, NotConnectedError, TransportError
from .base import Deliver, Fail

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
STDERR_TAIL_BYTES = 16 * 1024


class StdioTransport:
    """``StdioTransport(command, args=[], env=None, read_timeout=None)``.

    ``read_timeout`` (seconds) bounds how long a request waits while the server says nothing;
    ``env`` is added to this process's environment.
    """

    def __init__(self, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                 read_timeout: float | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 cwd: str | None = None):
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be a positive integer, not {max_line_bytes!r}")
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

    @property
    def stderr_tail(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace")

    async def start(self, deliver: Deliver, fail: Fail) -> None:
        self.process = await asyncio.create_subprocess_exec(
            self.command, *self.args, cwd=self.cwd, env={**os.environ, **self.env},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, limit=self.max_line_bytes,
        )
        self._tasks = [asyncio.create_task(self._read(deliver, fail)),
                       asyncio.create_task(self._drain_stderr())]

    async def _read(self, deliver: Deliver, fail: Fail) -> None:
        stdout = self.process.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                limit = self.max_line_bytes
                fail(TransportError(f"a message from the server exceeds max_line_bytes ({limit})"))
                return
            if not line:
                status = await self.process.wait()
                fail(ConnectionClosedError(
                    f"the server process exited with status {status}"
                    + (f"; its last words: {self.stderr_tail[-500:].strip()}" if self._stderr_tail else "")
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

    async def _drain_stderr(self) -> None:
        while True:
            chunk = await self.process.stderr.read(4096)
            if not chunk:
                return
            self._stderr_tail.extend(chunk)
            del self._stderr_tail[:-STDERR_TAIL_BYTES]

    async def send(self, message: dict) -> None:
        if self.process is None:
            raise NotConnectedError("call connect() before sending (the server is not started)")
        data = jsonrpc.encode(message).encode("utf-8") + b"\n"
        # One writer at a time, so a cancel line never lands inside (or before) its request.
        async with self._write_lock:
            try:
                self.process.stdin.write(data)
                await self.process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ConnectionClosedError(f"the server process is gone: {exc}") from exc

    async def close(self) -> None:
        """Close stdin, then wait 2 s, SIGTERM, wait 2 s, SIGKILL."""
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
                await asyncio.wait_for(process.wait(), 2.0)
                break
            except TimeoutError:
                continue
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def __repr__(self) -> str:
        return f"<StdioTransport {self.command} {' '.join(self.args)}>"

