"""Two tools with one body, so the benchmark's difference between them is where the call runs."""

from __future__ import annotations

import mcp_server


def echo(message: str) -> str:
    """Echo a message back (a benchmark tool)."""
    return message


# A plain ``def`` for both: inline it runs on a worker thread of the web process, in the background
# on the Celery worker's loop, each as any plain tool would.
mcp_server.tool(echo, name="echo_inline")
mcp_server.tool(echo, name="echo_background", background=True)
