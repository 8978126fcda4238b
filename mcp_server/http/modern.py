"""POST on the 2026-07-28 path: one stateless request, answered from its envelope alone.

Routing is header-first (HTTP-26): an ``MCP-Protocol-Version`` that is not a handshake revision
comes here, unless a session id says the request belongs to a handshake-era session. Nothing here
reads or writes a session row or a shared-state key: the request carries its client in ``_meta``,
its notifications go on its own response (SSE, live, before the result: HTTP-30, PROG-05), and a
client that disconnects cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.envelope import (
    CLIENT_CAPABILITIES_KEY,
    PROTOCOL_VERSION_KEY,
    is_enveloped,
    meta_of,
    parse_envelope,
    unsupported_version,
)
from mcp_protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    MCPError,
)
from mcp_protocol.versions import is_handshake_version, is_modern_version

from .. import dispatch
from ..modern import requests
from ..modern.request_session import REQUESTS_REFUSED
from ..outgoing import DeliveryError
from ..registry.guard import registry_seen_by
from ..session import ServerSession
from . import encoding
from .background_share import check_background_share
from .errors import HTTPError
from .limits import fair_share_headers, principal_of
from .modern_headers import HeaderMismatchError, check_modern_headers
from .outbound import DroppingOutbound
from .request import Request
from .send_window import STALL_SECONDS
from .sse import SSEResponse

if TYPE_CHECKING:
    from .consumer import StreamableHTTPConsumer

# HTTP-29: the JSON-RPC errors that are the client's fault, answered with 400.
BAD_REQUEST_CODES = frozenset({HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY,
                               UNSUPPORTED_PROTOCOL_VERSION, PARSE_ERROR, INVALID_REQUEST,
                               INVALID_PARAMS})
# HTTP-30: notifications waiting for a slow client, per request; later ones are dropped.
MAX_BUFFERED_NOTIFICATIONS = 1000


def routes_here(request: Request, incoming: jsonrpc.Incoming) -> bool:
    """Whether a POST belongs on the modern path (HTTP-26)."""
    version = request.headers.get("mcp-protocol-version")
    if version is None or is_handshake_version(version.strip()):
        return False
    if request.headers.get("mcp-session-id"):
        # A handshake-era session's request: its header is checked there, and an envelope in
        # its body refused as an era violation (HTTP-31).
        return False
    enveloped = PROTOCOL_VERSION_KEY in (meta_of(incoming.params) or {})
    # An initialize without the envelope is the handshake whatever the header says, and so is a
    # discover under a header the server does not know (HTTP-12: ignored on both).
    if not enveloped and incoming.method == methods.INITIALIZE:
        return False
    if not is_modern_version(version.strip()):
        # An unknown (future) revision: answered -32022 here.
        return enveloped or incoming.method != methods.SERVER_DISCOVER
    return True


def status_for(response: dict) -> int:
    """HTTP-29: 404 for -32601, 400 for the client's errors, 200 for results and other errors."""
    error = response.get("error")
    if not isinstance(error, dict):
        return 200
    code = error.get("code")
    if code == METHOD_NOT_FOUND:
        return 404
    return 400 if code in BAD_REQUEST_CODES else 200


