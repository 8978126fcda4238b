"""POST: one JSON-RPC message, answered as JSON, as an SSE stream, or with 202."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError

from mcp_protocol import jsonrpc, methods
from mcp_protocol.errors import INVALID_REQUEST

from .. import log_context
from ..dispatch import notification_through
from ..session import ServerSession
from ..telemetry import metrics
from .authorization import check_owner, check_validator, session_id_of, session_not_found
from .background_share import check_background_share
from .checks import (
    check_content_type,
    check_origin_storable,
    check_post_accept,
    check_protocol_version,
    check_standard_headers,
)
from .errors import HTTPError, unavailable
from .event_store import event_id
from .limits import admit_principal, check_progress_token, fair_share_headers, principal_of
from .modern import check_no_envelope, handle_modern_post, routes_here
from .outbound import DroppingOutbound, PostOutbound
from .redis_client import RedisUnavailable
from .request import Request
from .scopes import check_call_scopes
from .session_store import SessionRecord
from .sse import SSEResponse
from .stored_session import HTTPServerSession

logger = logging.getLogger("mcp_server.http")
# What a store that stopped answering raises: Redis (the shared state, the event store), the database.
STORE_FAILURES = (RedisUnavailable, OperationalError, InterfaceError)

if TYPE_CHECKING:
    from .consumer import StreamableHTTPConsumer

SESSION_HEADER = b"mcp-session-id"


async def handle_post(consumer: StreamableHTTPConsumer, request: Request) -> None:
    options = consumer.transport.options
    check_content_type(request)
    check_post_accept(request, json_only=options.enable_json_response or options.stateless)
    body = await consumer.read_body(request)
    incoming = _decode(body, options.max_json_depth, options.max_json_containers)
    if incoming.kind == "invalid":
        raise HTTPError(400, incoming.error["error"]["message"], code=incoming.error["error"]["code"],
                        request_id=incoming.id)
    # Records written from here on, until the consumer's serving() ends, carry the message's ids
    # beside the session's (a response's id is of the server's request: not one being served).
    log_context.update(method=incoming.method, params=incoming.params,
                       request_id=incoming.id if incoming.kind == "request" else None)
    try:
        if incoming.kind == "request" and consumer.transport.server.guarded:
            await check_call_scopes(consumer.transport, request, incoming)
        if routes_here(request, incoming):
            await handle_modern_post(consumer, request, incoming)
        else:
            await _handle(consumer, request, incoming)
    except STORE_FAILURES as exc:
        if incoming.kind != "request":
            raise  # the consumer's 503, with no id to carry
        # The 503 names the request it answers (the consumer's would carry no id).
        raise _store_unavailable(request, exc, incoming.id) from exc


def _handle(consumer: StreamableHTTPConsumer, request: Request,
            incoming: jsonrpc.Incoming) -> Awaitable[None]:
    """A POST of the handshake era (its scopes checked already): the checks, then the serving to
    await. (Not a coroutine itself: one layer less for every resumption of the request.)"""
    transport = consumer.transport
    if incoming.kind in ("request", "notification"):
        check_standard_headers(request, incoming.method, incoming.params, incoming.id)
        check_no_envelope(request, incoming)
    if transport.options.stateless:
        return _stateless(consumer, request, incoming)
    if incoming.kind == "request" and incoming.method == methods.INITIALIZE:
        return _initialize(consumer, request, incoming)
    if incoming.kind == "request" and incoming.method == methods.SERVER_DISCOVER \
            and not request.header("mcp-session-id"):
        return _stateless(consumer, request, incoming)  # sessionless, and it stores nothing (MOD-02)
    return _in_session(consumer, request, incoming)


def _store_unavailable(request: Request, exc: Exception, request_id: Any) -> HTTPError:
    if isinstance(exc, RedisUnavailable):
        logger.warning("%s %s: %s", request.method, request.path, exc)
        return unavailable(exc.retry_after, request_id=request_id)
    # The database went away (restarted, failed over, this connection terminated): the next
    # request gets a new connection (or a checked one of the pool), so the client should try again.
    logger.warning("%s %s: the database failed: %s", request.method, request.path, exc)
    return unavailable(1.0, "the database", request_id=request_id)


def _decode(body: bytes, max_depth: int, max_containers: int) -> jsonrpc.Incoming:
    try:
        payload = jsonrpc.decode(body, max_depth, max_containers)
    except jsonrpc.DecodeError as refused:
        raise HTTPError(400, refused.message, code=refused.code, request_id=refused.request_id) from None
    if isinstance(payload, list):
        raise HTTPError(400, "JSON-RPC body must be a single request object", code=INVALID_REQUEST)
    return jsonrpc.classify(payload)


async def _stateless(consumer: StreamableHTTPConsumer, request: Request,
                     incoming: jsonrpc.Incoming) -> None:
    """Every POST runs against a new, empty session: nothing leaks from one to the next."""
    server = consumer.transport.server
    session = ServerSession(server, outbound=DroppingOutbound())
    session.act_for(consumer.principal)
    session.principal_key = principal_of(request)
    await check_background_share(consumer.transport, request, incoming, session.principal_key)
    session.requests_refused = "Stateless mode does not support server-to-client requests"
    answer = await server.handle_incoming_async(incoming, session)
    if answer is None:
        await consumer.reply(202)
    else:
        await _answer_json(consumer, answer)


async def _initialize(consumer: StreamableHTTPConsumer, request: Request,
                      incoming: jsonrpc.Incoming) -> None:
    transport = consumer.transport
    if request.header("mcp-session-id"):
        # A live session cannot be initialized again; an unknown one is simply gone.
        if await transport.sessions.load(request.header("mcp-session-id")) is None:
            raise HTTPError(404, "Session not found")
        raise HTTPError(400, "Invalid Request: Server already initialized", request_id=incoming.id)
    check_origin_storable(request)
    limit = transport.options.max_sessions
    principal = principal_of(request)
    session = ServerSession(transport.server, outbound=DroppingOutbound())
    answer = await transport.server.handle_incoming_async(incoming, session)
    if answer is None or "error" in answer:
        # A failed initialize keeps nothing and names no session.
        await consumer.reply_json(200, answer) if answer is not None else await consumer.reply(202)
        return
    record = SessionRecord.new(
        protocol_version=session.protocol_version, client_info=session.client_info or {},
        client_capabilities=session.client_capabilities or {},
        owner_id=request.user.pk if request.user is not None else None,
        origin=request.header("origin") or "", principal=principal,
    )
    count, total = await transport.sessions.create(
        record, count_principal=transport.options.max_sessions_per_principal is not None,
        count_sessions=limit is not None)
    if total is not None and total > limit:
        await _refuse_past_capacity(transport, record.id, limit)
    if count is not None:  # (counted only with a limit per principal)
        await admit_principal(transport, principal, record.id, count, incoming.id)
    await consumer.reply_json(200, answer, [(SESSION_HEADER, record.id.encode())])


async def _refuse_past_capacity(transport: Any, session_id: str, limit: int) -> None:
    """The new session made one too many: expired sessions go first, and if the database still
    counts too many, the new one is removed (it never lived) and refused."""
    await transport.reap()
    if await transport.sessions.count() > limit:
        await transport.sessions.delete(session_id, ended=False)
        metrics.refused("sessions", 503)
        raise HTTPError(503, "Service Unavailable: too many sessions; try again later")


async def _in_session(consumer: StreamableHTTPConsumer, request: Request,
                      incoming: jsonrpc.Incoming) -> None:
    transport = consumer.transport
    if incoming.kind == "request":
        # The request's id is claimed in the round trip that reads the session, where the shared
        # state allows; let go of again below if the request is refused before it runs.
        record, claimed = await transport.load_claiming(session_id_of(request), incoming.id)
    else:
        record, claimed = await transport.sessions.load(session_id_of(request)), None
    if record is None:
        raise session_not_found()
    try:
        # authorize(), its coroutine spared when no validator is configured (the usual case).
        check_owner(request, record)
        if transport.options.session_request_validator is not None:
            await check_validator(transport, request, record)
        check_protocol_version(request)
        if incoming.kind == "request":
            check_progress_token(incoming.params, incoming.id, transport.options.max_progress_token_length)
            await check_background_share(transport, request, incoming, record.principal)
    except BaseException:
        if claimed:
            await transport.release_request(record.id, incoming.id)
        raise
    if incoming.kind == "response":
        await transport.route_response(record.id, incoming.message)
        await consumer.reply(202)
    elif incoming.kind == "notification":
        await _notification(consumer, record, incoming)
        await consumer.reply(202)
    else:
        # The request (inline: its awaits resume one coroutine less).
        if not claimed and not await transport.claim_request(record.id, incoming.id):
            raise HTTPError(409, f"Conflict: request id {incoming.id!r} is already in flight in this "
                            "session", request_id=incoming.id)
        handed_off = False
        try:
            if transport.options.enable_json_response:
                await _json_response(consumer, record, incoming)
            else:
                handed_off = await _sse_response(consumer, record, incoming)
        finally:
            if not handed_off:  # a background call's worker lets go of the id when it ends
                await transport.release_request(record.id, incoming.id)


async def _notification(consumer: StreamableHTTPConsumer, record: SessionRecord,
                        incoming: jsonrpc.Incoming) -> None:
    transport = consumer.transport
    if incoming.method == methods.NOTIFICATIONS_CANCELLED:
        chain = transport.server.middleware_chain
        if chain is None:
            await _route_cancel(transport, record, incoming.params)
            return

        async def route(_server: Any, _method: str, params: Any, _session: Any) -> None:
            await _route_cancel(transport, record, params)

        session = HTTPServerSession(transport, record, DroppingOutbound(), consumer.principal)
        await notification_through(chain, transport.server, incoming, session, route)
        return
    session = HTTPServerSession(transport, record, DroppingOutbound(), consumer.principal)
    await transport.server.handle_incoming_async(incoming, session)


async def _route_cancel(transport: Any, record: SessionRecord, params: Any) -> None:
    # The request may run in any process: send the cancel where it runs.
    params = params if isinstance(params, dict) else {}
    await transport.route_cancel(record.id, params.get("requestId"), params.get("reason"))


async def _json_response(consumer: StreamableHTTPConsumer, record: SessionRecord,
                         incoming: jsonrpc.Incoming) -> None:
    transport = consumer.transport
    session = HTTPServerSession(transport, record, PostOutbound(transport, record, incoming.id, None),
                                consumer.principal)
    session.requests_refused = "JSON response mode does not support server-to-client requests"
    answer = await transport.server.handle_incoming_async(incoming, session)
    if answer is None:
        await consumer.reply(202)  # cancelled: no response
    else:
        await _answer_json(consumer, answer)


async def _answer_json(consumer: StreamableHTTPConsumer, answer: dict) -> None:
    """A request's answer as one JSON object: 200, or 429 for a fair-share refusal made while it
    was served (a background call past its principal's share)."""
    retry_after = fair_share_headers(answer)
    await consumer.reply_json(200 if retry_after is None else 429, answer, retry_after)


async def _sse_response(consumer: StreamableHTTPConsumer, record: SessionRecord,
                        incoming: jsonrpc.Incoming) -> bool:
    """Serve the request on an SSE stream; True when its id needs no release here: a background
    call's worker holds it now, or it was let go of with the response."""
    transport = consumer.transport
    sse = SSEResponse(consumer.base_send, max_buffered_bytes=transport.options.max_sse_buffer_bytes,
                      stall_timeout=transport.options.sse_stall_timeout)
    outbound = PostOutbound(transport, record, incoming.id, sse)
    session = HTTPServerSession(transport, record, outbound, consumer.principal)
    if record.protocol_version >= "2025-11-25":
        # An event id before anything else lets the client resume this stream (SEP-1699); it
        # goes out with the first event, or on its own a moment later.
        sse.hold("", event_id(outbound.stream, 0))
    answer = await consumer.while_connected(
        transport.server.handle_incoming_async(incoming, session), outbound.disconnected
    )
    if answer is not None and fair_share_headers(answer) is not None and sse.take_back():
        # Refused before anything went out (a rate limit): the status can still say so.
        await _answer_json(consumer, answer)
        return False
    if answer is not None:
        try:
            await outbound.write(answer, last=True)
        except STORE_FAILURES as exc:
            if sse.closed:
                raise
            # Redis or the database failed, so the answer cannot be stored for a resume; the
            # client still listens, so it gets it now, unstored, rather than a stream that ends
            # unanswered (a 503 now would lose the answer of a call that ran).
            logger.warning("the response to %r went out unstored: %s", incoming.id, exc)
            await sse.event(jsonrpc.encode(answer), last=True)
            return False
    if not sse.begun:
        await consumer.reply(202)
    elif not sse.closed:  # (the usual response was the last event: the stream has ended)
        await sse.finish()
    return outbound.request_handed_off or outbound.request_released

