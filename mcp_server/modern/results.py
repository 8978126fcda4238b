"""What a modern result carries that a handshake-era one does not: ``resultType`` and cache hints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol import methods
from mcp_protocol.envelope import RESULT_COMPLETE

from ..handlers.cache_hints import defaulted

if TYPE_CHECKING:
    from ..server import Server

# Methods the 2026-07-28 revision removed: -32601 on a modern request whatever the capabilities
# (MOD-07, PING-04). subscriptions/listen replaces resources/subscribe; the envelope's logLevel
# replaces logging/setLevel.
REMOVED_METHODS = frozenset({
    methods.INITIALIZE, methods.PING, methods.LOGGING_SET_LEVEL,
    methods.RESOURCES_SUBSCRIBE, methods.RESOURCES_UNSUBSCRIBE,
})

# The results SEP-2549 makes cacheable; on a modern request they always carry both hints (CACHE-03).
CACHEABLE_METHODS = frozenset({
    methods.TOOLS_LIST, methods.PROMPTS_LIST, methods.RESOURCES_LIST,
    methods.RESOURCES_TEMPLATES_LIST, methods.RESOURCES_READ,
})

def cache_hints(server: Server) -> dict[str, Any]:
    """The server's ``ttlMs`` and ``cacheScope``: on every cacheable modern result (CACHE-03)."""
    return defaulted(server.ttl_ms, server.cache_scope)


def stamp_response(server: Server, method: str, response: dict | None) -> dict | None:
    """Stamp the result of a modern response (MOD-08, CACHE-03/04/05).

    A result that already says what it is (``"input_required"``, ``"task"``) is left exactly as
    it is: no cache hints on an incomplete result. Otherwise it gets ``resultType: "complete"``,
    and a cacheable one both hints, values already in the result winning. The result is copied,
    never changed in place, as a handler may return an object it keeps; the response, which the
    dispatcher made for this request, takes the stamped copy in place and is returned: an observer
    holding it (the audit trail, waiting for its size as sent) sees what goes out, without a
    second encoding.
    """
    if response is None or not isinstance(response.get("result"), dict):
        return response
    result = response["result"]
    if "resultType" in result:
        return response
    stamped = {**result, "resultType": RESULT_COMPLETE}
    if method in CACHEABLE_METHODS:
        for key, value in cache_hints(server).items():
            stamped.setdefault(key, value)
    response["result"] = stamped
    return response
