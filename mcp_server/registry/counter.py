"""The registry's change marker: a new value at each change, for a process that has no channel on
the layer (stdio, a stateless endpoint) or missed the message, which reads it once a second.

It lives in the transport's shared state where the server has an HTTP transport (Redis in
production: one fast read), and in Django's cache too, for processes that serve no HTTP.
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import async_to_sync

# A year: the marker only has to outlive the snapshots that recorded it.
TTL = 365 * 24 * 3600.0


def _key(server_name: str) -> str:
    return f"mcp_server:registry:{server_name}"


def _state(server: Any) -> Any:
    return getattr(server.transport, "state", None)


async def read(server: Any) -> Any:
    """The marker now (None: no change yet, or the store does not answer)."""
    from django.core.cache import cache

    state = _state(server)
    try:
        if state is not None:
            return await state.get(_key(server.name))
        return await cache.aget(_key(server.name))
    except Exception:  # not answering: the channel-layer message still comes
        return None


def mark_change(server: Any) -> None:
    """A new marker (blocking), in the shared state and in Django's cache."""
    from django.core.cache import cache

    value = str(time.time_ns())
    state = _state(server)
    if state is not None:
        async_to_sync(state.set)(_key(server.name), value, TTL)
    cache.set(_key(server.name), value, timeout=None)
