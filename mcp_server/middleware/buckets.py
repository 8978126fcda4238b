"""Token buckets in Django's cache (``MCP_SERVER["RATE_LIMIT_STORE"] = "cache"``).

Django's cache API has no compare-and-set and no script: the only atomic step every backend
offers is ``add`` (set when absent), and on LocMem or file caches even that holds for one process
or one machine only. So a call's buckets are read and written under a short lock taken with
``add``: exact on Redis, Memcached and the database cache, which every process shares, and never
two tokens taken for one. Times are each process's clock (``time.time()``): machines whose clocks
disagree by a second refill a bucket a second early or late. Redis (``mcp_server.http.rate_buckets``)
needs neither the lock nor the clocks.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

# The lock lives this long at most, in case its holder dies; taking it is tried this many times,
# this far apart, before the call is refused for a second (a bucket that contended is busy).
LOCK_SECONDS = 5
LOCK_ATTEMPTS = 50
LOCK_PAUSE = 0.01


def refill(tokens: float, at: float, now: float, capacity: int, period: float) -> float:
    """The tokens a bucket holds at ``now``, having held ``tokens`` at ``at``."""
    return min(float(capacity), tokens + max(0.0, now - at) * capacity / period)


class CacheBuckets:
    """``ports.TokenBuckets`` in the Django cache ``cache`` (an alias's cache object)."""

    def __init__(self, cache: Any, prefix: str = "mcp:rate:"):
        self.cache = cache
        self.prefix = prefix

    async def take(self, buckets: list[tuple[str, int, float]]) -> float:
        keys = [self.prefix + key for key, _capacity, _period in buckets]
        # One lock per bucket, taken in one order by every process: calls sharing a bucket (a
        # principal's, whatever the tool) exclude each other, and two never wait on each other.
        held: list[str] = []
        try:
            for lock in sorted(key + ":lock" for key in keys):
                if not await self._lock(lock):
                    return 1.0
                held.append(lock)
            return await self._take(keys, buckets)
        finally:
            for lock in held:
                await self.cache.adelete(lock)

    async def _lock(self, lock: str) -> bool:
        for _attempt in range(LOCK_ATTEMPTS):
            if await self.cache.aadd(lock, 1, LOCK_SECONDS):
                return True
            await asyncio.sleep(LOCK_PAUSE)
        return False

    async def _take(self, keys: list[str], buckets: list[tuple[str, int, float]]) -> float:
        stored = await self.cache.aget_many(keys)
        now = time.time()
        levels, wait = [], 0.0
        for key, (_name, capacity, period) in zip(keys, buckets, strict=True):
            tokens, at = stored.get(key) or (float(capacity), now)
            level = refill(tokens, at, now, capacity, period)
            levels.append(level)
            if level < 1:
                wait = max(wait, (1 - level) * period / capacity)
        taken = 1 if wait == 0 else 0
        for key, level, (_name, _capacity, period) in zip(keys, levels, buckets, strict=True):
            await self.cache.aset(key, (level - taken, now), period + 1)
        return wait
