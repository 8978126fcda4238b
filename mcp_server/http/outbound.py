"""Where the messages of a request served over Streamable HTTP go: its POST's SSE stream (stored
first, so it can be resumed anywhere), the session's listening stream, or nowhere."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError

from mcp_protocol import jsonrpc

from ..outgoing import DeliveryError
from . import encoding
from .event_store import GET_STREAM, event_id, post_stream
from .redis_client import RedisUnavailable
from .session_store import SessionRecord
from .sse import SSEResponse

if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.http")


class _Detached:
    """The SSE "connection" of a request served where its client never is (a background call's
    worker): always closed, so every message is stored and handed to the stream's holder."""

    closed = True


DETACHED = _Detached()


class PostOutbound:
    """Where a session's messages go while one POST is served.

    Messages of that request go on its SSE stream (stored first, so the stream can be resumed);
    when the client has gone they are stored for a resumed stream. Other messages go to the
    session's listening stream, wherever it is held. In JSON-response mode the request's
    notifications are dropped and requests to the client are refused.
    """

    def __init__(self, transport: StreamableHTTPTransport, record: SessionRecord, request_id: Any,
                 sse: SSEResponse | None):
        self.transport = transport
        self.record = record
        self.request_id = request_id
        self.sse = sse
        self.stream = post_stream(request_id)
        # The sequence of the last event written on the stream (0: the priming event).
        self.last_sequence = 0
        # A background call's: the stream that writes what its worker sends, and whether the
        # worker now holds the request (this process must not let go of its id when it ends).
        self.listener: Any = None
        self.request_handed_off = False
        # Whether the request's id was let go of with its response (one round trip for both, see
        # Claims.store_response): the POST must not let go of it again.
        self.request_released = False

    def disconnected(self) -> None:
        """The client dropped this request's connection."""
        self.sse.disconnected()
        if self.listener is not None:
            self.listener.disconnected()

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        is_request = "id" in message and "method" in message
        if related_request_id is None or related_request_id != self.request_id:
            if is_request:
                # The client's answer may be POSTed to any process: say which one waits for it.
                await self.transport.expect_answer(self.record.id, message["id"], related_request_id)
            return await self.transport.deliver(self.record.id, GET_STREAM, message)
        if self.sse is None:
            if is_request:
                raise DeliveryError(
                    "JSON response mode does not support server-to-client requests"
                )
            return False
        if is_request:
            await self.transport.expect_answer(self.record.id, message["id"], self.request_id)
        return await self.write(message)

    async def write(self, message: dict, *, last: bool = False) -> bool:
        """Store the message, then write it here (``last``: and end the stream), or leave it for
        a resumed stream. A response JSON cannot carry is answered with -32603 in its place."""
        try:
            return await self._write(message, last)
        except (TypeError, ValueError) as exc:  # what jsonrpc.encode raises, storing or writing it
            return await self._write(encoding.stand_in(self.transport.server, message, exc), last)

    async def _write(self, message: dict, last: bool) -> bool:
        if self.sse.closed:
            return await self.transport.deliver(self.record.id, self.stream, message)
        # Encoded once, here: the store takes the text it writes out (raises as encode() does).
        text = jsonrpc.encode(message)
        try:
            if last and not self.request_handed_off and "id" in message and "method" not in message:
                # The request's response: its id is let go of in the round trip that stores it.
                sequence, holder, self.request_released = await self.transport.store_response(
                    self.record.id, self.request_id, self.stream, message, text=text)
            else:
                sequence, holder = await self.transport.store_event(self.record.id, self.stream, message,
                                                                    text=text)
        except (RedisUnavailable, OperationalError, InterfaceError) as exc:
            if last or "id" in message or self.sse.closed:
                raise
            # The store stopped answering (Redis failing over, say): a notification (progress, a
            # log message) goes out unstored, not resumable, to the client that still listens,
            # rather than not at all. Responses have their own fallback (post.py).
            logger.info("a notification of request %r went out unstored: %s", self.request_id, exc)
            return await self.sse.event(text)
        if sequence is None:
            return False  # the session was deleted meanwhile
        # The client may have resumed this stream elsewhere (GET with Last-Event-ID) before this
        # process saw its connection go. A resumed stream is claimed before it replays, so an
        # event stored before the claim is replayed there, and one stored after is handed over
        # here (its holder is read after the event is stored); this connection, which the
        # client no longer reads, then ends.
        if holder is not None and await self.transport.send_event_to(  # (usually nobody: no coroutine)
                holder, self.record.id, self.stream, sequence, message):
            await self.sse.finish()
            return True
        if await self.sse.event(text, event_id(self.stream, sequence), last=last):
            self.last_sequence = max(self.last_sequence, sequence)
            return True
        await self.transport.hand_over(self.record.id, self.stream, sequence, message)
        return False

    async def close_stream(self, request_id: Any, *, retry_ms: int) -> bool:
        """End this request's SSE stream before its response (SEP-1699 polling).

        A last event repeats the id the client saw last and carries ``retry``; what the handler
        sends afterwards is stored and reaches the client when it resumes the stream with GET
        and Last-Event-ID, on any process (see :meth:`write`). Only from 2025-11-25, whose
        clients expect a POST stream to end early; older sessions keep theirs.
        """
        if request_id != self.request_id or self.sse is None or self.sse.closed:
            return False
        if self.record.protocol_version < "2025-11-25":
            return False
        await self.sse.event("", event_id(self.stream, self.last_sequence), retry_ms=retry_ms)
        await self.sse.finish()
        return True


class DroppingOutbound:
    """Stateless mode: nothing reaches the client but the response."""

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        if "id" in message and "method" in message:
            raise DeliveryError("Stateless mode does not support server-to-client requests")
        return False
