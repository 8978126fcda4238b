"""The ASGI side of the endpoint: one consumer instance per HTTP request.

It subclasses Channels' ``AsyncHttpConsumer`` for its response helpers but runs its own
``__call__``: a stream outlives the request body, the consumer must see ``http.disconnect`` while
a stream is open, and inter-process messages go to one channel per process (see ``runtime.py``)
rather than a channel per request, which would cost the channel layer a round trip each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import markcoroutinefunction
from channels.generic.http import AsyncHttpConsumer
from django.db import InterfaceError, OperationalError

from mcp_protocol import jsonrpc

from .. import log_context, telemetry
from ..auth.base import Principal
from . import encoding
from .checks import check_header_values, check_host_and_origin
from .errors import HTTPError, internal_error, unavailable
from .get import handle_delete, handle_get
from .modern import refuses_verb
from .post import handle_post
from .redis_client import RedisUnavailable
from .request import Request

if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.http")

JSON_HEADERS = [(b"content-type", b"application/json")]
ALLOWED_METHODS = b"GET, POST, DELETE"
VERBS = {"POST": handle_post, "GET": handle_get, "DELETE": handle_delete}


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


class StreamableHTTPConsumer(AsyncHttpConsumer):
    def __init__(self, transport: StreamableHTTPTransport):
        super().__init__()
        self.transport = transport
        self.principal: Principal | None = None

    @classmethod
    def as_asgi(cls, **initkwargs: Any) -> Callable[[dict, Callable, Callable], Awaitable[None]]:
        """Channels' ``as_asgi()``, without a coroutine of its own around each consumer's (an
        open stream would keep it for as long as it is open)."""

        @markcoroutinefunction
        def app(scope: dict, receive: Callable, send: Callable) -> Awaitable[None]:
            return cls(**initkwargs)(scope, receive, send)

        app.consumer_class = cls  # type: ignore[attr-defined]
        app.consumer_initkwargs = initkwargs  # type: ignore[attr-defined]
        functools.update_wrapper(app, cls, updated=())
        return app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            raise ValueError(f"the MCP endpoint serves HTTP, not {scope['type']}")
        self.scope = scope
        self.base_send = send
        self.receive = receive
        telemetry.transport_scope.set(scope)  # the spans' client.address and network.*
        request = Request(scope)
        # Records written while it is served carry the session it names (mcp_server.log_context).
        # Served here, not in a coroutine of its own: this runs for every request.
        with log_context.serving(session_id=request.headers.get("mcp-session-id")):
            try:
                transport = self.transport
                if not transport.options.stateless and transport.current_runtime() is None:
                    # A stateless transport has no streams to route to, and may be built per request
                    # (HTTP-02): starting a runtime (a channel, background tasks) each time would leak.
                    await transport.ensure_runtime()
                check_header_values(request)
                if self.transport.options.dns_rebinding_protection:
                    check_host_and_origin(request, self.transport.allowed_hosts,
                                          self.transport.options.allowed_origins)
                resource_server = self.transport.resource_server
                if resource_server is None:
                    # The default: the session cookie's user (session_auth), and nothing else to run.
                    if request.user is not None:
                        request.principal = Principal(user=request.user, method="session")
                else:
                    await self.authenticate(request, resource_server)
                self.principal = request.principal
                handler = VERBS.get(request.method)
                if refuses_verb(request):
                    raise HTTPError(405, f"Method not allowed: {request.method} (protocol revision "
                                    "2026-07-28 serves POST only)", headers=[(b"allow", b"POST")])
                if handler is None:
                    raise HTTPError(405, f"Method not allowed: {request.method}",
                                    headers=[(b"allow", ALLOWED_METHODS)])
                await handler(self, request)
            except ClientGone:
                return
            except HTTPError as error:
                await self.reply_error(error)
            except RedisUnavailable as exc:
                logger.warning("%s %s: %s", request.method, request.path, exc)
                await self.reply_error(unavailable(exc.retry_after))
            except (OperationalError, InterfaceError) as exc:
                # The database went away (restarted, failed over, this connection terminated): the
                # next request gets a new connection, so the client should try again.
                logger.warning("%s %s: the database failed: %s", request.method, request.path, exc)
                await self.reply_error(unavailable(1.0, "the database"))
            except Exception as exc:
                self.transport.server.report_exception(exc, {"request": f"{request.method} {request.path}"})
                await self.reply_error(internal_error())

    async def authenticate(self, request: Request, resource_server: Any) -> None:
        """Who sent the request (``request.principal`` and ``request.user``), or its refusal."""
        try:
            principal = await resource_server.authenticate(request)
        except HTTPError as refused:
            if request.method == "POST" and refused.status in (400, 401, 403):
                refused.request_id = await self._request_id_of_body(request)
            raise
        request.principal = principal
        user = principal.user if principal is not None else None
        request.user = user if user is not None and getattr(user, "is_authenticated", False) else None

    async def _request_id_of_body(self, request: Request) -> Any:
        """The JSON-RPC id of a refused POST, where one can be read (bounded as any body is)."""
        try:
            body = await self.read_body(request)
            options = self.transport.options
            payload = jsonrpc.decode(body, options.max_json_depth, options.max_json_containers)
        except (HTTPError, jsonrpc.DecodeError):
            return None
        request_id = payload.get("id") if isinstance(payload, dict) else None
        return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None

    # Responses -------------------------------------------------------------------------------
    async def reply(self, status: int, body: bytes = b"",
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
        # Straight to the server, as send_response would after two more layers of calls. With
        # its length, the server sends the body as it is rather than in chunks (and a close).
        await self.base_send({"type": "http.response.start", "status": status,
                              "headers": [*(headers or ()), (b"content-length", b"%d" % len(body))]})
        await self.base_send({"type": "http.response.body", "body": body, "more_body": False})

    async def reply_json(self, status: int, message: Any,
                         headers: list[tuple[bytes, bytes]] | None = None) -> None:
        await self.reply(status, encoding.encode(self.transport.server, message).encode("utf-8"),
                         JSON_HEADERS + list(headers or []))

    async def reply_error(self, error: HTTPError) -> None:
        await self.reply(error.status, error.body(), JSON_HEADERS + error.headers)

    # Reading ---------------------------------------------------------------------------------
    async def read_body(self, request: Request) -> bytes:
        """The whole body, refused with 413 past ``max_request_bytes`` (before reading, if
        Content-Length says so, else as soon as the chunks pass the limit)."""
        limit = self.transport.options.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, f"Payload Too Large: the body exceeds {limit} bytes")
        chunks, size = [], 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HTTPError(413, f"Payload Too Large: the body exceeds {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def until_disconnect(self, on_disconnect: Callable[[], Any]) -> None:
        """Wait for the client to go away (run as a task while a stream is open)."""
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                on_disconnect()
                return

    async def while_connected(self, work: Awaitable[Any], on_disconnect: Callable[[], Any]) -> Any:
        """Run ``work``; if the client disconnects meanwhile, ``on_disconnect`` is called and
        ``work`` goes on (a request is not cancelled by a dropped connection)."""
        # The watcher starts once ``work`` first waits: most calls end without ever waiting, and
        # a task started and cancelled for each of them would cost about a tenth of the request.
        watch = _DisconnectWatch(self, on_disconnect)
        watch.start = asyncio.get_running_loop().call_soon(watch.begin)
        try:
            return await work
        finally:
            if watch.task is None:  # the usual end: the work never waited, no task to stop
                watch.start.cancel()
                watch.start = None
            else:
                await watch.stop()


class _DisconnectWatch:
    """The task that waits for the client to go away while ``while_connected``'s work runs, started
    once the work first waits. (An open stream keeps it for hours: slots, and the handle that
    started the task is let go as it runs.)"""

    __slots__ = ("consumer", "on_disconnect", "start", "task")

    def __init__(self, consumer: StreamableHTTPConsumer, on_disconnect: Callable[[], Any]):
        self.consumer = consumer
        self.on_disconnect = on_disconnect
        self.start: asyncio.Handle | None = None
        self.task: asyncio.Task | None = None

    def begin(self) -> None:
        self.start = None
        self.task = asyncio.ensure_future(self.consumer.until_disconnect(self.on_disconnect))

    async def stop(self) -> None:
        if self.start is not None:
            self.start.cancel()
            self.start = None
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
