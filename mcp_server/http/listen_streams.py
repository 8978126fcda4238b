"""``subscriptions/listen`` streams of the 2026-07-28 revision (SEP-2575), on Streamable HTTP.

A listen stream is an SSE response to one POST: the acknowledgement first, then every
notification its filter honours, each stamped with the listen request's id as
``io.modelcontextprotocol/subscriptionId``. They are fed from every process: list changes ride
the ``mcp.broadcast`` messages the handshake-era GET streams get, resource updates an
``mcp.listen`` message to the group (see ``runtime.py``); each process offers them to its own
streams. Nothing about a listen stream is stored, in the database or in Redis: a dropped stream is
simply reopened by the client, so there is nothing to resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.envelope import RESULT_COMPLETE, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY, Envelope
from mcp_protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError

from .. import ports
from ..telemetry import metrics
from .credential_watch import ending_when_credential_lapses, refuse_if_expired
from .errors import HTTPError
from .event_store import request_key
from .limits import principal_of, too_many
from .listen_filter import TASK_IDS, ListenFilter, honour, parse_requested
from .mailbox import TIMED_OUT, Mailbox
from .sse import SSEResponse

if TYPE_CHECKING:
    from .consumer import StreamableHTTPConsumer
    from .request import Request
    from .transport import StreamableHTTPTransport

class ListenSubscription:
    """One open listen stream of this process.

    ``max_queued``: notifications waiting to be written at most (the transport's
    ``max_queued_stream_events``). A client that stops reading makes them pile up; past this the
    stream ends (abruptly: the client reopens it), rather than growing without bound or dropping
    some silently.
    """

    def __init__(self, request_id: Any, honoured: ListenFilter, sse: SSEResponse,
                 keepalive_interval: float | None, server_info: dict | None = None, *,
                 max_queued: int = 1000):
        self.request_id = request_id
        self.filter = honoured
        self.sse = sse
        self.keepalive_interval = keepalive_interval
        self.server_info = server_info
        self._queue = Mailbox()  # of notifications, or None: the end
        self._max_queued = max_queued
        self._graceful = False
        self._overflowed = False
        self._retry_ms: int | None = None

    def offer(self, message: dict) -> None:
        """Queue ``message`` if the filter honours it (called for every notification)."""
        if self._graceful or self._overflowed or self.sse.closed or not self.filter.wants(message):
            return
        if self._queue.qsize() >= self._max_queued:
            self._overflowed = True  # the stream ends without its response: the client reopens it
            self._queue.put_nowait(None)
            return
        self._queue.put_nowait(self._stamped(message))

    def end(self, retry_ms: int | None = None) -> None:
        """End the stream with its ``subscriptions/listen`` response (LSN-07); ``retry_ms``: with
        an SSE retry hint too (its process drains: the client opens it again elsewhere)."""
        if self._graceful:
            return  # ending already
        self._graceful = True
        self._retry_ms = retry_ms
        self._queue.put_nowait(None)

    def disconnected(self) -> None:
        """The client went away: nothing more is written, and the stream's slot is freed."""
        self.sse.disconnected()
        self._queue.put_nowait(None)

    def _stamped(self, message: dict) -> dict:
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, dict) else {}), SUBSCRIPTION_ID_KEY: self.request_id}
        return {**message, "params": params}

    def acknowledgement(self) -> dict:
        return jsonrpc.notification(methods.NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED, {
            "notifications": self.filter.wire, "_meta": {SUBSCRIPTION_ID_KEY: self.request_id}})

    def completion(self) -> dict:
        meta: dict[str, Any] = {SUBSCRIPTION_ID_KEY: self.request_id}
        if self.server_info is not None:
            meta[SERVER_INFO_KEY] = self.server_info
        return jsonrpc.response(self.request_id, {"resultType": RESULT_COMPLETE, "_meta": meta})

    async def run(self) -> None:
        """The acknowledgement, then notifications and keepalives until the stream ends."""
        # Queued notifications wait behind the acknowledgement: none precedes it (LSN-03).
        if not await self.sse.event(jsonrpc.encode(self.acknowledgement())):
            return
        while True:
            item = await self._queue.get(self.keepalive_interval)
            if item is TIMED_OUT:
                # A write to a peer that is gone fails: the stream ends and frees its slot (LSN-06).
                if not await self.sse.comment("ping"):
                    return
                continue
            if item is None:
                if self._graceful and not self.sse.closed:
                    await self.sse.event(jsonrpc.encode(self.completion()), retry_ms=self._retry_ms,
                                         last=True)
                return
            if not await self.sse.event(jsonrpc.encode(item)):
                return


