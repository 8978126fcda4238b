"""The endpoint's body limit at the ASGI layer, under any server.

uvicorn, granian and hypercorn hand the body to the application as it arrives (and stop reading
the socket while the application does not ask for more), so counting it there refuses an oversized
upload without holding it. daphne holds the whole body before the application sees it: there the daphne
hook (``mcp_server.http.daphne.refuse_oversized_daphne_bodies``) refuses it first, and this layer
never sees too much.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import markcoroutinefunction

from mcp_protocol import jsonrpc
from mcp_protocol.errors import INVALID_REQUEST

from ..http.daphne import REFUSED_BODY_LINGER_SECONDS
from ..settings import mcp_settings

# How long a refused body may pause before the connection is closed (at most
# REFUSED_BODY_LINGER_SECONDS in all): an upload under way sends without pauses.
REFUSED_BODY_IDLE_SECONDS = 0.5

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def too_large(limit: int) -> bytes:
    """The 413's body: a JSON-RPC error, as the endpoint itself answers one."""
    message = f"Payload Too Large: the body exceeds {limit} bytes"
    return jsonrpc.encode(jsonrpc.error_response(None, INVALID_REQUEST, message)).encode()


class BodyLimit:
    """``app`` with request bodies refused (413) once they pass ``max_bytes``.

    A Content-Length over the limit is refused before any of the body is read; a body without one
    (chunked) is counted as it arrives and refused at the chunk that passes the limit. The 413
    closes the connection; what the client still sends meanwhile is read and dropped for a bounded
    time, so that a client that sends its whole body before reading gets the answer rather than a
    reset. The application then sees the client gone (``http.disconnect``), and what it still
    sends is dropped. ``max_bytes`` defaults to ``MCP_SERVER["MAX_REQUEST_BYTES"]``.
    """

    def __init__(self, app: Any, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes

    @property
    def limit(self) -> int:
        return self.max_bytes if self.max_bytes is not None else mcp_settings.MAX_REQUEST_BYTES

    @markcoroutinefunction
    def __call__(self, scope: dict, receive: Receive, send: Send) -> Awaitable[None]:
        # No coroutine of its own, which an open stream would keep for as long as it is open: the
        # application's (or the refusal's) is awaited instead.
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        limit = self.limit
        declared = expects_continue = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                declared = value
            elif name == b"expect":
                expects_continue = value.lower() == b"100-continue"
        if declared is not None and declared.isdigit():
            if int(declared) > limit:
                # A client waiting for "100 Continue" sends nothing more: no body to drop.
                return refuse(send, receive, limit, linger=not expects_continue)
            # The server hands on no more than the Content-Length it framed the body by: nothing
            # to count (the endpoint still counts what it reads).
            return self.app(scope, receive, send)
        exchange = Limited(receive, send, limit)
        return self.app(scope, exchange.receive, exchange.send)


class Limited:
    """The application's ``receive`` and ``send`` for one request: past the limit, ``receive``
    answers 413 itself (unless the application began its response) and tells the application the
    client left, and what the application still sends is dropped. Once the body is whole,
    ``receive`` is the server's own (what comes then is the client leaving)."""

    __slots__ = ("_receive", "_send", "body_done", "limit", "refused", "size", "started")

    def __init__(self, receive: Receive, send: Send, limit: int):
        self._receive = receive
        self._send = send
        self.limit = limit
        self.size = 0
        self.started = False
        self.refused = False
        self.body_done = False

    def receive(self) -> Awaitable[dict]:
        if self.body_done:
            # No coroutine of its own: a stream waits in receive() for as long as it is open.
            return self._receive()
        return self._counted()

    async def _counted(self) -> dict:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self.limit:
                self.refused = True
                if not self.started:
                    await refuse(self._send, self._receive, self.limit,
                                 linger=bool(message.get("more_body")))
                return {"type": "http.disconnect"}
            if not message.get("more_body"):
                self.body_done = True
        return message

    async def send(self, message: dict) -> None:
        if self.refused and not self.started:
            return  # the 413 went out instead
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


async def refuse(send: Send, receive: Receive, limit: int, *, linger: bool) -> None:
    """Answer 413 and close the connection, reading and dropping the body meanwhile if asked."""
    body = too_large(limit)
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    if not linger:
        headers.append((b"content-length", str(len(body)).encode()))
    # Lingering, the answer has no Content-Length (it is sent chunked): a server that knows the
    # body's length ends the response as soon as all of it is sent, closes the connection and
    # stops reading the upload (granian does), which resets the answer the client has not read.
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    # The whole answer goes out now; the response ends (and the server closes the connection)
    # only once the client stopped sending, so that its unread upload does not reset the answer.
    await send({"type": "http.response.body", "body": body, "more_body": linger})
    if not linger:
        return
    deadline = time.monotonic() + REFUSED_BODY_LINGER_SECONDS
    try:
        while (left := deadline - time.monotonic()) > 0:
            # A client that read its answer and stopped sending is let go soon after.
            message = await asyncio.wait_for(receive(), min(left, REFUSED_BODY_IDLE_SECONDS))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
    except TimeoutError:
        pass
    await send({"type": "http.response.body", "body": b"", "more_body": False})
