"""What the tests of ``mcp_client`` share: transports that check every message on the wire, an
in-process transport onto our ``Server``, and scripted fake servers (stdio and HTTP).

Every transport here carries a :class:`WireCheck`: each message the client writes is validated
against the JSON schema of the revision in use (the one the client offered in ``initialize``,
then the negotiated one), its answers to server requests also against the result type of the
request's method; what the server writes is checked too, unless the server is a deliberately
broken fake. Violations are raised where they happen and also kept, and the autouse fixture
:func:`every_message_checked` fails the test when there was one (a violation inside a background
task could otherwise go unnoticed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mcp_client import HTTPTransport, StdioTransport
from mcp_client.errors import NotConnectedError
from mcp_server import Server, ServerSession, logging_levels

from .harness import REPO
from .http_harness import free_port
from .waiting import PATIENCE, eventually, wait_until  # noqa: F401 - shared with the client tests
from .wire import (
    RESULT_TYPES,
    REVISIONS,
    check_client_message,
    check_server_message,
    has_definition,
    validate,
)

LATEST = "2025-11-25"
# The demo project plus tests/stdio_app (sleepy, ask_client, log_every_level, wait_for_cancel...).
STDIO_SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}
WAIT = PATIENCE  # the longest any single wait in these tests may take

_checks: list[WireCheck] = []


class WireCheck:
    """Follows one connection's revision and checks every message in both directions."""

    def __init__(self, *, check_server: bool = True):
        self.check_server = check_server
        self.revision = LATEST
        self.sent: list[dict] = []      # what the client wrote, in order
        self.received: list[Any] = []   # what the server wrote, in order
        self.violations: list[str] = []
        # Each request's method and the revision it was sent in (a late answer, to a probe the
        # client gave up on, is checked against the revision it was asked in).
        self._client_requests: dict[Any, tuple[str, str]] = {}
        self._server_requests: dict[Any, str] = {}
        _checks.append(self)

    def outgoing(self, message: Any) -> None:
        """A message the client is about to write: raises (and records) a schema violation."""
        try:
            self._outgoing(message)
        except AssertionError as exc:
            self.violations.append(f"client: {exc}")
            raise

    def _outgoing(self, message: Any) -> None:
        assert isinstance(message, dict), f"the client wrote a non-object: {message!r}"
        self.sent.append(message)
        method = message.get("method")
        if method == "initialize":
            requested = (message.get("params") or {}).get("protocolVersion")
            self.revision = requested if requested in REVISIONS else LATEST
        enveloped = ((message.get("params") or {}).get("_meta") or {}).get(
            "io.modelcontextprotocol/protocolVersion") if method is not None else None
        if enveloped in REVISIONS:  # a 2026-07-28 request names its revision itself
            self.revision = enveloped
        answered = None
        if method is not None and "id" in message:
            self._client_requests[message["id"]] = (method, self.revision)
        elif method is None:
            answered = self._server_requests.pop(message.get("id"), None)
        check_client_message(message, self.revision)
        definition = RESULT_TYPES.get(answered or "")
        if "result" in message and definition and has_definition(self.revision, definition):
            validate(message["result"], self.revision, definition)

    def incoming(self, message: Any) -> None:
        """A message the server wrote; checked unless ``check_server`` is off."""
        self.received.append(message)
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            method, asked_in = None, self.revision
            if "method" in item and "id" in item:
                self._server_requests[item["id"]] = item["method"]
            elif "method" not in item:
                method, asked_in = self._client_requests.pop(item.get("id"), (None, self.revision))
                result = item.get("result")
                if method == "initialize" and isinstance(result, dict) \
                        and result.get("protocolVersion") in REVISIONS:
                    self.revision = asked_in = result["protocolVersion"]
            if self.check_server:
                try:
                    check_server_message(item, asked_in, method)
                except AssertionError as exc:
                    self.violations.append(f"server: {exc}")

    def methods_sent(self) -> list[str]:
        """The method of each request and notification the client wrote ("response" for answers)."""
        return [m.get("method", "response") for m in self.sent]

    def sent_of(self, method: str) -> list[dict]:
        return [m for m in self.sent if m.get("method") == method]


def every_message_checked() -> Iterator[None]:
    """For an autouse fixture: every wire check made during the test ends without a violation."""
    _checks.clear()
    yield
    problems = [v for check in _checks for v in check.violations]
    _checks.clear()
    assert not problems, "schema violations on the wire:\n" + "\n".join(problems)


