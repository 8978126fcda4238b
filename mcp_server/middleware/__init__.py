"""MCP middleware (docs/middleware.md): ``MCP_SERVER["MIDDLEWARE"]``, and the built-ins."""

from .base import HANDSHAKE, MODERN, Call, build_chain, load
from .rate_limit import RateLimitMiddleware, RateLimits
from .timeout import TimeoutMiddleware
from .timing import LoggingMiddleware

__all__ = ["HANDSHAKE", "MODERN", "Call", "LoggingMiddleware", "RateLimitMiddleware", "RateLimits",
           "TimeoutMiddleware", "build_chain", "load"]
