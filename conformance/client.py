"""The client the official conformance suite drives (``client`` mode), built on ``mcp_client``.

    conformance/client http://localhost:PORT/mcp       # MCP_CONFORMANCE_SCENARIO names the scenario

The suite starts a scenario server, then runs this command with the server's URL as the last
argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO``; it passes when the client does
what the scenario checks and exits 0 in time. Handshake-era scenarios of 0.1.16 are implemented:
``initialize``, ``tools_call``, ``elicitation-sep1034-client-defaults`` and ``sse-retry``; any other
(the ``auth/*`` ones: OAuth comes with a later issue) exits 2, naming it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable

from mcp_client import AsyncClient, ClientError, HTTPTransport, apply_defaults

CLIENT_INFO = {"name": "django-mcp-sdk-conformance-client", "version": "0.1.0"}
TIMEOUT = 25.0  # seconds; the suite's own timeout is 30


async def initialize(client: AsyncClient) -> None:
    """The handshake (initialize, then notifications/initialized), and a clean end."""
    await client.connect()


async def tools_call(client: AsyncClient) -> None:
    """List the tools and call ``add_numbers``."""
    await client.connect()
    tools = {tool.name for tool in await client.tools()}
    if "add_numbers" not in tools:
        raise SystemExit(f"the server offers no add_numbers tool: {sorted(tools)}")
    result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
    print(result.text)


async def elicitation_defaults(client: AsyncClient) -> None:
    """Accept the server's elicitation, every field filled from the schema's defaults (SEP-1034)."""

    def accept_defaults(params: dict) -> dict:
        return {"action": "accept", "content": apply_defaults(params.get("requestedSchema") or {})}

    client.on_elicitation(accept_defaults)
    await client.connect()
    print((await client.call_tool("test_client_elicitation_defaults")).text)


async def sse_retry(client: AsyncClient) -> None:
    """Call ``test_reconnection``: the server closes the stream after a priming event; the
    transport waits its ``retry:`` and resumes with GET and Last-Event-ID (SEP-1699)."""
    await client.connect()
    await client.tools()
    print((await client.call_tool("test_reconnection")).text)


SCENARIOS: dict[str, Callable[[AsyncClient], Awaitable[None]]] = {
    "initialize": initialize,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
}


async def run(scenario: Callable[[AsyncClient], Awaitable[None]], url: str) -> None:
    client = AsyncClient(HTTPTransport(url, timeout=TIMEOUT), client_info=CLIENT_INFO)
    try:
        await asyncio.wait_for(scenario(client), TIMEOUT)
    finally:
        try:
            await client.close()
        except ClientError as exc:  # ending the session is a courtesy the scenario does not check
            print(f"conformance client: closing: {exc}", file=sys.stderr)


def main(argv: list[str]) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(argv) < 2:
        print("usage: MCP_CONFORMANCE_SCENARIO=<scenario> conformance/client <server URL>", file=sys.stderr)
        return 2
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(f"conformance client: scenario {name!r} is not implemented "
              f"(implemented: {', '.join(SCENARIOS)})", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(scenario, argv[-1]))
    except (ClientError, TimeoutError) as exc:
        print(f"conformance client: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
