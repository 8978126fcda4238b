"""The stdio transport: newline-delimited JSON-RPC on stdin and stdout, one session.

Lines are read on a thread and each message is handled in its own task, so a long tool call
never stops the server from reading the next line (a cancellation, say).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods

from .. import hook_calls, logging_levels, telemetry
from ..modern.era import EraLock, handle_json
from ..session import DEFAULT_REQUEST_TIMEOUT, ServerSession
from ..telemetry import metrics

if TYPE_CHECKING:
    from ..server import Server

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
STDIO_SCOPE = {"type": "stdio"}


class FrameTooLargeError(ValueError):
    pass


class StdioTransport:
    """Serve ``server`` on stdin/stdout; ``open()`` blocks until stdin closes."""

    def __init__(self, server: Server, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 server_to_client_request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
                 stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None,
                 stderr: IO[str] | None = None):
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) \
                or max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be a positive integer, not {max_line_bytes!r}")
        self.server = server
        self.max_line_bytes = max_line_bytes
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout.buffer
        self._stderr = stderr if stderr is not None else sys.stderr
        self._write_lock = threading.Lock()
        # Why the connection was closed early (a frame over the limit, unreadable stdin); None
        # after a plain end of input. The mcp_stdio command turns it into its exit status.
        self.error: BaseException | None = None
        self.session = ServerSession(
            server, outbound=self, request_timeout=server_to_client_request_timeout
        )
        # stdio serves no subscriptions/listen stream (LSN-08, MOD-03).
        self.session.listen_supported = False
        # One client per process, in one lifecycle: the first of either era locks it (MOD-13).
        self.era = EraLock()
        server.session = self.session
        server.add_transport(self)

    def open(self) -> None:
        """Serve until stdin closes (or a bad frame closes the connection: see ``error``)."""
        asyncio.run(self.serve())

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        reader = threading.Thread(
            target=self._read_lines, args=(loop, lines), name="mcp-stdio-reader", daemon=True
        )
        reader.start()
        tasks: set[asyncio.Task] = set()
        began = time.perf_counter()
        try:
            while True:
                line = await lines.get()
                if line is None:
                    break
                if isinstance(line, BaseException):
                    await self._fail(line)
                    break
                if not line.strip():
                    continue
                # Created in arrival order: a request registers itself as in flight before
                # the task of any line read after it runs.
                task = asyncio.create_task(self._answer(line))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except asyncio.CancelledError:
            # Interrupted (asyncio.run cancels this task on SIGINT): stop the handlers in
            # flight too, so Ctrl-C exits now rather than after the longest tool call.
            for task in tasks:
                task.cancel()
            raise
        finally:
            # Nobody is left to answer requests to the client: end their waits now.
            self.session.pending.cancel_all("Transport closed: stdin reached its end")
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await hook_calls.settle()  # reports still on their way
            if self.session.initialized:  # a handshake-era session (a modern client has none)
                metrics.stdio_session_ended(time.perf_counter() - began, self.session.protocol_version,
                                            self.error)

    def _read_lines(self, loop: asyncio.AbstractEventLoop, lines: asyncio.Queue) -> None:
        try:
            while True:
                line = self._stdin.readline(self.max_line_bytes)
                if not line:
                    break
                if len(line) >= self.max_line_bytes and not line.endswith(b"\n"):
                    raise FrameTooLargeError(
                        f"stdio frame exceeds limit of {self.max_line_bytes} bytes"
                    )
                loop.call_soon_threadsafe(lines.put_nowait, line)
        except BaseException as exc:  # handed to the loop, which reports and closes
            loop.call_soon_threadsafe(lines.put_nowait, exc)
            return
        loop.call_soon_threadsafe(lines.put_nowait, None)

    async def _fail(self, exc: BaseException) -> None:
        self.error = exc
        await self.server.report_exception_async(exc, {"transport": "stdio"})
        print(f"mcp stdio: closing the connection: {exc}", file=self._stderr, flush=True)

    async def _answer(self, line: bytes) -> None:
        telemetry.transport_scope.set(STDIO_SCOPE)  # spans say network.transport=pipe
        try:
            answer = await handle_json(self.server, line, self.session, self.era)
        except Exception as exc:  # never let one message take the server down
            await self.server.report_exception_async(exc, {"transport": "stdio"})
            answer = jsonrpc.encode(jsonrpc.error_response(None, -32603, "Internal error"))
        if answer is not None:
            self._write_line(answer)

    def _write_line(self, text: str, context: dict | None = None) -> bool:
        data = text.encode("utf-8") + b"\n"
        try:
            with self._write_lock:
                self._stdout.write(data)
                self._stdout.flush()
        except (OSError, ValueError) as exc:
            self.server.report_exception(exc, context or {"transport": "stdio"})
            return False
        return True

    def send_message(self, message: dict) -> bool:
        """Write one message; safe from any thread. False when the write failed."""
        # A failed notification is reported as {notification: method} (CFG-02).
        is_notification = "method" in message and "id" not in message
        context = {"notification": message["method"]} if is_notification else None
        return self._write_line(jsonrpc.encode(message), context)

    def send_notification(self, method: str, params: dict | None = None) -> bool:
        """Write a notification: True once written and flushed, False (reported) when it failed."""
        return self.send_message(jsonrpc.notification(method, params))

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        return self.send_message(message)

    def notify_resource_updated(self, uri: str) -> bool:
        if uri not in self.session.subscriptions:
            return False
        return self.send_message(jsonrpc.notification(methods.NOTIFICATIONS_RESOURCES_UPDATED, {"uri": uri}))

    def broadcast(self, message: dict, *, level: str | None = None) -> bool:
        if level is not None and not logging_levels.passes(level, self.session.log_level):
            return False
        return self.send_message(message)
