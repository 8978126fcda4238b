"""GET opens a listening stream (or resumes one with Last-Event-ID); DELETE ends a session."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ..telemetry import metrics
from .authorization import authorize, session_of
from .checks import check_get_accept, check_protocol_version
from .credential_watch import ending_when_credential_lapses, refuse_if_expired
from .errors import HTTPError
from .event_store import GET_STREAM, EventsDropped, parse_event_id, request_id_of
from .limits import too_many
from .listen import ListenStream
from .request import Request
from .sse import SSEResponse

if TYPE_CHECKING:
    from .consumer import StreamableHTTPConsumer


async def handle_get(consumer: StreamableHTTPConsumer, request: Request) -> None:
    transport = consumer.transport
    if transport.options.stateless:
        raise HTTPError(405, "Method not allowed: a stateless server has no listening stream",
                        headers=[(b"allow", b"POST")])
    listener, after, last_event_id = await _claim_stream(consumer, request)
    session_id, stream = listener.session_id, listener.stream
    runtime = transport.runtime
    runtime.streams[(session_id, stream)] = listener
    try:
        if after is not None:
            try:
                await listener.load_backlog(after)
            except EventsDropped as exc:
                raise HTTPError(410, f"Gone: events after Last-Event-ID {last_event_id!r} were dropped "
                                f"{exc.reason}; they cannot be replayed",
                                data={"droppedThrough": exc.dropped_through}) from None
        await listener.sse.comment("stream open")  # headers now, so the client knows it is live
        # Its credential lapsing ends it; the client resumes it with Last-Event-ID once it has
        # authenticated again (what is sent meanwhile is stored).
        async with ending_when_credential_lapses(transport, request, listener.close):
            await consumer.while_connected(listener.run(after), listener.disconnected)
    finally:
        if runtime.streams.get((session_id, stream)) is listener:
            del runtime.streams[(session_id, stream)]
        await transport.release_stream(session_id, stream, listener.token)
        await transport.stream_slots.give_back(session_id, listener.slot, listener.token)
        if listener.sse.started:
            await listener.sse.finish()


async def _claim_stream(consumer: StreamableHTTPConsumer,
                        request: Request) -> tuple[ListenStream, int | None, str | None]:
    """The stream the request opens (or resumes), claimed with one of its session's stream slots;
    the sequence it resumes after, and the Last-Event-ID that said so. (Apart, so that the
    session's record is not kept for as long as the stream is open.)"""
    transport = consumer.transport
    check_get_accept(request)
    record = await session_of(transport, request)
    await authorize(transport, request, record)
    check_protocol_version(request)
    refuse_if_expired(transport, request)

    stream, after, final_id = GET_STREAM, None, None
    last_event_id = request.header("last-event-id")
    if last_event_id:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            raise HTTPError(400, f"Bad Request: unknown Last-Event-ID {last_event_id!r}")
        stream, after = parsed
        final_id = request_id_of(stream)

    token = uuid.uuid4().hex
    if not await transport.claim_stream(record.id, stream, token):
        raise HTTPError(409, "Conflict: this session's stream is already open elsewhere")
    slot = await transport.stream_slots.take(record.id, token)
    if slot is None:
        await transport.release_stream(record.id, stream, token)
        metrics.refused("streams_per_session", 429)
        raise too_many(f"this session has {transport.options.max_streams_per_session} streams open, the most "
                       "allowed; close one first", transport.options.keepalive_interval)
    sse = SSEResponse(consumer.base_send, max_buffered_bytes=transport.options.max_sse_buffer_bytes,
                      stall_timeout=transport.options.sse_stall_timeout)
    listener = ListenStream(transport, record.id, stream, sse, token, final_id)
    listener.slot = slot
    return listener, after, last_event_id


async def handle_delete(consumer: StreamableHTTPConsumer, request: Request) -> None:
    transport = consumer.transport
    if transport.options.stateless:
        await consumer.reply_json(200, {"success": True})
        return
    record = await session_of(transport, request)
    await authorize(transport, request, record)
    await transport.end_session(record.id)
    await consumer.reply_json(200, {"success": True})
