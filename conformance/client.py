"""The client the official conformance suite drives (``client`` mode), built on ``mcp_client``.

    conformance/client http://localhost:PORT/mcp       # MCP_CONFORMANCE_SCENARIO names the scenario

The suite starts a scenario server, then runs this command with the server's URL as the last
argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO``; it passes when the client does
what the scenario checks and exits 0 in time. The client connects in auto mode. Implemented: the
handshake-era scenarios of 0.1.16 (``initialize``, ``tools_call``,
``elicitation-sep1034-client-defaults``, ``sse-retry``), the 2026-07-28 ones of the 0.2.0 alpha that
need no OAuth, and the ``auth/*`` ones (mcp_client.oauth; the lists are conformance/scenarios.py):
the suite's authorization server redirects straight back, so the "browser" here is one GET of the
authorization URL whose ``Location`` carries the code. Scenario data (pre-registered clients, keys,
ID tokens, tool calls) comes as JSON in ``MCP_CONFORMANCE_CONTEXT``. Any other scenario exits 2,
naming it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

import httpx

from conformance import scenarios
from mcp_client import (
    AsyncClient,
    AuthorizationError,
    ClientCredentialsProvider,
    ClientError,
    CrossAppAccessProvider,
    HTTPTransport,
    IDJAGTokenExchange,
    Provider,
    WorkloadIdentityProvider,
    apply_defaults,
)

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


async def authorized_tools(client: AsyncClient) -> None:
    """Every auth/* scenario: connect, list the tools, call test-tool; the transport's OAuth provider
    answers the 401 (and a 403 insufficient_scope) on the way."""
    await client.connect()
    tools = {tool.name for tool in await client.tools()}
    if "test-tool" in tools:
        print((await client.call_tool("test-tool")).text)


async def request_metadata(client: AsyncClient) -> None:
    """Connect (auto mode: server/discover, probed again with a revision the server names if it
    refuses the first) and list the tools; every request carries the envelope."""
    await client.connect()
    print(sorted(tool.name for tool in await client.tools()))


async def request_state(client: AsyncClient) -> None:
    """input_required rounds (SEP-2322): the elicitation handler answers, the driver re-issues
    with the state echoed exactly (or none when none was given); an unrelated call in between."""
    client.on_elicitation(lambda params: {"action": "accept", "content": {"confirmed": True}})
    await client.connect()
    await client.tools()
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state",
                 "test_mrtr_no_result_type"):
        print((await client.call_tool(name)).text)


def sample_arguments(schema: dict) -> dict:
    """Arguments for a tool the scenario lets the client call freely: each required property
    with a value of its type."""
    samples = {"string": "x", "number": 1, "integer": 1, "boolean": True, "array": [], "object": {}}
    properties = schema.get("properties") or {}
    return {name: samples.get((properties.get(name) or {}).get("type"), "x")
            for name in schema.get("required") or []}


async def every_feature(client: AsyncClient) -> None:
    """Call every tool listed (tools with invalid x-mcp-header declarations are left out of the
    list), read every resource and get every prompt: each request with its standard headers."""
    await client.connect()
    for tool in await client.tools():
        await client.call_tool(tool=tool, arguments=sample_arguments(tool.input_schema or {}))
    capabilities = client.server_capabilities
    if "resources" in capabilities:
        for resource in await client.resources():
            await client.read_resource(resource.uri)
    if "prompts" in capabilities:
        for prompt in await client.prompts():
            await client.get_prompt(prompt.name, {a["name"]: "x" for a in prompt.arguments or []
                                                  if a.get("required")})


async def custom_headers(client: AsyncClient) -> None:
    """The calls the scenario names (MCP_CONFORMANCE_CONTEXT ``toolCalls``), after listing the
    tools: their x-mcp-header arguments go into Mcp-Param-* headers."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    await client.connect()
    await client.tools()
    for call in context.get("toolCalls") or []:
        await client.call_tool(call["name"], call.get("arguments") or {})


async def schema_preservation(client: AsyncClient) -> None:
    """Send the rich inputSchema of one tool back, verbatim, through the tool that echoes it."""
    await client.connect()
    tools = await client.tools()
    echo = next(tool for tool in tools if "schema" in ((tool.input_schema or {}).get("properties") or {}))
    for tool in tools:
        if tool is not echo:
            await client.call_tool(tool=echo, arguments={"schema": tool.input_schema})


CIMD_URL = "https://conformance-test.local/client-metadata.json"  # what auth/basic-cimd expects
REDIRECT_URI = "http://localhost:3000/callback"


class HeadlessBrowser:
    """The user at the browser: GET the authorization URL (the suite's AS approves at once and
    redirects), and read code, state and iss from the redirect's Location."""

    def __init__(self) -> None:
        self.answer: tuple[str | None, str | None, str | None] | None = None

    async def redirect(self, url: str) -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as http:
            response = await http.get(url)
        location = response.headers.get("location")
        if not location:
            raise AuthorizationError(f"the authorization endpoint answered {response.status_code} "
                                     "without redirecting back")
        query = parse_qs(urlsplit(location).query)
        first = lambda name: (query.get(name) or [None])[0]  # noqa: E731
        self.answer = (first("code"), first("state"), first("iss"))

    async def callback(self) -> tuple[str | None, str | None, str | None]:
        if self.answer is None:
            raise AuthorizationError("no redirect came back")
        answer, self.answer = self.answer, None
        return answer


def oauth_provider(name: str, context: dict) -> object:
    """The provider a scenario calls for, from the suite's context."""
    if name == "auth/client-credentials-jwt":
        return ClientCredentialsProvider(client_id=context["client_id"],
                                         private_key=context["private_key_pem"],
                                         signing_algorithm=context.get("signing_algorithm", "ES256"))
    if name == "auth/client-credentials-basic":
        return ClientCredentialsProvider(client_id=context["client_id"],
                                         client_secret=context["client_secret"])
    if name in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        exchange = IDJAGTokenExchange(token_endpoint=context["idp_token_endpoint"],
                                      client_id=context["idp_client_id"], id_token=context["idp_id_token"])
        return CrossAppAccessProvider(client_id=context["client_id"],
                                      client_secret=context["client_secret"], assertion_provider=exchange)
    if name == "auth/wif-jwt-bearer":
        return WorkloadIdentityProvider(client_id=context.get("client_id"),
                                        assertion_provider=lambda **_: context["valid_jwt"])
    browser = HeadlessBrowser()
    preregistered = {key: context[key] for key in ("client_id", "client_secret") if key in context}
    return Provider(client_metadata={"client_name": CLIENT_INFO["name"], "redirect_uris": [REDIRECT_URI]},
                    redirect_handler=browser.redirect, callback_handler=browser.callback,
                    client_id_metadata_document_url=CIMD_URL,
                    client_information=preregistered or None)


SCENARIOS: dict[str, Callable[[AsyncClient], Awaitable[None]]] = {
    "initialize": initialize,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
    "request-metadata": request_metadata,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": every_feature,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": every_feature,
    "json-schema-ref-no-deref": request_metadata,
    "json-schema-2020-12-preservation": schema_preservation,
    **{name: authorized_tools for name in scenarios.AUTH},
}


async def run(scenario: Callable[[AsyncClient], Awaitable[None]], url: str, name: str = "") -> None:
    oauth = None
    if name.startswith("auth/"):
        oauth = oauth_provider(name, json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"))
    client = AsyncClient(HTTPTransport(url, timeout=TIMEOUT, oauth=oauth), client_info=CLIENT_INFO)
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
        asyncio.run(run(scenario, argv[-1], name))
    except (ClientError, TimeoutError) as exc:
        print(f"conformance client: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
