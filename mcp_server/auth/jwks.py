"""The signing keys of an authorization server, fetched from its JWKS URL and kept for a while.

A key id the cached set does not know makes one fetch (keys rotate), but no more than one per
``refetch_interval`` seconds: a flood of tokens with made-up ids cannot make the endpoint hammer
the authorization server.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

import httpx

from .base import AuthenticationUnavailable

logger = logging.getLogger("mcp_server.auth")
# Seconds between two tries at a JWKS that could not be fetched yet (each request meanwhile: 503).
FAILED_FETCH_PAUSE = 5.0


class JWKSCache:
    def __init__(self, url: str, *, cache_seconds: float = 3600, refetch_interval: float = 60,
                 timeout: float = 5):
        self.url = url
        self.cache_seconds = cache_seconds
        self.refetch_interval = refetch_interval
        self.timeout = timeout
        self._keys: dict[str | None, Any] | None = None
        self._fetched_at = 0.0  # when the cached set was fetched (monotonic)
        self._tried_at = -float("inf")  # the last fetch attempt, successful or not
        self.fetches = 0
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary())

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def key(self, kid: str | None) -> Any:
        """The ``PyJWK`` for ``kid`` (None: the set's only key), or None when there is none."""
        if self._keys is None or time.monotonic() - self._fetched_at > self.cache_seconds:
            await self._refresh()
        found = self._find(kid)
        if found is None:
            await self._refresh()  # keys rotate: once per refetch_interval at most
            found = self._find(kid)
        return found

    def _find(self, kid: str | None) -> Any:
        keys = self._keys or {}
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    async def _refresh(self) -> None:
        async with self._lock():
            # Another request may have fetched while this one waited for the lock; and a JWKS
            # that could not be fetched at all is tried again after a short pause, not per request.
            pause = self.refetch_interval if self._keys is not None else \
                min(self.refetch_interval, FAILED_FETCH_PAUSE)
            if time.monotonic() - self._tried_at < pause:
                if self._keys is None:
                    raise AuthenticationUnavailable("the authorization server's keys cannot be fetched")
                return
            self._tried_at = time.monotonic()
            self.fetches += 1
            try:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    response = await client.get(self.url, headers={"accept": "application/json"})
                response.raise_for_status()
                self._keys = _parse(response.json())
                self._fetched_at = time.monotonic()
            except (httpx.HTTPError, ValueError) as exc:
                logger.warning("the JWKS at %s could not be fetched: %s", self.url, exc)
                if self._keys is None:
                    raise AuthenticationUnavailable("the authorization server's keys cannot be fetched") \
                        from exc


def _parse(document: Any) -> dict[str | None, Any]:
    """Signing keys by key id (keys for encryption are left out)."""
    from jwt import PyJWK
    from jwt.exceptions import PyJWKError

    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("a JWKS is an object with a keys array")
    keys: dict[str | None, Any] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = PyJWK(entry)
        except (PyJWKError, ValueError, TypeError):
            continue  # a key type this PyJWT cannot use
        keys[entry.get("kid")] = key
    return keys
