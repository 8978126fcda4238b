"""What one process knows and how processes tell each other things.

Each process has one channel on the channel layer and belongs to the group of every process
serving the same server (:func:`runtime_group`).
Which process holds a session's listening stream, serves an in-flight request, or waits for the
client's answer to a request is kept in the shared state, pointing at that process's channel; a
heartbeat of that channel, renewed here, tells the other processes it is alive (``liveness.py``).

| message on the layer | to | effect |
| --- | --- | --- |
| ``mcp.cancel`` | the process serving the request | flips the request's cancellation |
| ``mcp.response`` | the process waiting for the answer | wakes the waiting handler |
| ``mcp.deliver`` | the process holding the session's stream | writes the event on it |
| ``mcp.broadcast`` | every process (group) | writes the event on every local stream |
| ``mcp.listen`` | every process (group) | offers the notification to the local listen streams |
| ``mcp.close`` | every process (group) | ends the session's local streams and requests |
| ``mcp.registry`` | every process (group) | drops its registry snapshot (an admin change) |
| ``mcp.end`` | the process holding a stream | ends it (a cancelled background call: no response) |
| ``mcp.call`` | the web process holding a relayed background call | a message of its worker |
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, TypeVar

from channels.layers import get_channel_layer

from mcp_protocol.cancellation import Cancellation

from .. import log_context
from ..outgoing import PendingRequests
from ..telemetry import metrics
from .drain import drain
from .event_store import GET_STREAM, request_id_of
from .listen_streams import ListenRegistry
from .redis_client import Backoff, RedisUnavailable

if TYPE_CHECKING:
    from .listen import ListenStream
    from .transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.http")
T = TypeVar("T")

RUNTIME_GROUP = "mcp.runtime"  # the prefix of every server's group of processes
# Seconds between renewals of this process's membership of the group: Channels expires it after a
# day, and a Redis that lost its data (a flush, a failover to an empty replica) has forgotten it,
# when broadcasts and session ends stop reaching this process until the next renewal. The claims
# of its streams and requests are made again at the same time.
GROUP_REJOIN_INTERVAL = 10.0
# How long this process's marker in the shared state lives: gone sooner, the shared state lost
# its data, and the process claims again what it holds (an expired marker costs one needless look).
MARKER_TTL = 24 * 3600.0
# Seconds a send or group change on the channel layer may take (a connection and a command, each
# bounded by the layer's own socket timeout, can add up to more) before the request gets 503.
LAYER_TIMEOUT = 10.0


async def on_layer(call: Awaitable[T]) -> T:
    """Await a channel layer operation (a send, a group change) for at most
    :data:`LAYER_TIMEOUT`; its Redis failing or not answering is :class:`RedisUnavailable` (the
    request gets 503), like the shared state's."""
    try:
        async with asyncio.timeout(LAYER_TIMEOUT):
            return await call
    except TimeoutError as exc:
        raise RedisUnavailable(f"the channel layer did not answer within {LAYER_TIMEOUT:g} s") from exc
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise RedisUnavailable(f"the channel layer failed: {type(exc).__name__}: {exc}") from exc


def runtime_group(server_name: str, group: str | None = None) -> str:
    """The channel-layer group of the processes serving one server: named after the server (or
    ``group``), so two servers on one channel layer never receive each other's messages.

    Channels allows only ASCII letters, digits, ``-``, ``_`` and ``.`` (under 100 characters): the
    name keeps a readable part of the server's name plus a hash of all of it, which stays distinct.
    """
    name = group if group is not None else server_name
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
    return f"{RUNTIME_GROUP}.{readable}.{digest}"


