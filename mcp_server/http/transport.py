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

from .event_store import BROADCAST_STREAM, GET_STREAM, DatabaseEventStore, EventStore
from .runtime import Runtime, runtime_group
from .session import request_key
from .session_store import SessionStore
from .shared_state import LocalState, SharedState
from .subscriptions import SubscriptionStore

if TYPE_CHECKING:
    from ..server import Server

MIB = 1024 * 1024
# How long a session's count of claims outlives its last claim (a day): past that, it reads 0.
HELD_TTL = 24 * 3600.0


class StreamableHTTPTransport:
    """Serve ``server`` over Streamable HTTP; ``transport.as_asgi()`` is the ASGI application.

    Options keep the names of the Ruby SDK: ``stateless``, ``enable_json_response``,
    ``allowed_hosts`` (default: Django's ``ALLOWED_HOSTS``), ``allowed_origins``,
    ``dns_rebinding_protection``, ``session_idle_timeout`` (seconds, None: never),
    ``max_sessions`` (None: unlimited), ``session_request_validator(request, session_id)``,
    ``max_request_bytes``, ``max_json_depth``, ``server_to_client_request_timeout``, and ``group``:
    the channel-layer group of the processes serving this endpoint (default: named after the
    server, so servers sharing a channel layer never see each other's broadcasts).
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
        server_to_client_request_timeout: float | None = 600,
        keepalive_interval: float = 30,
        event_retention: float = 3600,
        event_store: EventStore | None = None,
        shared_state: SharedState | None = None,
        group: str | None = None,
    ):
        for name, value in (("max_request_bytes", max_request_bytes), ("max_json_depth", max_json_depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self.server = server
        self.group = runtime_group(server.name, group)
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
        self.server_to_client_request_timeout = server_to_client_request_timeout
        self.keepalive_interval = keepalive_interval
        self.event_retention = event_retention
        self.state = shared_state or LocalState()
        self.events = event_store or DatabaseEventStore()
        self.sessions = SessionStore(self.state, session_idle_timeout)
        self.subscriptions = SubscriptionStore()
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
    def runtime(self) -> Runtime:
        return self._runtimes[asyncio.get_running_loop()]

    async def ensure_runtime(self) -> Runtime:
        loop = asyncio.get_running_loop()
        runtime = self._runtimes.get(loop)
        if runtime is None:
            runtime = self._runtimes[loop] = Runtime(self)
            await runtime.start()
        return runtime

    # Routing between processes ---------------------------------------------------------------
    def _stream_key(self, session_id: str, stream: str) -> str:
        return f"stream:{session_id}:{stream}"

    # Every claim (an open stream, a request in flight) is counted per session, so that ending a
    # session that holds nothing anywhere (the usual DELETE) needs no message to every process.
    @staticmethod
    def _held_key(session_id: str) -> str:
        return f"held:{session_id}"

    async def claim_stream(self, session_id: str, stream: str, token: str) -> bool:
        value = f"{self.runtime.channel_key}|{token}"
        return await self.state.add_counted(self._stream_key(session_id, stream), value,
                                            self.stream_claim_ttl, self._held_key(session_id), HELD_TTL)

    async def renew_stream(self, session_id: str, stream: str, token: str) -> None:
        value = f"{self.runtime.channel_key}|{token}"
        await self.state.set(self._stream_key(session_id, stream), value, self.stream_claim_ttl)
        await self.state.touch(self._held_key(session_id), HELD_TTL)  # a stream may outlive a day

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
            sequence = await self.events.append(session_id, stream, message, level)
            if sequence is None:
                return False  # the session is gone
            return await self.hand_over(session_id, stream, sequence, message, level, runtime)

    async def hand_over(self, session_id: str, stream: str, sequence: int, message: dict,
                        level: str = "", runtime: Runtime | None = None) -> bool:
        runtime = runtime or self.runtime
        holder = await self.state.get(self._stream_key(session_id, stream))
        if holder is None:
            return False
        await runtime.send_to(holder.split("|", 1)[0], {
            "type": "mcp.deliver", "session_id": session_id, "stream": stream,
            "sequence": sequence, "message": message, "level": level,
        })
        return True

    async def claim_request(self, session_id: str, request_id: Any) -> bool:
        ttl = (self.server_to_client_request_timeout or 600) * 2 + 3600
        key = f"req:{session_id}:{request_key(request_id)}"
        return await self.state.add_counted(key, self.runtime.channel_key, ttl, self._held_key(session_id),
                                            max(ttl, HELD_TTL))

    async def release_request(self, session_id: str, request_id: Any) -> None:
        await self.state.delete_counted(f"req:{session_id}:{request_key(request_id)}",
                                        self._held_key(session_id))

    async def route_cancel(self, session_id: str, request_id: Any, reason: str | None) -> None:
        key = request_key(request_id)
        holder = await self.state.get(f"req:{session_id}:{key}")
        await self.runtime.send_to(holder, {
            "type": "mcp.cancel", "session_id": session_id, "request_key": key, "reason": reason,
        })

    async def expect_answer(self, session_id: str, request_id: str) -> None:
        ttl = (self.server_to_client_request_timeout or 86400) + 60
        await self.state.set(f"s2c:{session_id}:{request_id}", self.runtime.channel_key, ttl)

    async def route_response(self, session_id: str, message: dict) -> None:
        """A client's answer, to the process waiting for it (only within the same session)."""
        response_id = message.get("id")
        if not isinstance(response_id, str):
            return
        holder = await self.state.get(f"s2c:{session_id}:{response_id}")
        await self.runtime.send_to(holder, {"type": "mcp.response", "session_id": session_id,
                                            "message": message})

    async def close_session(self, session_id: str) -> None:
        """End the session's streams and requests in every process, and drop its stored events.

        A session with no claim (no stream open, no request in flight) anywhere has nothing to
        end: no process is told (a message to every process costs more than the rest of a DELETE).
        A process that died holding a claim leaves the count above zero: the message goes then.
        """
        if await self.state.count(self._held_key(session_id)) > 0:
            await self._tell_every_process({"type": "mcp.close", "session_id": session_id})
        await self.state.delete(self._held_key(session_id))
        forget = getattr(self.events, "forget", None)  # an EventStore written before forget()
        if forget is not None:
            await forget(session_id)

    async def _tell_every_process(self, message: dict) -> None:
        """Through the channel layer's group of processes; works where no runtime runs too
        (a management command, a Celery task)."""
        layer = get_channel_layer()
        if layer is not None:
            await layer.group_send(self.group, message)
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
        """Send to every session's listening stream, in every process; callable from anywhere."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return async_to_sync(self.broadcast_async)(message, level)
        self._spawn(loop, self.broadcast_async(message, level))
        return True

    async def broadcast_async(self, message: dict, level: str | None = None) -> bool:
        async with self._publishing():
            sequence = await self.events.append(None, BROADCAST_STREAM, message, level or "")
            await self._tell_every_process({"type": "mcp.broadcast", "sequence": sequence,
                                            "message": message, "level": level or ""})
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
        while (runtime.streams or runtime.in_flight) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        self._runtimes.pop(loop, None)
        await runtime.stop()