async def handle_modern_post(consumer: StreamableHTTPConsumer, request: Request,
                             incoming: jsonrpc.Incoming) -> None:
    header_version = (request.header("mcp-protocol-version") or "").strip()
    if not is_modern_version(header_version):
        error = unsupported_version(header_version)
        raise HTTPError(400, error.message, code=error.code, data=error.data, request_id=incoming.id)
    if incoming.kind == "response":
        raise HTTPError(400, "Invalid Request: the 2026-07-28 lifecycle has no client responses; "
                        "answer input requests by retrying the request (SEP-2322)")
    server = consumer.transport.server
    if incoming.method == methods.SUBSCRIPTIONS_LISTEN and (
            incoming.kind == "notification" or not is_enveloped(incoming.params)):
        raise HTTPError(400, "Invalid Request: subscriptions/listen needs an id and the _meta "
                        "envelope", code=INVALID_REQUEST, request_id=incoming.id)
    if incoming.kind == "notification":
        # No client notification is defined on this path (cancelling is disconnecting); a custom
        # one still reaches its hook.
        session = ServerSession(server, outbound=DroppingOutbound())
        session.act_for(consumer.principal)
        await server.handle_incoming_async(incoming, session)
        await consumer.reply(202)
        return
    try:
        # A tool hidden from this request is unknown to its header checks too (they would tell
        # that it exists).
        principal = request.principal
        user_id = principal.user_id if principal is not None else None
        tools = (await registry_seen_by(server, principal, user_id)).tools
        envelope = _envelope(request, tools, incoming, header_version)
    except MCPError as error:
        await _reply(consumer, jsonrpc.error_from(incoming.id, error))
        return
    if incoming.method == methods.SUBSCRIPTIONS_LISTEN:
        from .listen_streams import serve_listen

        await serve_listen(consumer, request, incoming.message, envelope)
        return
    # Served here, not in a coroutine of its own: this runs for every modern request.
    transport = consumer.transport
    principal_key = principal_of(request)
    await check_background_share(transport, request, incoming, principal_key)
    # A client that accepts JSON alone (allowed in JSON-response mode) gets no notifications.
    stream = ResponseStream(consumer, incoming.id, transport.options.max_sse_buffer_bytes,
                            streams=accepts_event_stream(request),
                            stall_timeout=transport.options.sse_stall_timeout)
    session = requests.new_session(server, envelope, stream, listen_supported=True)
    session.act_for(consumer.principal)
    session.principal_key = principal_key

    def disconnected() -> None:
        # Closing the response is this revision's cancellation (no notifications/cancelled).
        stream.disconnected()
        session.cancel_request(incoming.id, "the client closed the connection")

    method = incoming.method
    if method in requests.REMOVED_METHODS:  # -32601 before any handler runs (MOD-07)
        response = await requests.serve(server, incoming.message, session, incoming)
    else:
        # What requests.serve does for the others, a coroutine or two fewer.
        response = await consumer.while_connected(dispatch.handling(server, incoming, session), disconnected)
        response = requests.stamp_response(server, method, response)
    await stream.finish(response)


def _envelope(request: Request, tools: Any, incoming: jsonrpc.Incoming, header_version: str) -> Any:
    """The request's envelope after the header checks (HTTP-28) and envelope checks (MOD-05/06)."""
    check_modern_headers(request, tools, incoming.method, incoming.params)
    meta = meta_of(incoming.params)
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY)
               if meta is None or key not in meta]
    if missing:
        raise MCPError("Invalid params: the request _meta must carry " + ", ".join(missing),
                       code=INVALID_PARAMS, data={"invalidKeys": missing})
    if meta[PROTOCOL_VERSION_KEY] != header_version:
        raise HeaderMismatchError(
            f"Header mismatch: MCP-Protocol-Version header value {header_version!r} does not match "
            f"body value {meta[PROTOCOL_VERSION_KEY]!r}")
    return parse_envelope(incoming.params)


async def _reply(consumer: StreamableHTTPConsumer, response: dict) -> None:
    retry_after = fair_share_headers(response)
    if retry_after is not None:
        await consumer.reply_json(429, response, retry_after)  # the fair-share answer (limits.py)
        return
    await consumer.reply_json(status_for(response), response)


def accepts_event_stream(request: Request) -> bool:
    accept = (request.header("accept") or "").lower()
    return "text/event-stream" in accept or "*/*" in accept


