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
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.signals import setting_changed

from mcp_protocol import methods

from .claims import Claims
from .event_store import GET_STREAM, DatabaseEventStore, EventStore, RedisEventStore, broadcast_stream
from .limits import StreamSlots
from .listen_filter import LISTENABLE
from .liveness import Liveness
from .options import StreamableHTTPOptions
from .resource_subscriptions import SubscriptionStore
from .routing import Routing
from .runtime import Runtime, runtime_group
from .session_store import SessionStore
from .shared_state import LocalState, RedisState, SharedState

if TYPE_CHECKING:
    from django.http import HttpRequest

    from ..server import Server


class StreamableHTTPTransport(Claims, Routing):
    """Serve ``server`` over Streamable HTTP; ``transport.as_asgi()`` is the ASGI application.

    Its options (:class:`~.options.StreamableHTTPOptions`, ``transport.options``) keep the names
    of the Ruby SDK and of the ``MCP_SERVER`` settings: ``StreamableHTTPTransport(server,
    stateless=True)``, or ``options=StreamableHTTPOptions(...)``, each option not given at the
    default of its setting. Besides them: ``shared_state`` and ``event_store``, the stores (process
    memory and database rows by default; see ``site.build_stores`` for the Redis ones);
    ``group``, the channel-layer group of the processes serving this endpoint (default: named
    after the server, so servers sharing a channel layer never see each other's broadcasts);
    ``resource_server``, a :class:`mcp_server.auth.ResourceServer` that authenticates requests
    and answers with Bearer challenges (None: the Django session cookie's user, as
    ``session_auth`` puts it in the scope, and nothing required).
    """

    def __init__(
        self,
        server: Server,
        *,
        options: StreamableHTTPOptions | None = None,
        event_store: EventStore | None = None,
        shared_state: SharedState | None = None,
        group: str | None = None,
        resource_server: Any = None,
        **option_values: Any,
    ):
        self.options = options = (options or StreamableHTTPOptions()).replace(**option_values)
        self.server = server
        self.group = runtime_group(server.name, group)
        # Where this server's broadcasts are stored for listening streams that resume: apart from
        # those of any other server sharing the store.
        self.broadcast_stream = broadcast_stream(self.group)
        self.state = shared_state or LocalState()
        self.events = event_store or DatabaseEventStore()
        # The built-in Redis stores on one connection and prefix: an event's store can read who
        # holds its stream in the same round trip (store_event).
        self._events_read_the_state = (
            isinstance(self.state, RedisState) and isinstance(self.events, RedisEventStore)
            and self.state.clients is self.events.clients and self.state.prefix == self.events.prefix)
        self.sessions = SessionStore(self.state, options.session_idle_timeout, self.group)
        self.liveness = Liveness(self.state, options.process_heartbeat_interval)
        # Authentication and the OAuth resource server's policy (mcp_server.auth.ResourceServer);
        # None: the Django session cookie's user alone, and nothing required.
        self.resource_server = resource_server
        self._challenges: Any = resource_server
        self.subscriptions = SubscriptionStore(options.max_subscriptions_per_session, self.group)
        self.stream_slots = StreamSlots(self.state, options.max_streams_per_session, self.stream_claim_ttl)
        # The 2026-07-28 listen streams of each principal, held the same way (renewed every
        # keepalive_interval by their process, so they lapse with it).
        self.listen_slots = StreamSlots(self.state, options.max_listen_subscriptions_per_principal,
                                        self.stream_claim_ttl, prefix="listen-slot")
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
        """The hosts in force: the option's, else Django's ``ALLOWED_HOSTS``."""
        hosts = self.options.allowed_hosts
        return hosts if hosts is not None else _django_allowed_hosts()

    @property
    def activity_flush_interval(self) -> float:
        idle = self.options.session_idle_timeout
        return 10.0 if idle is None else max(0.5, min(10.0, idle / 4))

    @property
    def reap_interval(self) -> float:
        idle = self.options.session_idle_timeout
        return 60.0 if idle is None else max(1.0, min(60.0, idle / 2))

    @property
    def stream_claim_ttl(self) -> float:
        """How long a stream's claim outlives a process that died without releasing it."""
        return 2 * self.options.keepalive_interval + 5

    def as_asgi(self) -> Any:
        from .consumer import StreamableHTTPConsumer

        return StreamableHTTPConsumer.as_asgi(transport=self)

    async def handle_request(self, request: HttpRequest) -> tuple[int, list[tuple[str, str]], bytes]:
        """Serve one request of a Django view: ``(status, headers, body)``, the response gathered
        whole (see ``django_view``); ``as_asgi()`` is the mounted style."""
        from .django_view import handle_request

        return await handle_request(self, request)

    # The process-local part -------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        return self._runtimes[asyncio.get_running_loop()]

    def current_runtime(self) -> Runtime | None:
        """This event loop's runtime; None before a request here started it (or after close())."""
        return self._runtimes.get(asyncio.get_running_loop())

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
        if self.options.stateless and message.get("method") not in LISTENABLE:
            return False

        async def send() -> bool:
            if self.options.stateless:
                return await self.tell_listen_streams(message)
            return await self.broadcast_async(message, level)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return async_to_sync(send)()
        self.spawn(loop, send())
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
        self.spawn(loop, self.notify_resource_updated_async(uri))
        return True

    def spawn(self, loop: asyncio.AbstractEventLoop, coroutine: Any) -> None:
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
        if self.options.stateless:
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
        await self.events.purge(datetime.timedelta(seconds=self.options.event_retention))
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


# Django's ALLOWED_HOSTS, looked up once and again when the setting changes (override_settings):
# reading it goes through the lazy settings' __getattribute__, on every request. The list itself
# is kept, not a copy, so that one edited in place is seen as before.
_allowed_hosts: list[str] | None = None


def _django_allowed_hosts() -> list[str]:
    global _allowed_hosts
    hosts = _allowed_hosts
    if hosts is None:
        hosts = _allowed_hosts = settings.ALLOWED_HOSTS
    return hosts


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    global _allowed_hosts
    if setting == "ALLOWED_HOSTS":
        _allowed_hosts = None


setting_changed.connect(_on_setting_changed)
