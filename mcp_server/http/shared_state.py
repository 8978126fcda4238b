"""Small keys with a time to live that every process of a deployment sees.

They say which process holds what: the stream of a session, an in-flight request, a request to
the client waiting for its answer. Redis in production; process memory on the embedded default
(one process).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Protocol


class SharedState(Protocol):
    async def add(self, key: str, value: str, ttl: float) -> bool:
        """Set ``key`` only if it is absent; True when it was set."""

    async def set(self, key: str, value: str, ttl: float) -> None: ...

    async def get(self, key: str) -> str | None: ...

    async def touch(self, key: str, ttl: float) -> str | None:
        """Get ``key`` and extend its life to ``ttl``; None when absent."""

    async def delete(self, key: str, expected: str | None = None) -> None:
        """Remove ``key`` (only while it still holds ``expected``, when given)."""


class LocalState:
    """Process memory; right for one process only."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _live(self, key: str) -> str | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] < time.monotonic():
            del self._values[key]
            return None
        return entry[0]

    async def add(self, key: str, value: str, ttl: float) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._values[key] = (value, time.monotonic() + ttl)
            return True

    async def set(self, key: str, value: str, ttl: float) -> None:
        with self._lock:
            self._values[key] = (value, time.monotonic() + ttl)

    async def get(self, key: str) -> str | None:
        with self._lock:
            return self._live(key)

    async def touch(self, key: str, ttl: float) -> str | None:
        with self._lock:
            value = self._live(key)
            if value is not None:
                self._values[key] = (value, time.monotonic() + ttl)
            return value

    async def delete(self, key: str, expected: str | None = None) -> None:
        with self._lock:
            if expected is None or self._live(key) == expected:
                self._values.pop(key, None)


_DELETE_IF_EQUAL = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class RedisState:
    """Redis, shared by every process; one client per event loop (redis clients bind to one)."""

    def __init__(self, url: str, prefix: str = "mcp:") -> None:
        self.url = url
        self.prefix = prefix
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}

    def _client(self) -> Any:
        import redis.asyncio as redis

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = redis.Redis.from_url(self.url, decode_responses=True)
        return client

    async def add(self, key: str, value: str, ttl: float) -> bool:
        return bool(await self._client().set(self.prefix + key, value, px=int(ttl * 1000), nx=True))

    async def set(self, key: str, value: str, ttl: float) -> None:
        await self._client().set(self.prefix + key, value, px=int(ttl * 1000))

    async def get(self, key: str) -> str | None:
        return await self._client().get(self.prefix + key)

    async def touch(self, key: str, ttl: float) -> str | None:
        return await self._client().getex(self.prefix + key, px=int(ttl * 1000))

    async def delete(self, key: str, expected: str | None = None) -> None:
        client = self._client()
        if expected is None:
            await client.delete(self.prefix + key)
        else:
            await client.eval(_DELETE_IF_EQUAL, 1, self.prefix + key, expected)