class Runtime:
    """The per-process part of a transport: started lazily on the first request."""

    def __init__(self, transport: StreamableHTTPTransport):
        self.transport = transport
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self.pending = PendingRequests()
        self.in_flight: dict[tuple[str, str], Cancellation] = {}
        # (session id, stream name) -> the stream this process writes for it.
        self.streams: dict[tuple[str, str], ListenStream] = {}
        # The 2026-07-28 subscriptions/listen streams this process writes (listen_streams.py).
        self.listens = ListenRegistry()
        # Relayed background calls this process answers: call id -> what their worker sends.
        self.calls: dict[str, asyncio.Queue] = {}
        self._tasks: list[asyncio.Task] = []
        metrics.watch_runtime(self)

    @property
    def channel_key(self) -> str:
        """What the shared state records for "this process" (a channel, or this process alone)."""
        return self.channel or "local"

    async def start(self) -> None:
        if self.layer is not None:
            self.channel = await self.layer.new_channel("mcp.process.")
            await on_layer(self.layer.group_add(self.transport.group, self.channel))
            self._spawn(self._receive_forever(), "mcp-receive")
            self._spawn(self._rejoin_forever(), "mcp-rejoin")
        # Alive before claiming anything: a claim without a heartbeat reads as a dead process's.
        await self._beat()
        self._spawn(self._heartbeat_forever(), "mcp-heartbeat")
        self._spawn(self._housekeeping(), "mcp-housekeeping")
        drain.add_runtime(self)

    def _spawn(self, coroutine: Coroutine[object, object, None], name: str) -> None:
        # The process's tasks, though a request may start them: their log records are no request's.
        self._tasks.append(asyncio.create_task(coroutine, name=name, context=log_context.detached()))

    async def stop(self) -> None:
        drain.discard_runtime(self)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        with contextlib.suppress(Exception):
            await self.transport.liveness.stop(self.channel_key)
        if self.layer is not None and self.channel is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(self.transport.group, self.channel)

    # Sending to the process that holds something ---------------------------------------------
    async def send_to(self, channel: str | None, message: dict) -> None:
        """Deliver ``message`` to the process owning ``channel`` (this one included)."""
        if channel is None:
            return
        if channel == self.channel_key:
            await self._handle(message)
        elif self.layer is not None:
            await on_layer(self.layer.send(channel, message))

    async def send_to_all(self, message: dict) -> None:
        if self.layer is None:
            await self._handle(message)
        else:
            await on_layer(self.layer.group_send(self.transport.group, message))

    # Receiving -------------------------------------------------------------------------------
    async def _receive_forever(self) -> None:
        # While the layer's Redis does not answer, retry after growing delays (with jitter, so the
        # processes that lost it together do not all come back at once), not in a tight loop.
        backoff = Backoff(base=0.5, cap=10.0)
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next_delay()
                logger.warning("receiving from the channel layer failed (%s: %s); retrying in %.1f s",
                               type(exc).__name__, exc, delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            try:
                await self._handle(message)
            except Exception as exc:
                self.transport.server.report_exception(exc, {"channel_message": message.get("type")})

    async def _handle(self, message: dict) -> None:
        kind = message.get("type")
        session_id = message.get("session_id")
        if kind == "mcp.cancel":
            cancellation = self.in_flight.get((session_id, message["request_key"]))
            if cancellation is not None:
                cancellation.cancel(message.get("reason"))
        elif kind == "mcp.response":
            self.pending.resolve(message["message"], session_id)
        elif kind == "mcp.deliver":
            stream = self.streams.get((session_id, message["stream"]))
            if stream is not None:
                stream.push(message["sequence"], message["message"], message.get("level", ""))
        elif kind == "mcp.broadcast":
            for (_session, name), stream in list(self.streams.items()):
                if name == GET_STREAM:
                    stream.push(message["sequence"], message["message"], message.get("level", ""))
            self.listens.offer(message["message"])
        elif kind == "mcp.listen":
            self.listens.offer(message["message"])
        elif kind == "mcp.close":
            self._close_locally(session_id)
        elif kind == "mcp.registry":
            overlay = self.transport.server.overlay
            if overlay is not None:
                overlay.invalidate()
        elif kind == "mcp.end":
            stream = self.streams.get((session_id, message["stream"]))
            if stream is not None:
                stream.close()
        elif kind == "mcp.call":
            queue = self.calls.get(message["call_id"])
            if queue is not None:
                queue.put_nowait(message["item"])

    def _close_locally(self, session_id: str) -> None:
        """End the session's streams here and stop its requests (they then send nothing)."""
        for key, stream in list(self.streams.items()):
            if key[0] == session_id:
                stream.close()
        for (owner, _key), cancellation in list(self.in_flight.items()):
            if owner == session_id:
                cancellation.cancel("session closed")

    def close_all(self, reason: str) -> None:
        """End every stream this process writes and stop its requests (the transport closes)."""
        for stream in list(self.streams.values()):
            stream.close()
        self.listens.end_all()
        for cancellation in list(self.in_flight.values()):
            cancellation.cancel(reason)

    # What a drain asks (drain.py) ---------------------------------------------------------------
    def end_streams(self, retry_ms: int) -> None:
        """End every listening stream here with an SSE retry hint: each client resumes elsewhere."""
        for stream in list(self.streams.values()):
            stream.end(retry_ms)
        self.listens.end_all(retry_ms)

    async def stop_requests(self) -> None:
        """The requests still in flight here get the error of a stopped process on their streams,
        as if it had died (a background call's worker answers its own)."""
        for session_id, key in list(self.in_flight):
            if session_id != "call":  # a background call this process runs for a worker
                await self.transport.answer_stopped(session_id, request_id_of(f"post:{key}"))

    async def close(self) -> None:
        await self.transport.close()

    # Liveness (see liveness.py) ----------------------------------------------------------------
    async def _heartbeat_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # Paced from the last beat's start, so a slow shared state does not stretch the rhythm.
            started = loop.time()
            await self._beat()
            await asyncio.sleep(max(0.0, started + self.transport.liveness.interval - loop.time()))

    async def _beat(self) -> None:
        try:
            await self.transport.liveness.beat(self.channel_key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.transport.server.report_exception(exc, {"housekeeping": "heartbeat"})

    # Housekeeping ----------------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        transport = self.transport
        last_reap = time.monotonic()
        while True:
            await asyncio.sleep(transport.activity_flush_interval)
            try:
                await transport.sessions.flush_activity()
                now = time.monotonic()
                if now - last_reap >= transport.reap_interval:
                    last_reap = now
                    await transport.reap()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                transport.server.report_exception(exc, {"housekeeping": "sessions"})

    async def _rejoin_forever(self) -> None:
        """Renew this process's group membership, and when the shared state has lost this
        process's marker (Redis lost its data), its claims (see :data:`GROUP_REJOIN_INTERVAL`)."""
        marker = f"process:{self.channel}"
        while True:
            await asyncio.sleep(GROUP_REJOIN_INTERVAL)
            try:
                await on_layer(self.layer.group_add(self.transport.group, self.channel))
                if await self.transport.state.add(marker, "1", MARKER_TTL):
                    await self.transport.reclaim(self)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("renewing the group membership and claims failed (%s: %s); retrying "
                               "in %g s", type(exc).__name__, exc, GROUP_REJOIN_INTERVAL)