class ResponseStream:
    """The one response of a modern request (the session's ``Outbound``).

    Until the handler emits a notification the response is undecided; the first notification
    starts an SSE stream and each is written as it comes, the response last (HTTP-30). Without
    any, the response is plain JSON with the status of HTTP-29. Writing happens on a task of its
    own, so a handler never waits for a slow client: at most MAX_BUFFERED_NOTIFICATIONS wait,
    and later ones are dropped (``send`` returns False, as for any undeliverable notification).
    """

    def __init__(self, consumer: StreamableHTTPConsumer, request_id: Any,
                 max_buffered_bytes: int | None, *, streams: bool = True,
                 stall_timeout: float = STALL_SECONDS):
        self.consumer = consumer
        self.stall_timeout = stall_timeout
        self.streams = streams
        self.request_id = request_id
        self.max_buffered_bytes = max_buffered_bytes
        self.sse: SSEResponse | None = None
        # Made with the first notification: most responses are plain JSON and never need them.
        self.queue: asyncio.Queue[tuple[str, bool] | None] | None = None
        self.writer: asyncio.Task | None = None
        self.gone = False
        self.dropped = 0

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        if "method" in message and "id" in message:
            raise DeliveryError(REQUESTS_REFUSED)
        if related_request_id != self.request_id or self.gone or not self.streams:
            # Not about this request: a modern request has no other stream to put it on.
            return False
        if self.queue is None:
            self.queue = asyncio.Queue()
            self.sse = SSEResponse(self.consumer.base_send, max_buffered_bytes=self.max_buffered_bytes,
                                   stall_timeout=self.stall_timeout)
            self.writer = asyncio.ensure_future(self._write_all())
        elif self.queue.qsize() >= MAX_BUFFERED_NOTIFICATIONS:
            self.dropped += 1
            return False
        # Encoded here, so that a notification JSON cannot carry raises in the handler that sent
        # it, as on every other stream, rather than in the writer.
        self.queue.put_nowait((jsonrpc.encode(message), False))
        return True

    async def _write_all(self) -> None:
        assert self.sse is not None and self.queue is not None
        while True:
            item = await self.queue.get()
            if item is None:
                return
            text, last = item  # the response, last, ends the stream
            if not await self.sse.event(text, last=last):
                self.gone = True
            if last:
                return

    def disconnected(self) -> None:
        self.gone = True
        if self.sse is not None:
            self.sse.disconnected()

    async def finish(self, response: dict | None) -> None:
        """Write the response: after the notifications on the stream, or alone as JSON."""
        gone, self.gone = self.gone, True  # what the handler's leftovers send now goes nowhere
        if self.writer is None or self.queue is None:
            if gone:
                return
            if response is None:
                await self.consumer.reply(202)  # cancelled: no response (HTTP-29)
            else:
                await _reply(self.consumer, response)
            return
        # None (cancelled) just ends the writer.
        self.queue.put_nowait(None if response is None else
                              (encoding.encode(self.consumer.transport.server, response), True))
        try:
            await self.writer
        finally:
            assert self.sse is not None
            if not self.sse.closed:
                with contextlib.suppress(Exception):
                    await self.sse.finish()


def check_no_envelope(request: Request, incoming: jsonrpc.Incoming) -> None:
    """HTTP-31: a handshake-path POST whose body carries the modern envelope.

    Under a modern header (so, with a session id) it is an era violation, -32600; under a
    missing or handshake header the header and body disagree, -32020.
    """
    meta = meta_of(incoming.params)
    if meta is None or PROTOCOL_VERSION_KEY not in meta:
        return
    header = (request.header("mcp-protocol-version") or "").strip()
    if is_modern_version(header):
        raise HTTPError(400, "Invalid Request: this session already negotiated the legacy "
                        "lifecycle; its requests must not carry the _meta envelope",
                        request_id=incoming.id)
    raise HTTPError(400, f"Header mismatch: MCP-Protocol-Version header value {header or None!r} "
                    f"does not match body value {meta[PROTOCOL_VERSION_KEY]!r}",
                    code=HEADER_MISMATCH, request_id=incoming.id)


def refuses_verb(request: Request) -> bool:
    """HTTP-27: the modern path is POST only; GET and DELETE there get 405."""
    if request.method == "POST":
        return False
    version = request.headers.get("mcp-protocol-version")
    return version is not None and not is_handshake_version(version.strip()) \
        and not request.headers.get("mcp-session-id")
