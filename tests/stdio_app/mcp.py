"""Tools of the test-only app, registered onto the default server by autodiscovery."""

from __future__ import annotations

import asyncio

import mcp_server
from mcp_protocol import methods


@mcp_server.tool
async def sleepy(seconds: float) -> str:
    """Sleep without blocking the server: other requests are answered meanwhile."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@mcp_server.tool
def announce() -> str:
    """Send notifications/tools/list_changed through the stdio transport; says whether it was sent."""
    sent = mcp_server.get_server().transport.send_notification(methods.NOTIFICATIONS_TOOLS_LIST_CHANGED)
    return f"sent={sent}"
