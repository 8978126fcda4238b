"""One log record per request and notification: method, tool, principal, era, duration, outcome.

Written to the ``mcp_server.requests`` logger at INFO (an internal error at WARNING), while the
dispatcher's log context is current: a project's ``RequestContextFilter`` adds the request, session
and trace ids (``mcp_server.log_context``). The values are on the record too (``mcp_tool``,
``mcp_principal``, ``mcp_era``, ``mcp_duration_ms``, ``mcp_outcome``) for a JSON formatter.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp_protocol.cancellation import CancelledError
from mcp_protocol.errors import MCPError

from .base import Call, Handler
from .rate_limit import principal_key

logger = logging.getLogger("mcp_server.requests")


class LoggingMiddleware:
    """Time each call and log how it ended (see the module). Outcomes: ``ok``, ``tool_error`` (a
    tool result with ``isError``), ``error <code>`` (a JSON-RPC error), ``cancelled``,
    ``exception <type>`` (an internal error)."""

    def __init__(self, get_response: Handler):
        self.get_response = get_response

    async def __call__(self, call: Call) -> Any:
        if not logger.isEnabledFor(logging.INFO):
            return await self.get_response(call)
        started = time.perf_counter()
        level, outcome = logging.INFO, "ok"
        try:
            result = await self.get_response(call)
            if isinstance(result, dict) and result.get("isError") is True:
                outcome = "tool_error"
            return result
        except CancelledError:
            outcome = "cancelled"
            raise
        except MCPError as exc:
            outcome = f"error {exc.code}"
            raise
        except BaseException as exc:
            level, outcome = logging.WARNING, f"exception {type(exc).__name__}"
            raise
        finally:
            duration = (time.perf_counter() - started) * 1000
            who = principal_key(call.session)
            tool = call.tool
            logger.log(level, "MCP %s%s by %s (%s%s): %s in %.1f ms", call.method,
                       f" {tool}" if tool else "", who, call.era, ", background" if call.background else "",
                       outcome, duration,
                       extra={"mcp_tool": tool, "mcp_principal": who, "mcp_era": call.era,
                              "mcp_duration_ms": round(duration, 3), "mcp_outcome": outcome})
