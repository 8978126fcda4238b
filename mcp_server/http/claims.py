"""Claims in the shared state: which process holds a session's stream or serves a request.

Each claim names the channel of the process holding it (``stream:<session>:<stream>`` with a
token, ``req:<session>:<request>``) and is counted per session (``held:<session>``). A claim whose
holder died (``liveness.py``) is taken over by exactly one process, which cleans up after it: a
request gets its error, unless a background call's worker answers it (the ``BackgroundCalls`` port).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .. import ports
from .event_store import post_stream, request_key
from .liveness import holder_channel, request_stopped
from .redis_client import Backoff, RedisUnavailable

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger("mcp_server.http")

# How long a session's count of claims outlives its last claim (a day): past that, it reads 0.
HELD_TTL = 24 * 3600.0
# Attempts at releasing a request's claim that Redis did not take when the request ended (about
# ten minutes of retries, each delay doubling up to 30 s).
RELEASE_ATTEMPTS = 25


class Claims:
    """The claims part of :class:`~.transport.StreamableHTTPTransport` (its state, liveness and
    runtime are the transport's)."""

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

    @staticmethod
    def _request_key(session_id: str, request_id: Any) -> str:
        return f"req:{session_id}:{request_key(request_id)}"

    @property
    def request_claim_ttl(self) -> float:
        return (self.options.server_to_client_request_timeout or 600) * 2 + 3600

    def claim_request(self, session_id: str, request_id: Any) -> Awaitable[bool]:
        """False while the id is in flight in a live process; the request of a dead one gets its
        error first (:meth:`settle_orphaned_request`), then the id is claimed again. (The claim's
        coroutine itself, to await: one layer less on every request.)"""
        return self._claim(session_id, self._request_key(session_id, request_id),
                                 self.runtime.channel_key, self.request_claim_ttl,
                                 lambda: self._answer_stopped(session_id, request_id))

    def load_claiming(self, session_id: str, request_id: Any) -> Awaitable[tuple[Any, bool | None]]:
        """The session (``sessions.load``) and, in the same round trip where the shared state
        allows, its request's id claimed for this process: whether the claim was made, or None
        when it was not tried. A claim not made may be a dead process's: :meth:`claim_request`
        looks (and claims), as it does when none was tried."""
        ttl = self.request_claim_ttl
        return self.sessions.load_adding(session_id, self._request_key(session_id, request_id),
                                         self.runtime.channel_key, ttl, self._held_key(session_id),
                                         max(ttl, HELD_TTL))

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
        runtime = self.current_runtime()
        key, held = self._request_key(session_id, request_id), self._held_key(session_id)
        expected = runtime.channel_key if runtime is not None else None
        try:
            await self.state.delete_counted(key, held, expected=expected)
        except RedisUnavailable as exc:
            # The request is over; its id must not stay taken (409) for the claim's whole life
            # because Redis did not answer just now: released in the background once it does.
            logger.warning("releasing %s failed (%s); retrying in the background", key, exc)
            self.spawn(loop, self._release_later(key, held, expected))

    async def store_response(self, session_id: str, request_id: Any, stream: str, message: dict, *,
                             text: str | None = None) -> tuple[int | None, str | None, bool]:
        """Store a request's response on its stream (as :meth:`store_event`) and, where the stores
        allow it (the built-in Redis ones on one connection), let go of the request's id in the
        same round trip, this process's claim only (as :meth:`release_request`). The third value:
        whether that release was done; if not (another store, or the session is gone), the caller
        releases the id as usual. ``text``: the message's JSON text, when the caller has it."""
        if not self._events_read_the_state:
            sequence, holder = await self.store_event(session_id, stream, message, text=text)
            return sequence, holder, False
        runtime = self.current_runtime()
        sequence, holder = await self.events.append_releasing(
            session_id, stream, message, self._stream_key(session_id, stream),
            self._request_key(session_id, request_id), self._held_key(session_id),
            runtime.channel_key if runtime is not None else None, text=text)
        return sequence, holder, sequence is not None

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

    async def holds_request(self, session_id: str, request_id: Any) -> bool:
        """Whether this process holds the request's claim (a background call's worker has not
        taken it over)."""
        claim = await self.state.get(self._request_key(session_id, request_id))
        return claim is not None and holder_channel(claim) == self.runtime.channel_key

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

    async def answer_stopped(self, session_id: str, request_id: Any) -> None:
        """This process stops with the request in flight (past its drain timeout): its stream gets
        the error it would get had the process died; the request's end then frees its id."""
        await self._answer_stopped(session_id, request_id)

    async def _answer_stopped(self, session_id: str, request_id: Any) -> None:
        background = ports.implementation(ports.BackgroundCalls)
        if background is not None and not await background.settle_stopped_request(self, session_id,
                                                                                   request_id):
            return  # a worker answers it, or it runs again
        await self.deliver(session_id, post_stream(request_id), request_stopped(request_id))

    async def request_cancelled(self, session_id: str, request_id: Any) -> bool:
        """Whether the request was a background call that ended cancelled (and so has no response)."""
        background = ports.implementation(ports.BackgroundCalls)
        return background is not None and await background.ended_cancelled(session_id, request_id)

    async def let_go_of_request(self, session_id: str, request_id: Any) -> None:
        """Free a request's id whoever holds it (a background call cancelled before it ran)."""
        await self.state.delete_counted(self._request_key(session_id, request_id),
                                        self._held_key(session_id))
