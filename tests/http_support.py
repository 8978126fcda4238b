"""Helpers shared by the Streamable HTTP tests that run against one daphne process.

The daphne processes come from :mod:`tests.http_harness`; these add clients that carry extra
headers (cookies, Origin, Host), requests run on a thread, and small bounded waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import queue
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from .http_harness import ACCEPT_BOTH, DaphneServer, Event, Exchange, HTTPClient, Listener
from .waiting import PATIENCE, wait_until  # noqa: F401 - the HTTP tests wait with it
from .wire import check_server_message

# The demo server plus the tools of tests/http_hooks.py.
HOOKS = {"SERVER_CLASS": "tests.http_hooks.HooksServer"}

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="http-test")


@contextmanager
def running(django_db_blocker: Any, **options: Any) -> Iterator[DaphneServer]:
    """A daphne process on the test database, for a module's tests."""
    with django_db_blocker.unblock():
        server = DaphneServer(**options)
    try:
        yield server
    finally:
        server.stop()


class Client(HTTPClient):
    """An :class:`HTTPClient` whose every HTTP request carries ``headers`` (cookie, Origin...)."""

    def __init__(self, url: str, *, revision: str = "2025-11-25", headers: dict | None = None):
        super().__init__(url, revision=revision)
        self.extra = dict(headers or {})

    def headers(self, extra: dict | None = None, *, accept: str = ACCEPT_BOTH) -> dict:
        return super().headers({**self.extra, **(extra or {})}, accept=accept)

    def post_json(self, message: Any, headers: dict | None = None) -> httpx.Response:
        """POST one message as it is (not checked: for deliberately bad input)."""
        return self.post_raw(json.dumps(message), headers)

    def tool(self, name: str, arguments: dict | None = None, **meta: Any) -> Exchange:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        return self.request("tools/call", params)

    def get(self, headers: dict | None = None) -> httpx.Response:
        """A GET that is read to its end: for GETs refused with an error status."""
        base = self.headers(headers, accept="text/event-stream")
        base.pop("content-type", None)
        return self.http.get(next(self.urls), headers=base)


def tool_text(exchange: Exchange) -> str:
    assert exchange.response is not None and "result" in exchange.response, exchange
    return exchange.response["result"]["content"][0]["text"]


def in_thread(function: Callable, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
    return _pool.submit(function, *args, **kwargs)


def messages(listener: Listener, count: int, timeout: float = PATIENCE) -> list[dict]:
    """The next ``count`` JSON-RPC messages of a listening stream (priming events skipped)."""
    found: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(found) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"got {found} of {count} messages in {timeout}s"
        try:
            event = listener.next(remaining)
        except queue.Empty:
            continue
        assert event is not None, f"the stream ended after {found}"
        if event.message is not None:
            found.append(event.message)
    return found


def no_message(listener: Listener) -> bool:
    """Whether nothing is waiting on the stream right now."""
    pending = [e for e in list(listener.events.queue) if e is None or e.message is not None]
    return not pending


def stream_ended(listener: Listener, timeout: float = PATIENCE) -> list[Event]:
    """Read the stream to its end (bounded); returns the events it still carried."""
    events: list[Event] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"the stream did not end in {timeout}s; got {events}"
        try:
            event = listener.next(remaining)
        except queue.Empty:
            continue
        if event is None:
            return events
        events.append(event)


def error_of(response: httpx.Response, revision: str = "2025-11-25") -> dict:
    """The JSON-RPC error of an HTTP error reply, checked against the schema."""
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    check_server_message(body, revision)
    return body["error"]


def raw_http(port: int, data: bytes, timeout: float = PATIENCE) -> tuple[int, bytes]:
    """Send raw bytes on a new connection; the status and the whole reply (read until close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    reply = b"".join(chunks)
    status = int(reply.split(b" ", 2)[1])
    return status, reply


def split_reply(reply: bytes) -> tuple[bytes, bytes]:
    """The head and the body of one raw HTTP/1.1 reply read until close (a chunked body decoded)."""
    head, _, body = reply.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return head, body
    decoded = []
    while True:
        size, _, body = body.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            return head, b"".join(decoded)
        decoded.append(body[:length])
        body = body[length + 2:]


def log_in(username: str) -> dict:
    """A Django user, logged in: the Cookie header of its session (in the test database)."""
    from django.contrib.auth import get_user_model
    from django.test import Client as DjangoClient

    user = get_user_model().objects.create_user(username, password="secret-password")
    browser = DjangoClient()
    assert browser.login(username=username, password="secret-password")
    return {"user": user, "headers": {"cookie": f"sessionid={browser.cookies['sessionid'].value}"}}


# In process: one request through an ASGI application ----------------------------------------
class ASGIReply:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    @property
    def start(self) -> dict:
        return next(m for m in self.messages if m["type"] == "http.response.start")

    @property
    def header_names(self) -> list[bytes]:
        return [name for name, _ in self.start["headers"]]

    def header(self, name: bytes) -> bytes | None:
        return dict(self.start["headers"]).get(name)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")


async def call_asgi(app, method: str, headers: dict, chunks: list[bytes] = (), *,
                    reads: list | None = None) -> ASGIReply:
    """One HTTP request through the ASGI application; ``reads`` records every receive() call."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    pending = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
               for i, chunk in enumerate(chunks or [b""])]
    reads = reads if reads is not None else []
    forever = asyncio.Event()

    async def receive() -> dict:
        reads.append(len(pending))
        if pending:
            return pending.pop(0)
        await forever.wait()  # the client stays connected
        return {"type": "http.disconnect"}

    reply = ASGIReply()

    async def send(message: dict) -> None:
        reply.messages.append(message)

    await asyncio.wait_for(app(scope, receive, send), PATIENCE)
    return reply


def post_headers(session_id: str | None = None, **extra: str) -> dict:
    headers = {"host": "127.0.0.1", "content-type": "application/json",
               "accept": "application/json, text/event-stream", **extra}
    if session_id:
        headers["mcp-session-id"] = session_id
    return headers