class ListenRegistry:
    """This process's listen streams, by request id (one per event loop, in its runtime)."""

    def __init__(self) -> None:
        self.streams: dict[str, ListenSubscription] = {}

    def __len__(self) -> int:
        return len(self.streams)

    def offer(self, message: dict) -> None:
        for subscription in list(self.streams.values()):
            subscription.offer(message)

    def end_all(self, retry_ms: int | None = None) -> None:
        for subscription in list(self.streams.values()):
            subscription.end(retry_ms)


def _refused(status: int, error: MCPError | str, request_id: Any, *, code: int = INVALID_REQUEST,
             headers: list[tuple[bytes, bytes]] | None = None) -> HTTPError:
    if isinstance(error, MCPError):
        return HTTPError(status, error.message, code=error.code, data=error.data, request_id=request_id)
    return HTTPError(status, error, code=code, request_id=request_id, headers=headers)


async def serve_listen(consumer: StreamableHTTPConsumer, request: Request, message: dict,
                       envelope: Envelope) -> None:
    """Answer one ``subscriptions/listen`` POST: its SSE stream, or a JSON error with its status.

    ``message`` is the decoded request, with an id; ``envelope`` its validated ``_meta`` envelope
    (the modern path refused the request without either, and checked its headers).
    """
    transport = consumer.transport
    request_id = message["id"]
    refuse_if_expired(transport, request, request_id)
    try:
        requested = parse_requested(message.get("params"), transport.options.max_subscriptions_per_session)
    except MCPError as error:
        raise _refused(400, error, request_id) from None

    if TASK_IDS in requested:
        # The tasks the caller may see, as the Tasks extension says (with none installed, none).
        task_filter = ports.implementation(ports.ListenTaskFilter)
        try:
            requested[TASK_IDS] = [] if task_filter is None else await task_filter.visible_task_ids(
                requested[TASK_IDS], envelope, consumer.principal)
        except MCPError as error:
            raise _refused(400, error, request_id) from None
    runtime = await transport.ensure_runtime()
    registry = runtime.listens
    limit = transport.options.max_listen_subscriptions
    if limit is not None and len(registry) >= limit:
        metrics.refused("listen_streams", 503)
        raise _refused(503, f"Service Unavailable: this process serves {limit} listen streams, the "
                            "most allowed; try again later", request_id, code=INTERNAL_ERROR,
                       headers=[(b"retry-after", b"1")])
    server = transport.server
    honoured = honour(requested, server.capabilities_for(envelope.protocol_version))
    sse = SSEResponse(consumer.base_send, max_buffered_bytes=transport.options.max_sse_buffer_bytes,
                      stall_timeout=transport.options.sse_stall_timeout)
    key = request_key(request_id)
    if key in registry.streams:
        # The id names the open stream already: the new one ends at once, with nothing on it.
        await sse.finish()
        return
    subscription = ListenSubscription(request_id, honoured, sse, transport.options.listen_keepalive_interval,
                                      server.server_info_for(envelope.protocol_version),
                                      max_queued=transport.options.max_queued_stream_events)
    async with _principal_place(transport, request, request_id):
        registry.streams[key] = subscription
        try:
            # Its credential lapsing ends it with its response, as a closing server does: the
            # client opens it again once it has authenticated again.
            async with ending_when_credential_lapses(transport, request, subscription.end):
                await consumer.while_connected(subscription.run(), subscription.disconnected)
        finally:
            if registry.streams.get(key) is subscription:
                del registry.streams[key]
            with contextlib.suppress(Exception):
                await sse.finish()


@contextlib.asynccontextmanager
async def _principal_place(transport: StreamableHTTPTransport, request: Request,
                           request_id: Any) -> AsyncIterator[None]:
    """One of the principal's ``max_listen_subscriptions_per_principal`` places, held (and renewed)
    while the stream lives, in the shared state every process sees; 429 when all are held."""
    slots, owner, token = transport.listen_slots, principal_of(request), uuid.uuid4().hex
    slot = await slots.take(owner, token)
    if slot is None:
        metrics.refused("listen_streams_per_principal", 429)
        refused = too_many(f"{slots.limit} listen streams of this client are open, the most allowed; "
                           "close one first", transport.options.keepalive_interval)
        refused.request_id = request_id
        raise refused
    renewal = asyncio.ensure_future(_renew(transport, owner, slot, token)) if slot >= 0 else None
    try:
        yield
    finally:
        if renewal is not None:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
        await slots.give_back(owner, slot, token)


async def _renew(transport: StreamableHTTPTransport, owner: str, slot: int, token: str) -> None:
    """Keep the place from lapsing while the stream lives (it lapses with a process that died)."""
    while True:
        await asyncio.sleep(transport.options.keepalive_interval)
        with contextlib.suppress(Exception):  # a store that failed: the place may lapse, no more
            await transport.listen_slots.renew(owner, slot, token)
