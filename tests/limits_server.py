"""The hooks server of the HTTP tests plus a tool that floods its own stream (fair-share tests)."""

from __future__ import annotations

from typing import Any

from mcp_server import ServerContext

from .http_hooks import HooksServer


class LimitsServer(HooksServer):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)

        @self.tool
        async def flood(count: int, size: int, server_context: ServerContext) -> str:
            """Log ``count`` messages of ``size`` characters on this request's stream, numbered."""
            for index in range(count):
                await server_context.notify_log_message({"index": index, "text": "x" * size})
            return f"flooded {count}"
