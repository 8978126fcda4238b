"""Routing between processes: a stored event to whoever holds its stream, a cancel to whoever
serves its request, a client's answer to whoever waits for it, and messages to every process.

Where something is held comes from the claims (``claims.py``); the message travels on the channel
layer to that process's channel (``runtime.py``).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from channels.layers import get_channel_layer

from .. import ports
from ..outgoing import is_request_id_we_sent
from .event_store import request_key
from .liveness import holder_channel
from .runtime import on_layer

if TYPE_CHECKING:
    from .runtime import Runtime


class Routing:
    """The routing part of :class:`~.transport.StreamableHTTPTransport`."""

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
                          level: str = "", *, text: str | None = None) -> tuple[int | None, str | None]:
        """Store an event of a session's stream: its sequence (None: the session is gone) and
        who holds the stream once it is stored (None: nobody), read in the same round trip when
        the event store shares the shared state's Redis (the built-in stores, as configured).
        ``text``: the message's JSON text, when the caller has it already (that store takes it)."""
        key = self._stream_key(session_id, stream)
        if self._events_read_the_state:
            return await self.events.append_watched(session_id, stream, message, key, level, text=text)
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
        background = ports.implementation(ports.BackgroundCalls)
        if background is not None:
            await background.cancel_request(self, session_id, key)

    async def send_to_process(self, channel: str | None, message: dict) -> None:
        """To the process owning ``channel``: through this process's runtime, or straight on the
        channel layer where none runs (a management command)."""
        runtime = self.current_runtime()
        if runtime is not None:
            await runtime.send_to(channel, message)
            return
        layer = get_channel_layer()
        if layer is not None and channel:
            await on_layer(layer.send(channel, message))

    async def expect_answer(self, session_id: str, request_id: str, related_request_id: Any = None) -> None:
        """Record that this process waits for the client's answer to ``request_id``, sent while
        serving ``related_request_id`` (which gets an error if this process dies meanwhile)."""
        ttl = (self.options.server_to_client_request_timeout or 86400) + 60
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

    async def end_session(self, session_id: str) -> bool:
        """Delete a session everywhere (a client's DELETE, the admin's and the API's): its row,
        events and subscriptions, its shared-state entry and counts, and its streams and requests
        in whichever process holds them; its next request gets 404. False when it was not there.

        With the built-in Redis stores on one connection, the session's entry and counts go in
        the round trip that drops its events (:meth:`close_session`'s).
        """
        principals = await self.sessions.delete_row(session_id)
        removed, uncounted = self.sessions.forgetting(session_id, principals)
        if self._events_read_the_state:
            if await self.events.forget_taking(session_id, self._held_key(session_id), removed,
                                               uncounted) > 0:
                await self.tell_every_process({"type": "mcp.close", "session_id": session_id})
        else:
            await self.sessions.forget(removed, uncounted)
            await self.close_session(session_id)
        return bool(principals)

    async def close_session(self, session_id: str) -> None:
        """End the session's streams and requests in every process, and drop its stored events.

        A session with no claim (no stream open, no request in flight) anywhere has nothing to
        end: no process is told (a message to every process costs more than the rest of a DELETE).
        A process that died holding a claim leaves the count above zero: the message goes then.
        """
        held = self._held_key(session_id)
        forget_taking = getattr(self.events, "forget_taking", None) if self._events_read_the_state else None
        if forget_taking is not None:
            # One round trip: the stored events dropped, the count of claims read and removed.
            if await forget_taking(session_id, held) > 0:
                await self.tell_every_process({"type": "mcp.close", "session_id": session_id})
            return
        take_count = getattr(self.state, "take_count", None)  # a state written before take_count()
        if take_count is not None:
            claims = await take_count(held)  # one round trip: read and removed
        else:
            claims = await self.state.count(held)
            await self.state.delete(held)
        if claims > 0:
            await self.tell_every_process({"type": "mcp.close", "session_id": session_id})
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
        runtime = self.current_runtime()
        if runtime is not None:
            await runtime.send_to_all(message)
