"""``StreamableHTTPTransport``: the MCP endpoint as an ASGI application on Channels.

Mount it at the ASGI layer (``project/asgi.py``) so ``/mcp`` never goes through Django's request
handler or middleware. Every process of a deployment can serve every request of every session:
sessions and subscriptions are rows, SSE events are stored before they are sent, and what one
process must tell another travels on the channel layer (see :mod:`.runtime`).
"""

from __future__ import annotations

import asyncio
import datetime
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_protocol import methods

from .claims import Claims
from .event_store import GET_STREAM, DatabaseEventStore, EventStore, RedisEventStore, broadcast_stream
from .limits import StreamSlots, check_limits
from .listen_filter import LISTENABLE
from .liveness import Liveness
from .resource_subscriptions import SubscriptionStore
from .routing import Routing
from .runtime import Runtime, runtime_group
from .session_store import SessionStore
from .shared_state import LocalState, RedisState, SharedState

if TYPE_CHECKING:
    from ..server import Server

MIB = 1024 * 1024


class StreamableHTTPTransport(Claims, Routing):
    """Serve ``server`` over Streamable HTTP; ``transport.as_asgi()`` is the ASGI application.

    Options keep the names of the Ruby SDK: ``stateless``, ``enable_json_response``,
    ``allowed_hosts`` (default: Django's ``ALLOWED_HOSTS``), ``allowed_origins``,
    ``dns_rebinding_protection``, ``session_idle_timeout`` (seconds, None: never),
    ``max_sessions`` (None: unlimited), ``session_request_validator(request, session_id)``,
    ``max_request_bytes``, ``max_json_depth``, ``max_json_containers``,
    ``server_to_client_request_timeout``; the fair-share limits ``max_sessions_per_principal``,
    ``max_streams_per_session``, ``max_subscriptions_per_session``, ``max_sse_buffer_bytes`` and
    ``max_progress_token_length`` (each None: unlimited); ``sse_stall_timeout``: seconds a write
    waits for a client that reads nothing before it is cut off; ``max_queued_stream_events``:
    events waiting to be written on one listening stream before it ends (the client resumes);
    ``group``: the channel-layer group of the processes serving this
    endpoint (default: named after the server, so servers sharing a channel layer never see each
    other's broadcasts).
    ``process_heartbeat_interval``: seconds between a process's heartbeats; what a process holds
    (streams, requests, waits for answers) is let go once it missed them (see :mod:`.liveness`).
    ``max_listen_subscriptions``: ``subscriptions/listen`` streams one process serves at once (503
    past it; None: unlimited); ``listen_keepalive_interval``: seconds between keepalive comments
    on them (None: none, when a proxy keeps the stream alive). See :mod:`.listen_streams`.
    ``resource_server``: a :class:`mcp_server.auth.ResourceServer` that authenticates requests and
    answers with Bearer challenges (None: the Django session cookie's user, as ``session_auth``
    puts it in the scope, and nothing required).
    """

    def __init__(
        self,
        server: Server,
        *,
        stateless: bool = False,
        enable_json_response: bool = False,
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        dns_rebinding_protection: bool = True,
        session_idle_timeout: float | None = 1800,
        max_sessions: int | None = 10_000,
        session_request_validator: Callable[..., Any] | None = None,
        max_request_bytes: int = 4 * MIB,
        max_json_depth: int = 64,
        max_json_containers: int = 100_000,
        server_to_client_request_timeout: float | None = 600,
        keepalive_interval: float = 30,
        event_retention: float = 3600,
        process_heartbeat_interval: float = 5,
        event_store: EventStore | None = None,
        shared_state: SharedState | None = None,
        max_sessions_per_principal: int | None = 100,
        max_streams_per_session: int | None = 10,
        max_subscriptions_per_session: int | None = 1000,
        max_sse_buffer_bytes: int | None = 4 * MIB,
        sse_stall_timeout: float = 10.0,
        max_queued_stream_events: int = 1000,
        max_progress_token_length: int | None = 256,
        group: str | None = None,
        max_listen_subscriptions: int | None = 1000,
        listen_keepalive_interval: float | None = 15,
        resource_server: Any = None,
    ):
        for name, value in (("max_request_bytes", max_request_bytes), ("max_json_depth", max_json_depth),
                            ("max_json_containers", max_json_containers),
                            ("max_queued_stream_events", max_queued_stream_events)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name, seconds in (("process_heartbeat_interval", process_heartbeat_interval),
                              ("sse_stall_timeout", sse_stall_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < 1e9:
                raise ValueError(f"{name} must be a positive number of seconds, not {seconds!r}")
        _check_listen_options(max_listen_subscriptions, listen_keepalive_interval)
        check_limits(max_sessions_per_principal=max_sessions_per_principal,
                     max_streams_per_session=max_streams_per_session,
                     max_subscriptions_per_session=max_subscriptions_per_session,
                     max_sse_buffer_bytes=max_sse_buffer_bytes,
                     max_progress_token_length=max_progress_token_length)
        self.server = server
        self.group = runtime_group(server.name, group)
        # Where this server's broadcasts are stored for listening streams that resume: apart from
        # those of any other server sharing the store.
        self.broadcast_stream = broadcast_stream(self.group)
        self.stateless = stateless
        self.enable_json_response = enable_json_response
        self._allowed_hosts = allowed_hosts
        self.allowed_origins = list(allowed_origins or [])
        self.dns_rebinding_protection = dns_rebinding_protection
        self.session_idle_timeout = session_idle_timeout
        self.max_sessions = max_sessions
        self.session_request_validator = session_request_validator
        self.max_request_bytes = max_request_bytes
        self.max_json_depth = max_json_depth
        self.max_json_containers = max_json_containers
        self.server_to_client_request_timeout = server_to_client_request_timeout
        self.keepalive_interval = keepalive_interval
        self.event_retention = event_retention
        self.state = shared_state or LocalState()
        self.events = event_store or DatabaseEventStore()
        # The built-in Redis stores on one connection and prefix: an event's store can read who
        # holds its stream in the same round trip (store_event).
        self._events_read_the_state = (
            isinstance(self.state, RedisState) and isinstance(self.events, RedisEventStore)
            and self.state.clients is self.events.clients and self.state.prefix == self.events.prefix)
        self.sessions = SessionStore(self.state, session_idle_timeout, self.group)
        self.liveness = Liveness(self.state, process_heartbeat_interval)
        self.max_sessions_per_principal = max_sessions_per_principal
        self.max_streams_per_session = max_streams_per_session
        self.max_subscriptions_per_session = max_subscriptions_per_session
        self.max_sse_buffer_bytes = max_sse_buffer_bytes
        self.sse_stall_timeout = sse_stall_timeout
        self.max_queued_stream_events = max_queued_stream_events
        self.max_progress_token_length = max_progress_token_length
        self.max_listen_subscriptions = max_listen_subscriptions
        self.listen_keepalive_interval = listen_keepalive_interval
        # Authentication and the OAuth resource server's policy (mcp_server.auth.ResourceServer);
        # None: the Django session cookie's user alone, and nothing required.
        self.resource_server = resource_server
        self._challenges: Any = resource_server
        self.subscriptions = SubscriptionStore(max_subscriptions_per_session, self.group)
        self.stream_slots = StreamSlots(self.state, max_streams_per_session, self.stream_claim_ttl)
        self._runtimes: dict[asyncio.AbstractEventLoop, Runtime] = {}
        self._background: set[asyncio.Task] = set()
        self._publish_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        server.add_transport(self)  # beside any other transport of the server, not instead

    @property
    def challenges(self) -> Any:
        """What builds this endpoint's Bearer challenges: its resource server, else one from the
        settings (a call refused for its scopes needs one even without authentication configured)."""
        if self._challenges is None:
            from ..auth.resource_server import ResourceServer

            self._challenges = ResourceServer.from_settings(always=True)
        return self._challenges

    @property
    def allowed_hosts(self) -> list[str]:
        return self._allowed_hosts if self._allowed_hosts is not None else list(settings.ALLOWED_HOSTS)

    @property
    def activity_flush_interval(self) -> float:
        idle = self.session_idle_timeout
        return 10.0 if idle is None else max(0.5, min(10.0, idle / 4))

    @property
    def reap_interval(self) -> float:
        idle = self.session_idle_timeout
        return 60.0 if idle is None else max(1.0, min(60.0, idle / 2))

    @property
    def stream_claim_ttl(self) -> float:
        """How long a stream's claim outlives a process that died without releasing it."""
        return 2 * self.keepalive_interval + 5

    def as_asgi(self) -> Any:
        from .consumer import StreamableHTTPConsumer

        return StreamableHTTPConsumer.as_asgi(transport=self)

    # The process-local part -------------------------------------------------------------------
    @property
    def process_heartbeat_interval(self) -> float:
        return self.liveness.interval

    @property
    def runtime(self) -> Runtime:
        return self._runtimes[asyncio.get_running_loop()]

    async def ensure_runtime(self) -> Runtime:
        loop = asyncio.get_running_loop()
        runtime = self._runtimes.get(loop)
        if runtime is None:
            runtime = self._runtimes[loop] = Runtime(self)
            try:
                await runtime.start()
            except BaseException:
                # Not half started (say, Redis not answering): the next request starts it again.
                self._runtimes.pop(loop, None)
                await runtime.stop()
                raise
        return runtime

    # Server-wide notifications (``server.notify_*``) --------------------------------------------
    @property
    def broadcast_group(self) -> str | None:
        """Transports of one server with the same group on a channel layer reach the same listening
        streams (each process's runtimes all join it): the server notifies through one of them."""
        return self.group if get_channel_layer() is not None else None

    def broadcast(self, message: dict, *, level: str | None = None) -> bool:
        """Send to every session's listening stream, in every process; callable from anywhere.

        A stateless transport has no session and so no listening stream: nothing is stored, and
        only its ``subscriptions/listen`` streams hear of what they can carry (False otherwise).
        """
        if self.stateless and message.get("method") not in LISTENABLE:
            return False

        async def send() -> bool:
            if self.stateless:
                return await self.tell_listen_streams(message)
            return await self.broadcast_async(message, level)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return async_to_sync(send)()
        self._spawn(loop, send())
        return True

    async def broadcast_async(self, message: dict, level: str | None = None) -> bool:
        async with self._publishing():
            sequence = await self.events.append(None, self.broadcast_stream, message, level or "")
            await self.tell_every_process({"type": "mcp.broadcast", "sequence": sequence,
                                            "message": message, "level": level or ""})
        return True

    async def tell_listen_streams(self, message: dict) -> bool:
        """Offer a notification to the ``subscriptions/listen`` streams of every process (each
        delivers it where its filter says so); nothing is stored."""
        await self.tell_every_process({"type": "mcp.listen", "message": message})
        return True

    def notify_resource_updated(self, uri: str) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return async_to_sync(self.notify_resource_updated_async)(uri)
        self._spawn(loop, self.notify_resource_updated_async(uri))
        return True

    def _spawn(self, loop: asyncio.AbstractEventLoop, coroutine: Any) -> None:
        """Run in the background, kept referenced until done; failures are reported."""
        task = loop.create_task(coroutine)
        self._background.add(task)

        def finished(done: asyncio.Task) -> None:
            self._background.discard(done)
            if not done.cancelled() and done.exception() is not None:
                self.server.report_exception(done.exception(), {"notification": "broadcast"})

        task.add_done_callback(finished)

    async def notify_resource_updated_async(self, uri: str) -> bool:
        """``notifications/resources/updated`` to every session subscribed to ``uri``."""
        from mcp_protocol import jsonrpc

        message = jsonrpc.notification(methods.NOTIFICATIONS_RESOURCES_UPDATED, {"uri": uri})
        await self.tell_listen_streams(message)
        if self.stateless:
            return True  # no session, so no session subscribed
        for session_id in await self.subscriptions.sessions_for(uri):
            await self.deliver(session_id, GET_STREAM, message)
        return True

    # Housekeeping ----------------------------------------------------------------------------
    async def reap(self) -> list[str]:
        """Remove idle sessions (and old events); their streams end in every process."""
        expired = await self.sessions.reap()
        for session_id in expired:
            await self.close_session(session_id)
        await self.events.purge(datetime.timedelta(seconds=self.event_retention))
        return expired

    async def close(self, timeout: float = 5.0) -> None:
        """Close this process's part (tests, shutdown hooks): its open streams end, its in-flight
        requests are cancelled (so they send nothing), then its background work (the reaper)
        stops. Sessions stay: they are rows, which any other process goes on serving."""
        loop = asyncio.get_running_loop()
        runtime = self._runtimes.get(loop)
        if runtime is None:
            return
        runtime.close_all("server closing")
        # Wait (bounded) for them to finish: they still use the runtime to release their claims.
        deadline = loop.time() + timeout
        while (runtime.streams or runtime.in_flight or runtime.listens) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        self._runtimes.pop(loop, None)
        await runtime.stop()


def _check_listen_options(max_listen_subscriptions: int | None, keepalive: float | None) -> None:
    limit = max_listen_subscriptions
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ValueError(f"max_listen_subscriptions must be a positive integer or None, not {limit!r}")
    if keepalive is not None and (isinstance(keepalive, bool) or not isinstance(keepalive, int | float)
                                  or not 0 < keepalive < 1e9):
        raise ValueError(f"listen_keepalive_interval must be a positive number of seconds or None, "
                         f"not {keepalive!r}")
