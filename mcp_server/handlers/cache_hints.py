"""``ttlMs`` / ``cacheScope`` on list and read results (SEP-2549): opt-in on handshake revisions."""

from __future__ import annotations

from typing import Any

CACHE_SCOPES = ("public", "private")


def check(ttl_ms: Any, cache_scope: Any) -> None:
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0):
        raise ValueError(f"ttl_ms must be an integer >= 0, not {ttl_ms!r}")
    if cache_scope is not None and cache_scope not in CACHE_SCOPES:
        raise ValueError(f"cache_scope must be 'public' or 'private', not {cache_scope!r}")


def defaulted(ttl_ms: int | None, cache_scope: str | None) -> dict[str, Any]:
    """Both hints, an unset one at its default (0, ``"private"``)."""
    return {"ttlMs": ttl_ms if ttl_ms is not None else 0, "cacheScope": cache_scope or "private"}


def stamp(result: dict, ttl_ms: int | None, cache_scope: str | None) -> dict:
    """Add both hints when either is configured; values already in the result win."""
    if ttl_ms is None and cache_scope is None:
        return result
    for key, value in defaulted(ttl_ms, cache_scope).items():
        result.setdefault(key, value)
    return result
