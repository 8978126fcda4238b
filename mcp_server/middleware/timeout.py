"""A bound on how long a tool call runs (``TOOL_TIMEOUT``, and per tool ``TOOL_TIMEOUTS``).

Past it the handler is cancelled twice over: its coroutine gets ``asyncio.CancelledError`` (an
``async def`` tool stops at its next ``await``), and its ``cancelled()`` turns true (a plain
``def`` tool, on a worker thread Python cannot stop, ends at its next check). The call ends with
-32001 saying so, not silently as a client's cancel would. A background tool is bounded where it
runs, on the worker (its call in the web process only waits for it).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed

from mcp_protocol.cancellation import Cancellation
from mcp_protocol.errors import RequestTimeoutError

from ..settings import mcp_settings
from .base import Call, Handler


def _seconds(value: Any, setting: str) -> float | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        raise ImproperlyConfigured(f"{setting} must be a positive number of seconds or None, not {value!r}")
    return value


def timeouts_from_settings() -> tuple[float | None, dict[str, float | None]]:
    """``TOOL_TIMEOUT`` and ``TOOL_TIMEOUTS``, checked."""
    default = _seconds(mcp_settings.TOOL_TIMEOUT, "MCP_SERVER['TOOL_TIMEOUT']")
    per_tool = mcp_settings.TOOL_TIMEOUTS
    if not isinstance(per_tool, dict):
        raise ImproperlyConfigured(f"MCP_SERVER['TOOL_TIMEOUTS'] must be a dict of tool name -> seconds, "
                                   f"not {per_tool!r}")
    return default, {name: _seconds(value, f"MCP_SERVER['TOOL_TIMEOUTS'][{name!r}]")
                     for name, value in per_tool.items()}


class TimeoutMiddleware:
    """End a ``tools/call`` that runs past its tool's timeout with -32001 (see the module)."""

    def __init__(self, get_response: Handler, *, default: float | None = None,
                 per_tool: dict[str, float | None] | None = None):
        self.get_response = get_response
        if default is None and per_tool is None:
            default, per_tool = timeouts_from_settings()
        self.default, self.per_tool = default, per_tool or {}
        if self.default is None and not any(self.per_tool.values()):
            raise MiddlewareNotUsed("neither TOOL_TIMEOUT nor TOOL_TIMEOUTS bounds a tool")

    def timeout_of(self, tool: str) -> float | None:
        return self.per_tool.get(tool, self.default)

    async def __call__(self, call: Call) -> Any:
        tool = call.tool
        seconds = self.timeout_of(tool) if tool is not None else None
        ctx = call.context
        if seconds is None or ctx is None:
            return await self.get_response(call)
        if not call.background and getattr(ctx.server.known_tool(tool), "background", False):
            return await self.get_response(call)  # bounded on the worker that runs it
        # The handler gets a copy of the context with a cancellation of its own, cancelled by the
        # request's and at the timeout: the request's stays as it is, so that the call ends with
        # an error, not silently as a cancelled request does.
        request, own = ctx.cancellation, Cancellation(ctx.request_id)
        unhook = request.on_cancel(lambda cancelled: own.cancel(cancelled.reason))
        call.context = inner = copy.copy(ctx)
        inner.cancellation = own
        try:
            return await asyncio.wait_for(self.get_response(call), seconds)
        except TimeoutError:
            own.cancel(f"it ran past its timeout ({seconds:g} s)")
            raise RequestTimeoutError(f"Tool call timed out: {tool} ran longer than its timeout "
                                      f"({seconds:g} s) and was stopped",
                                      data={"name": tool, "timeout": seconds}) from None
        finally:
            unhook()
