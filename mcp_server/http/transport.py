"""``StreamableHTTPTransport``: the MCP endpoint as an ASGI application on Channels.

Mount it at the ASGI layer (``project/asgi.py``) so ``/mcp`` never goes through Django's request
handler or middleware. Every process of a deployment can serve every request of every session:
sessions and subscriptions are rows, SSE events are stored before they are sent, and what one
process must tell another travels on the channel layer (see :mod:`.runtime`).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from mcp_protocol import methods

from ..outgoing import is_request_id_we_sent
from .event_store import (
    GET_STREAM,
    DatabaseEventStore,
    EventStore,
    RedisEventStore,
    broadcast_stream,
    post_stream,
)
from .limits import StreamSlots, check_limits
from .listen_filter import LISTENABLE
from .liveness import Liveness, holder_channel, request_stopped
from .redis_client import Backoff, RedisUnavailable
from .runtime import Runtime, on_layer, runtime_group
from .session import request_key
from .session_store import SessionStore
from .shared_state import LocalState, RedisState, SharedState
from .subscriptions import SubscriptionStore

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("mcp_server.http")

MIB = 1024 * 1024
# How long a session's count of claims outlives its last claim (a day): past that, it reads 0.
HELD_TTL = 24 * 3600.0
# Attempts at releasing a request's claim that Redis did not take when the request ended (about
# ten minutes of retries, each delay doubling up to 30 s).
RELEASE_ATTEMPTS = 25


class StreamableHTTPTransport:
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
        self.subscriptions = SubscriptionStore(max_subscriptions_per_session, self.group)
        self.stream_slots = StreamSlots(self.state, max_streams_per_session, self.stream_claim_ttl)
        self._runtimes: dict[asyncio.AbstractEventLoop, Runtime] = {}
        self._background: set[asyncio.Task] = set()
        self._publish_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        server.add_transport(self)  # beside any other transport of the server, not instead

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

    # Routing between processes ---------------------------------------------------------------
    def _stream_key(self, session_id: str, stream: str) -> str:
        return f"stream:{session_id}:{stream}"

    # Every claim (an open stream, a request in flight) is counted per session, so that ending a
    # session that holds nothing anywhere (the usual DELETE) needs no message to every process.
    @staticmethod
    def _held_key(session_id: str) -> str:
        return f"held:{session_id}"

    async def _claim(self, session_id: str, key: str, value: str, ttl: float,
                     on_dead: Callable[[], Any] | None = None) -> bool:
        """Claim ``key`` for this process; a claim of a dead process is taken over first."""
        held = self._held_key(session_id)
        if await self.state.add_counted(key, value, ttl, held, max(ttl, HELD_TTL)):
            return True
        if not await self._release_dead_claim(session_id, key, on_dead):
            return False
        return await self.state.add_counted(key, value, ttl, held, max(ttl, HELD_TTL))

    async def _release_dead_claim(self, session_id: str, key: str,
                                  on_dead: Callable[[], Any] | None = None) -> bool:
        """When a dead process holds ``key``: run ``on_dead`` and remove the claim, in exactly one
        process (True there). False when the holder lives, or another process is taking over."""
        claim = await self.liveness.dead_claim(key, self.runtime.channel_key)
        if claim is None or not await self.liveness.take_over(key, claim):
            return False
        if on_dead is not None:
            await on_dead()
        await self.state.delete_counted(key, self._held_key(session_id), expected=claim)
        return True

    async def claim_stream(self, session_id: str, stream: str, token: str) -> bool:
        value = f"{self.runtime.channel_key}|{token}"
        return await self._claim(session_id, self._stream_key(session_id, stream), value,
                                 self.stream_claim_ttl)

    async def renew_stream(self, session_id: str, stream: str, token: str) -> bool:
        """Extend this stream's claim; False when another process took it over (this process
        was taken for dead: it missed its heartbeats), and this stream must end."""
        key, held = self._stream_key(session_id, stream), self._held_key(session_id)
        value = f"{self.runtime.channel_key}|{token}"
        current = await self.state.touch(key, self.stream_claim_ttl)
        if current is not None and current != value:
            return False
        # A claim that is gone (it lapsed, or Redis lost its data: a flush, a failover to an empty
        # replica) is still ours unless claimed since: made again, and counted, as reclaim() does.
        if current is None and not await self.state.add_counted(key, value, self.stream_claim_ttl,
                                                                held, HELD_TTL):
            return await self.state.get(key) == value  # reclaim() made it meanwhile
        await self.state.touch(held, HELD_TTL)  # a stream may outlive a day
        return True

    async def release_stream(self, session_id: str, stream: str, token: str) -> None:
        value = f"{self.runtime.channel_key}|{token}"
        await self.state.delete_counted(self._stream_key(session_id, stream), self._held_key(session_id),
                                        expected=value)

    def _publishing(self) -> asyncio.Lock:
        """Held while an event is stored and sent, one event at a time per event loop.

        ``server.notify_*`` sends each event from a task of its own and stores it on a worker
        thread; without this, events emitted one after the other could be numbered, or reach a
        stream, in another order (a log message at each level arriving shuffled, and a client
        resuming after the last id it saw getting the ones it had again).
        """
        loop = asyncio.get_running_loop()
        lock = self._publish_locks.get(loop)
        if lock is None:
            lock = self._publish_locks[loop] = asyncio.Lock()
        return lock

    async def deliver(self, session_id: str, stream: str, message: dict, level: str = "") -> bool:
        """Store an event of one of a session's streams, then hand it to whoever holds it.

        True when a process held the stream; the event is stored either way and reaches the
        client when it resumes the stream.
        """
        runtime = await self.ensure_runtime()
        async with self._publishing():
            sequence, holder = await self.store_event(session_id, stream, message, level)
            if sequence is None:
                return False  # the session is gone
            return await self.send_event_to(holder, session_id, stream, sequence, message, level,
                                            runtime)

    async def store_event(self, session_id: str, stream: str, message: dict,
                          level: str = "") -> tuple[int | None, str | None]:
        """Store an event of a session's stream: its sequence (None: the session is gone) and
        who holds the stream once it is stored (None: nobody), read in the same round trip when
        the event store shares the shared state's Redis (the built-in stores, as configured)."""
        key = self._stream_key(session_id, stream)
        if self._events_read_the_state:
            return await self.events.append_watched(session_id, stream, message, key, level)
        sequence = await self.events.append(session_id, stream, message, level)
        if sequence is None:
            return None, None
        return sequence, await self.state.get(key)

    async def hand_over(self, session_id: str, stream: str, sequence: int, message: dict,
                        level: str = "", runtime: Runtime | None = None) -> bool:
        """Hand a stored event to whoever holds its stream now; False when nobody does."""
        holder = await self.state.get(self._stream_key(session_id, stream))
        return await self.send_event_to(holder, session_id, stream, sequence, message, level, runtime)

    async def send_event_to(self, holder: str | None, session_id: str, stream: str, sequence: int,
                            message: dict, level: str = "", runtime: Runtime | None = None) -> bool:
        if holder is None:
            return False
        await (runtime or self.runtime).send_to(holder.split("|", 1)[0], {
            "type": "mcp.deliver", "session_id": session_id, "stream": stream,
            "sequence": sequence, "message": message, "level": level,
        })
        return True

    @staticmethod
    def _request_key(session_id: str, request_id: Any) -> str:
        return f"req:{session_id}:{request_key(request_id)}"

    @property
    def request_claim_ttl(self) -> float:
        return (self.server_to_client_request_timeout or 600) * 2 + 3600

    async def claim_request(self, session_id: str, request_id: Any) -> bool:
        """False while the id is in flight in a live process; the request of a dead one gets its
        error first (:meth:`settle_orphaned_request`), then the id is claimed again."""
        return await self._claim(session_id, self._request_key(session_id, request_id),
                                 self.runtime.channel_key, self.request_claim_ttl,
                                 lambda: self._answer_stopped(session_id, request_id))

    async def reclaim(self, runtime: Runtime) -> None:
        """Claim again what ``runtime``'s process holds, where the claim is gone (Redis lost its
        data: a flush, a failover to an empty replica), so that deliveries, cancels and a DELETE
        reach its streams and requests again. A claim still there is left as it is."""
        for (session_id, stream), listener in list(runtime.streams.items()):
            await self.state.add_counted(self._stream_key(session_id, stream),
                                         f"{runtime.channel_key}|{listener.token}", self.stream_claim_ttl,
                                         self._held_key(session_id), HELD_TTL)
        ttl = self.request_claim_ttl
        for session_id, key in list(runtime.in_flight):
            # Checked at the last moment: a request that ended meanwhile has released its claim.
            if (session_id, key) in runtime.in_flight:
                await self.state.add_counted(f"req:{session_id}:{key}", runtime.channel_key, ttl,
                                             self._held_key(session_id), max(ttl, HELD_TTL))

    async def take_request(self, session_id: str, request_id: Any) -> None:
        """This process (a background call's worker) holds the request from now on: cancels and
        the checks of whether its server lives come here. Also renews a hold that is this one's."""
        key, value = self._request_key(session_id, request_id), self.runtime.channel_key
        ttl = self.request_claim_ttl
        if not await self.state.add_counted(key, value, ttl, self._held_key(session_id), max(ttl, HELD_TTL)):
            await self.state.set(key, value, ttl)

    async def release_request(self, session_id: str, request_id: Any) -> None:
        # Only this process's claim: a process thought dead may find its id claimed anew. (A
        # request that ends while the transport closes has no runtime left to name it.)
        loop = asyncio.get_running_loop()
        runtime = self._runtimes.get(loop)
        key, held = self._request_key(session_id, request_id), self._held_key(session_id)
        expected = runtime.channel_key if runtime is not None else None
        try:
            await self.state.delete_counted(key, held, expected=expected)
        except RedisUnavailable as exc:
            # The request is over; its id must not stay taken (409) for the claim's whole life
            # because Redis did not answer just now: released in the background once it does.
            logger.warning("releasing %s failed (%s); retrying in the background", key, exc)
            self._spawn(loop, self._release_later(key, held, expected))

    async def _release_later(self, key: str, held: str, expected: str | None) -> None:
        backoff = Backoff(base=0.5, cap=30.0)
        for _attempt in range(RELEASE_ATTEMPTS):
            await asyncio.sleep(backoff.next_delay())
            try:
                await self.state.delete_counted(key, held, expected=expected)
                return
            except RedisUnavailable:
                continue
        # Past this, the claim lapses at the end of its time to live.

    async def request_in_flight(self, session_id: str, request_id: Any) -> bool:
        """Whether some process holds the request (alive or not yet known dead)."""
        return await self.state.get(self._request_key(session_id, request_id)) is not None

    async def request_served_alive(self, session_id: str, request_id: Any) -> bool:
        """Whether a live process serves the request now."""
        claim = await self.state.get(self._request_key(session_id, request_id))
        return claim is not None and not await self.liveness.holds_dead(claim, self.runtime.channel_key)

    async def settle_orphaned_request(self, session_id: str, request_id: Any) -> bool:
        """If the process serving the request died, store its error response as the last event of
        its stream (reaching whoever resumes it) and free the id: True in the one process that
        did it."""
        return await self._release_dead_claim(session_id, self._request_key(session_id, request_id),
                                              lambda: self._answer_stopped(session_id, request_id))

    async def _answer_stopped(self, session_id: str, request_id: Any) -> None:
        if not await self._background_call_stopped(session_id, request_id):
            return
        await self.deliver(session_id, post_stream(request_id), request_stopped(request_id))

    async def _background_call_stopped(self, session_id: str, request_id: Any) -> bool:
        """Whether a request whose holder died gets its error: unless it is a background call
        that a live worker has started meanwhile (the worker answers it), or one queued again
        (an idempotent tool's, see background/recovery.py). Otherwise its record ends failed."""
        from ..background import records
        from ..background.recovery import run_again

        call = await records.of_request(session_id, request_key(request_id))
        if call is None or call.finished:
            return call is None
        if call.state == records.State.RUNNING:
            if not await self.liveness.holds_dead(call.runner, self.runtime.channel_key):
                return False
            if await run_again(self, call):
                return False
        return await records.finish(call.id, records.State.FAILED, error="its process stopped")

    async def request_cancelled(self, session_id: str, request_id: Any) -> bool:
        """Whether the request was a background call that ended cancelled (and so has no response)."""
        from ..background import records

        call = await records.of_request(session_id, request_key(request_id))
        return call is not None and call.state == records.State.CANCELLED

    async def end_stream(self, session_id: str, stream: str) -> None:
        """End a session's stream wherever it is held, with no further event."""
        holder = await self.state.get(self._stream_key(session_id, stream))
        await self.send_to_process(holder and holder_channel(holder), {
            "type": "mcp.end", "session_id": session_id, "stream": stream})

    async def route_cancel(self, session_id: str, request_id: Any, reason: str | None) -> None:
        key = request_key(request_id)
        holder = await self.state.get(f"req:{session_id}:{key}")
        await self.runtime.send_to(holder and holder_channel(holder), {
            "type": "mcp.cancel", "session_id": session_id, "request_key": key, "reason": reason,
        })
        # A background call's flag too: its worker may not have started yet.
        from ..background.launch import cancel_call_of_request

        await cancel_call_of_request(self, session_id, key)

    async def let_go_of_request(self, session_id: str, request_id: Any) -> None:
        """Free a request's id whoever holds it (a background call cancelled before it ran)."""
        await self.state.delete_counted(self._request_key(session_id, request_id),
                                        self._held_key(session_id))

    async def send_to_process(self, channel: str | None, message: dict) -> None:
        """To the process owning ``channel``: through this process's runtime, or straight on the
        channel layer where none runs (a management command)."""
        runtime = self._runtimes.get(asyncio.get_running_loop())
        if runtime is not None:
            await runtime.send_to(channel, message)
            return
        layer = get_channel_layer()
        if layer is not None and channel:
            await on_layer(layer.send(channel, message))

    async def expect_answer(self, session_id: str, request_id: str, related_request_id: Any = None) -> None:
        """Record that this process waits for the client's answer to ``request_id``, sent while
        serving ``related_request_id`` (which gets an error if this process dies meanwhile)."""
        ttl = (self.server_to_client_request_timeout or 86400) + 60
        value = self.runtime.channel_key
        if related_request_id is not None:
            value += "|" + json.dumps(related_request_id)
        await self.state.set(f"s2c:{session_id}:{request_id}", value, ttl)

    async def route_response(self, session_id: str, message: dict) -> None:
        """A client's answer, to the process waiting for it (only within the same session).

        When that process died, the request it was serving gets its error instead. When nothing
        says who waits (the shared state lost its data, say), every process is asked: the one
        waiting for that id takes it, instead of its request running into its timeout.
        """
        response_id = message.get("id")
        if not isinstance(response_id, str):
            return
        key = f"s2c:{session_id}:{response_id}"
        claim = await self.state.get(key)
        if claim is None:
            if is_request_id_we_sent(response_id):
                await self.tell_every_process({"type": "mcp.response", "session_id": session_id,
                                                "message": message})
            return
        if await self.liveness.holds_dead(claim, self.runtime.channel_key):
            await self.state.delete(key, expected=claim)
            _channel, _, related = claim.partition("|")
            if related:
                await self.settle_orphaned_request(session_id, json.loads(related))
            return
        await self.runtime.send_to(holder_channel(claim), {
            "type": "mcp.response", "session_id": session_id, "message": message})

    async def close_session(self, session_id: str) -> None:
        """End the session's streams and requests in every process, and drop its stored events.

        A session with no claim (no stream open, no request in flight) anywhere has nothing to
        end: no process is told (a message to every process costs more than the rest of a DELETE).
        A process that died holding a claim leaves the count above zero: the message goes then.
        """
        if await self.state.count(self._held_key(session_id)) > 0:
            await self.tell_every_process({"type": "mcp.close", "session_id": session_id})
        await self.state.delete(self._held_key(session_id))
        forget = getattr(self.events, "forget", None)  # an EventStore written before forget()
        if forget is not None:
            await forget(session_id)

    async def tell_every_process(self, message: dict) -> None:
        """Through the channel layer's group of processes; works where no runtime runs too
        (a management command, a Celery task)."""
        layer = get_channel_layer()
        if layer is not None:
            await on_layer(layer.group_send(self.group, message))
            return
        runtime = self._runtimes.get(asyncio.get_running_loop())
        if runtime is not None:
            await runtime.send_to_all(message)

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