class CheckedStdioTransport(StdioTransport):
    """StdioTransport whose every message in both directions goes through a WireCheck."""

    def __init__(self, *args: Any, check_server: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.wire = WireCheck(check_server=check_server)

    async def start(self, deliver: Any, fail: Any) -> None:
        async def checked(message: Any) -> None:
            self.wire.incoming(message)
            await deliver(message)

        await super().start(checked, fail)

    async def send(self, message: dict, **kwargs: Any) -> None:
        self.wire.outgoing(message)
        await super().send(message, **kwargs)


class CheckedHTTPTransport(HTTPTransport):
    """HTTPTransport whose every message in both directions goes through a WireCheck."""

    def __init__(self, *args: Any, check_server: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.wire = WireCheck(check_server=check_server)

    async def start(self, deliver: Any, fail: Any) -> None:
        async def checked(message: Any) -> None:
            self.wire.incoming(message)
            await deliver(message)

        await super().start(checked, fail)

    async def send(self, message: dict, **kwargs: Any) -> None:
        self.wire.outgoing(message)
        await super().send(message, **kwargs)


def our_stdio(*args: str, env: dict | None = None, **options: Any) -> CheckedStdioTransport:
    """``manage.py mcp_stdio`` (the demo plus tests/stdio_app) as the client spawns it."""
    options.setdefault("read_timeout", 30)
    return CheckedStdioTransport(sys.executable, [str(REPO / "manage.py"), "mcp_stdio", *args],
                                 env={**STDIO_SETTINGS, **(env or {})}, cwd=str(REPO), **options)


def script_stdio(code: str, **options: Any) -> CheckedStdioTransport:
    """A fake stdio server: ``python -c code`` (messages it writes are not schema-checked)."""
    options.setdefault("read_timeout", WAIT)
    transport = CheckedStdioTransport(sys.executable, ["-u", "-c", code], check_server=False, **options)
    transport.close_wait = 0.3  # a fake that hangs need not delay the test by close()'s 2 s + 2 s
    return transport


# In process: our Server behind a transport of the client ----------------------------------------
class _Outbound:
    """The server session's outbound: what the server sends goes to the client."""

    def __init__(self, transport: InProcessTransport):
        self.transport = transport

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        await self.transport.from_server(message)
        return True


class InProcessTransport:
    """A client transport onto ``server`` in this process: each message the client writes goes
    through ``server.handle_async`` on one ``ServerSession`` (requests concurrently), and what the
    server sends (answers, notifications, its own requests) comes back to the client."""

    def __init__(self, server: Server, *, read_timeout: float | None = WAIT, send_delay: float = 0.0):
        self.server = server
        self.read_timeout = read_timeout
        self.send_delay = send_delay  # seconds each send takes before the server sees the message
        self.wire = WireCheck()
        self.session: ServerSession | None = None
        self.starts = 0
        self._deliver: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self, deliver: Any, fail: Any) -> None:
        self.starts += 1
        self._deliver = deliver
        self._loop = asyncio.get_running_loop()
        self.session = ServerSession(self.server, outbound=_Outbound(self), request_timeout=WAIT)
        self.server.transport = self  # server-wide notifications (list_changed, updates) come here

    async def send(self, message: dict, *, on_sent: Callable[[], None] | None = None) -> None:
        if self.session is None:
            raise NotConnectedError("not started")
        self.wire.outgoing(message)
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if on_sent is not None:
            on_sent()
        self._spawn(self._handle(message, self.session))

    async def _handle(self, message: dict, session: ServerSession) -> None:
        answer = await self.server.handle_async(message, session)
        if answer is not None:
            await self.from_server(answer)

    async def from_server(self, message: dict) -> None:
        self.wire.incoming(message)
        await self._deliver(message)

    # What Server.notify_* call on its transport (possibly from a worker thread).
    def broadcast(self, message: dict, *, level: str | None = None) -> bool:
        if self.session is None or (level is not None
                                    and not logging_levels.passes(level, self.session.log_level)):
            return False
        self._loop.call_soon_threadsafe(lambda: self._spawn(self.from_server(message)))
        return True

    def notify_resource_updated(self, uri: str) -> bool:
        if self.session is None or uri not in self.session.subscriptions:
            return False
        message = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
        return self.broadcast(message)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self.session = None
        if self.server.transport is self:
            self.server.transport = None


# A scripted HTTP server -------------------------------------------------------------------------
@dataclass
class Seen:
    """One HTTP request the fake server received."""

    method: str
    headers: dict[str, str]
    body: Any = None
    at: float = field(default_factory=time.monotonic)

    @property
    def rpc_method(self) -> str | None:
        return self.body.get("method") if isinstance(self.body, dict) else None


class Reply:
    """How a scripted handler answers, one call each (``BaseHTTPRequestHandler`` underneath)."""

    def __init__(self, handler: BaseHTTPRequestHandler, seen: Seen, closed: threading.Event):
        self.handler = handler
        self.seen = seen
        self._closed = closed

    def hold(self, seconds: float = WAIT) -> None:
        """Keep the connection open (a silent server) until the fake server closes, at most ``seconds``."""
        self._closed.wait(seconds)

    def status(self, code: int, body: bytes = b"", headers: dict | None = None,
               content_type: str = "text/plain") -> None:
        self.handler.send_response(code)
        for name, value in {"content-type": content_type, "connection": "close", **(headers or {})}.items():
            self.handler.send_header(name, value)
        self.handler.send_header("content-length", str(len(body)))
        self.handler.end_headers()
        self.handler.wfile.write(body)

    def json(self, payload: Any, code: int = 200, headers: dict | None = None) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.status(code, body, headers, "application/json")

    def result(self, result: Any, headers: dict | None = None) -> None:
        self.json({"jsonrpc": "2.0", "id": self.seen.body["id"], "result": result}, headers=headers)

    def sse_open(self, headers: dict | None = None) -> None:
        self.handler.send_response(200)
        for name, value in {"content-type": "text/event-stream", "cache-control": "no-cache",
                            "connection": "close", **(headers or {})}.items():
            self.handler.send_header(name, value)
        self.handler.end_headers()

    def event(self, data: Any = "", *, event_id: str | None = None, retry: int | None = None) -> None:
        frame = ""
        if event_id is not None:
            frame += f"id: {event_id}\n"
        if retry is not None:
            frame += f"retry: {retry}\n"
        text = data if isinstance(data, str) else json.dumps(data)
        frame += "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"
        self.raw(frame.encode())

    def raw(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()


INITIALIZE_RESULT = {"protocolVersion": LATEST, "capabilities": {"tools": {}},
                     "serverInfo": {"name": "fake", "version": "1.0.0"}}


class FakeHTTPServer:
    """A Streamable HTTP server on 127.0.0.1 whose every answer a test scripts.

    ``respond(reply)`` is called for each HTTP request (``reply.seen`` is what came in); the
    default answers ``initialize`` (with session id ``s-1``), 202 to notifications and responses,
    and 200 to DELETE. Each connection closes after its reply, so a finished handler ends a stream.
    Handlers must not block longer than ``WAIT``.
    """

    def __init__(self, respond: Callable[[Reply], None] | None = None):
        self.respond = respond
        self.requests: list[Seen] = []
        self.closed = threading.Event()  # set by close(): handlers that hold a stream should stop
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                seen = Seen(self.command, {k.lower(): v for k, v in self.headers.items()}, body)
                server.requests.append(seen)
                self.close_connection = True
                reply = Reply(self, seen, server.closed)
                with contextlib.suppress(OSError):
                    if server.respond is None or server.respond(reply) is NotImplemented:
                        server.default(reply)

            do_POST = do_GET = do_DELETE = handle_one

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/mcp"
        self._thread = threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @staticmethod
    def default(reply: Reply) -> None:
        seen = reply.seen
        if seen.method == "DELETE":
            reply.status(200)
        elif seen.method == "GET":
            reply.status(405)
        elif seen.rpc_method == "initialize":
            reply.result(INITIALIZE_RESULT, headers={"mcp-session-id": "s-1"})
        elif (isinstance(seen.body, dict) and "id" not in seen.body) or seen.rpc_method is None:
            reply.status(202)
        else:
            reply.json({"jsonrpc": "2.0", "id": seen.body["id"],
                        "error": {"code": -32601, "message": "Method not found"}})

    def of(self, rpc_method: str) -> list[Seen]:
        return [s for s in self.requests if s.rpc_method == rpc_method]

    def close(self) -> None:
        self.closed.set()
        self.http.shutdown()
        self.http.server_close()
        self._thread.join(WAIT)

    def __enter__(self) -> FakeHTTPServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# The official SDK's server (tests/reference_server.py) over Streamable HTTP ------------------------
class ReferenceHTTPServer:
    """``python -m tests.reference_server http`` (uvicorn) on a free loopback port."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reference_server", "http", "--port", str(self.port)],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy(),
        )
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"the reference server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the reference server did not listen:\n{log.read_text()}"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


def cancel_when(condition: Callable[[], Any], token: Any, **options: Any) -> None:
    """Cancel ``token`` (an ``mcp_client.Cancellation``) from another thread, once ``condition()``
    holds: a cancel that comes while its request is in a known state, whatever the machine's speed."""

    def cancel() -> None:
        wait_until(condition, what="the moment to cancel")
        token.cancel(**options)

    threading.Thread(target=cancel, daemon=True).start()
