"""Rate limits as token buckets that every process shares (``MCP_SERVER["RATE_LIMITS"]``).

A bucket holds at most N tokens and refills at N per period ("5/minute": five at once, then one
every twelve seconds). Each request takes a token from each of its buckets, all or none:

- ``PRINCIPAL``: every request of one principal (the lifecycle requests aside: ``initialize``,
  ``ping``, ``server/discover``), whatever it asks;
- ``TOOLS``: the calls of one tool by one principal (``"*"``: each tool not named);
- ``CLIENT_TOOLS``: the calls of one tool by every principal of one OAuth client together.

A call with no token left is refused with :class:`~mcp_server.errors.RateLimitedError` (-32029,
``data.retryAfter``; HTTP 429 where the transport has a status). The buckets are the registered
``ports.TokenBuckets`` (Redis or Django's cache, ``RATE_LIMIT_STORE``), else the default cache.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed

from mcp_protocol import methods

from .. import ports
from ..errors import RateLimitedError
from ..rates import Rate
from ..settings import mcp_settings
from .base import Call, Handler

# Requests a client cannot do without before any other: never counted.
LIFECYCLE = frozenset({methods.INITIALIZE, methods.PING, methods.SERVER_DISCOVER})
ANY_TOOL = "*"
SETTING = "MCP_SERVER['RATE_LIMITS']"


class RateLimits:
    """``MCP_SERVER["RATE_LIMITS"]``, parsed: the rate of each kind of bucket."""

    def __init__(self, principal: Rate | None, tools: dict[str, Rate | None],
                 client_tools: dict[str, Rate | None]):
        self.principal = principal
        self.tools = tools
        self.client_tools = client_tools

    @classmethod
    def from_settings(cls, value: Any = None) -> RateLimits:
        value = mcp_settings.RATE_LIMITS if value is None else value
        return cls(Rate.parse(value.get("PRINCIPAL"), f"{SETTING}['PRINCIPAL']"),
                   _rates(value.get("TOOLS") or {}, "TOOLS"),
                   _rates(value.get("CLIENT_TOOLS") or {}, "CLIENT_TOOLS"))

    @property
    def empty(self) -> bool:
        return self.principal is None and not any(self.tools.values()) and not any(self.client_tools.values())

    def buckets_of(self, call: Call) -> list[tuple[str, int, float]]:
        """The buckets ``call`` takes a token from: (key, capacity, period)."""
        buckets = []
        who = principal_key(call.session)
        if self.principal is not None:
            buckets.append((f"p:{who}", self.principal.count, float(self.principal.seconds)))
        tool = call.tool
        if tool is not None:
            rate = _rate_of(self.tools, tool)
            if rate is not None:
                buckets.append((f"t:{_digest(tool)}:{who}", rate.count, float(rate.seconds)))
            client_id = getattr(call.principal, "client_id", None)
            rate = _rate_of(self.client_tools, tool) if client_id else None
            if rate is not None:
                buckets.append((f"c:{_digest(client_id)}:{_digest(tool)}", rate.count, float(rate.seconds)))
        return buckets


class RateLimitMiddleware:
    """Refuse a request past one of its rate limits (see the module). Not used (Django's
    ``MiddlewareNotUsed``) when no limit is set. Notifications pass, and so does a background call
    on a worker: it was counted in the web process that queued it."""

    def __init__(self, get_response: Handler, *, limits: RateLimits | None = None,
                 buckets: ports.TokenBuckets | None = None):
        self.get_response = get_response
        self.limits = RateLimits.from_settings() if limits is None else limits
        if self.limits.empty:
            raise MiddlewareNotUsed("MCP_SERVER['RATE_LIMITS'] sets no limit")
        self.buckets = buckets

    async def __call__(self, call: Call) -> Any:
        if call.is_notification or call.background or call.method in LIFECYCLE:
            return await self.get_response(call)
        wanted = self.limits.buckets_of(call)
        if wanted:
            wait = await self._buckets().take(wanted)
            if wait > 0:
                what = f"tool {call.tool!r}" if call.tool is not None else f"{call.method} requests"
                raise RateLimitedError(what, wait)
        return await self.get_response(call)

    def _buckets(self) -> ports.TokenBuckets:
        if self.buckets is not None:
            return self.buckets
        registered = ports.implementation(ports.TokenBuckets)
        if registered is not None:
            return registered
        from django.core.cache import caches

        from .buckets import CacheBuckets

        return CacheBuckets(caches[mcp_settings.RATE_LIMIT_CACHE])


def principal_key(session: Any) -> str:
    """Whom a session's requests are counted against: the transport's key (the Django user, else
    the token's client and subject, else the client address), else its user, else its token's
    client and subject, else ``anonymous`` (stdio, an in-process call)."""
    if session.principal_key:
        return session.principal_key
    if session.user_id is not None:
        return f"user:{session.user_id}"
    principal = session.principal
    if principal is not None and (principal.client_id or principal.subject):
        return f"token:{_digest(f'{principal.client_id}/{principal.subject}')}"
    return "anonymous"


def _rates(value: Any, key: str) -> dict[str, Rate | None]:
    if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
        raise ImproperlyConfigured(f"{SETTING}['{key}'] must be a dict of tool name -> rate, not {value!r}")
    return {name: Rate.parse(rate, f"{SETTING}['{key}'][{name!r}]") for name, rate in value.items()}


def _rate_of(rates: dict[str, Rate | None], tool: str) -> Rate | None:
    return rates[tool] if tool in rates else rates.get(ANY_TOOL)


def _digest(text: str) -> str:
    """Fixed length and no separator in a key, whatever a tool or client is called."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
