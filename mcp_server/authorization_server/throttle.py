"""Limits on what one client address may try: counters in Django's cache, in fixed periods.

The cache is the one every process of a deployment shares (Redis in production, as the demo's
``REDIS_URL`` configures it), so a limit holds across processes; each counter is one atomic
``incr``. A limit is written as DRF writes throttle rates, ``"number/period"`` with the period's
first letter s, m, h or d (``"20/hour"``); fixed periods let a client make at most twice the number
across the boundary of two of them, which is the price of one counter per period.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from django.core.cache import cache

from ..rates import Rate

__all__ = ["Rate", "Throttle", "client_address"]


def client_address(request: Any) -> str:
    """The address a request came from, as the ASGI server saw it (behind a proxy, daphne's
    ``--proxy-headers`` makes it the client's): never a header the client could write."""
    return request.META.get("REMOTE_ADDR") or ""


class Throttle:
    """At most ``rate.count`` events per period for each key (the key's parts hashed together)."""

    def __init__(self, scope: str, rate: Rate | None):
        self.scope = scope
        self.rate = rate

    def _key(self, parts: tuple[str, ...], period: int) -> str:
        digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"mcp:throttle:{self.scope}:{period}:{digest}"

    def blocked(self, *parts: str) -> int | None:
        """Seconds until the key may try again, when its events of this period reached the limit;
        None when it may go on. Counts nothing."""
        if self.rate is None:
            return None
        period, left = _period(self.rate)
        if (cache.get(self._key(parts, period)) or 0) < self.rate.count:
            return None
        return max(1, math.ceil(left))

    def record(self, *parts: str) -> int | None:
        """Count one event of the key; seconds until it may try again when this one went past the
        limit, else None."""
        if self.rate is None:
            return None
        period, left = _period(self.rate)
        key = self._key(parts, period)
        cache.add(key, 0, timeout=math.ceil(left) + 1)
        try:
            count = cache.incr(key)
        except ValueError:  # expired (or evicted) between add and incr: this event starts it again
            cache.set(key, 1, timeout=math.ceil(left) + 1)
            count = 1
        return max(1, math.ceil(left)) if count > self.rate.count else None


def _period(rate: Rate) -> tuple[int, float]:
    """The current period of ``rate`` and the seconds left in it."""
    now = time.time()
    period = int(now // rate.seconds)
    return period, (period + 1) * rate.seconds - now
