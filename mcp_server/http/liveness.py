"""Which processes are alive, so that what a dead one held is let go at once, by one process.

Each process renews a heartbeat key in the shared state every ``PROCESS_HEARTBEAT_INTERVAL``
seconds; the key lives :data:`HEARTBEAT_BEATS` intervals. A claim (``stream:``, ``req:``, ``s2c:``)
starts with the channel of the process that holds it: when that channel's heartbeat is gone, the
holder is dead. A process that finds such a claim takes it over (:meth:`Liveness.take_over`,
atomic in the shared state: exactly one process wins), cleans up after the dead holder (a request
gets its error) and removes the claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc
from mcp_protocol.errors import INTERNAL_ERROR

from .event_store import HashedRequestId

if TYPE_CHECKING:
    from .shared_state import SharedState

# A heartbeat outlives this many intervals: a process is dead after missing two beats in a row.
HEARTBEAT_BEATS = 3
# The shared state's memory of heartbeats: set by the first beat into an empty state (a fresh
# deployment, or Redis after losing its data), which then opens a settling period of one heartbeat
# lifetime. Until every live process has beaten again, a missing heartbeat proves nothing.
EPOCH_KEY, SETTLING_KEY = "liveness:epoch", "liveness:settling"
EPOCH_TTL = 365 * 24 * 3600.0
# How long a take-over marks a dead holder's claim as being cleaned up. Past it (the process that
# took it over died too), another process can take the claim over again.
TAKEOVER_TTL = 300.0

REQUEST_STOPPED = "The server process serving this request stopped before answering; send it again"
REQUEST_LOST = "This request is not in flight and its response is no longer stored; send it again"


def holder_channel(claim: str) -> str:
    """The channel of the process holding a claim (``"<channel>"`` or ``"<channel>|<more>"``)."""
    return claim.split("|", 1)[0]


def request_stopped(request_id: Any) -> dict:
    """The response of a request whose process died."""
    return jsonrpc.error_response(_wire_id(request_id), INTERNAL_ERROR, REQUEST_STOPPED)


def request_lost(request_id: Any) -> dict:
    """The end of a resumed stream whose request runs nowhere and whose response is gone (its
    events expired, or its process died long before anyone asked)."""
    return jsonrpc.error_response(_wire_id(request_id), INTERNAL_ERROR, REQUEST_LOST)


def _wire_id(request_id: Any) -> Any:
    # A request known by its stream's digest name alone: its error can only name no id (null).
    return None if isinstance(request_id, HashedRequestId) else request_id


class Liveness:
    """Heartbeats of the processes of a deployment, and the take-over of a dead one's claims."""

    def __init__(self, state: SharedState, interval: float):
        self.state = state
        self.interval = interval

    @property
    def ttl(self) -> float:
        """How long a process that stopped beating still counts as alive."""
        return HEARTBEAT_BEATS * self.interval

    @property
    def detection_bound(self) -> float:
        """At most this long after a process dies, a stream waiting on it learns it (the heartbeat
        lapses, then the next periodic check sees it)."""
        return self.ttl + self.interval

    @staticmethod
    def _key(channel: str) -> str:
        return f"alive:{channel}"

    async def beat(self, channel: str) -> None:
        await self.state.set(self._key(channel), "1", self.ttl)
        if await self.state.add(EPOCH_KEY, "1", EPOCH_TTL):
            await self.state.set(SETTLING_KEY, "1", self.ttl)

    async def stop(self, channel: str) -> None:
        """This process stops: what it still holds is dead at once."""
        await self.state.delete(self._key(channel))

    async def is_alive(self, channel: str) -> bool:
        return await self.state.get(self._key(channel)) is not None

    async def dead_claim(self, key: str, own_channel: str) -> str | None:
        """The value of claim ``key`` when a dead process holds it; None if absent or held by a
        live one (this process always is)."""
        claim = await self.state.get(key)
        if claim is None or not await self.holds_dead(claim, own_channel):
            return None
        return claim

    async def holds_dead(self, claim: str, own_channel: str) -> bool:
        """Whether the process holding ``claim`` is dead: its heartbeat is gone from a shared
        state that has known heartbeats for longer than their lifetime."""
        channel = holder_channel(claim)
        if channel == own_channel or await self.is_alive(channel):
            return False
        return (await self.state.get(EPOCH_KEY) is not None
                and await self.state.get(SETTLING_KEY) is None)

    async def take_over(self, key: str, claim: str) -> bool:
        """True for exactly one caller per dead claim: the one that must clean up after it.

        The marker names the claim's value too, so a later claim of the same key (a new holder
        that dies in turn) is taken over afresh.
        """
        return await self.state.add(f"takeover:{key}|{claim}", "1", TAKEOVER_TTL)
