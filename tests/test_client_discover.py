"""``discover()`` and what the client remembers for ``Mcp-Param-*`` mirroring: its typed answer,
the answers it refuses, the cap on remembered tools and the integers it leaves to the body."""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_client import Client, DiscoverResult, ValidationError
from mcp_client.async_client import MAX_REMEMBERED_TOOLS

from .modern_support import MODERN
from .test_client_modern import client_over, fake_client, served  # noqa: F401
from .test_modern_http import short_lived_connections  # noqa: F401


@pytest.mark.feature("CLI-09")
async def test_discover_answers_what_the_server_offers(served):  # noqa: F811
    recorded: list[httpx.Request] = []
    client = client_over(served(), recorded)
    await client.connect()
    found = await client.discover()
    assert isinstance(found, DiscoverResult)
    assert MODERN in found.supported_versions
    assert found.server_info == {"name": "modern", "version": "2.0"}
    assert found.instructions == "Use echo." and found.capabilities == client.server_capabilities
    assert isinstance(found.ttl_ms, int) and found.cache_scope in ("private", "public")
    assert json.loads(recorded[-1].content)["method"] == "server/discover"
    await client.close()


@pytest.mark.feature("CLI-09")
def test_a_discover_answer_is_read_strictly_and_a_top_level_server_info_is_accepted():
    for bad in (None, [], "x", {"capabilities": {}}, {"supportedVersions": [MODERN], "capabilities": []}):
        with pytest.raises(ValidationError, match="server/discover result"):
            DiscoverResult.from_wire(bad)
    found = DiscoverResult.from_wire({"supportedVersions": [MODERN], "capabilities": {},
                                      "serverInfo": {"name": "top", "version": "1"}})
    assert found.server_info == {"name": "top", "version": "1"} and found.ttl_ms is None


def many_tools_server(count: int, seen: list[httpx.Request]):
    header = {"type": "object", "properties": {"id": {"type": "integer", "x-mcp-header": "Id"}}}

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        message = json.loads(request.content)
        result: dict = {"resultType": "complete"}
        if message["method"] == "server/discover":
            result.update(supportedVersions=[MODERN], capabilities={"tools": {}}, ttlMs=0,
                          cacheScope="private")
        elif message["method"] == "tools/list":
            result["tools"] = [{"name": f"t{number}", "inputSchema": header} for number in range(count)]
        elif message["method"] == "tools/call":
            result["content"] = [{"type": "text", "text": "ok"}]
        else:
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"],
                                             "error": {"code": -32601, "message": "Method not found"}})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    return handle


@pytest.mark.feature("CLI-15")
async def test_at_most_1000_tools_are_remembered_and_unsafe_integers_are_not_mirrored():
    seen: list[httpx.Request] = []
    client = fake_client(many_tools_server(MAX_REMEMBERED_TOOLS + 5, seen))
    await client.connect()
    assert len(await client.tools()) == MAX_REMEMBERED_TOOLS + 5
    remembered = client._wire.tool_param_headers
    assert len(remembered) == MAX_REMEMBERED_TOOLS and "t0" not in remembered and "t1004" in remembered
    await client.call_tool("t1004", {"id": 2**53 - 1})
    assert seen[-1].headers["mcp-param-id"] == str(2**53 - 1)
    await client.call_tool("t1004", {"id": 2**53})
    assert "mcp-param-id" not in seen[-1].headers
    await client.call_tool("t0", {"id": 7})  # forgotten: no header, the body alone
    assert "mcp-param-id" not in seen[-1].headers
    await client.close()


def hinted_server(request: httpx.Request) -> httpx.Response:
    """A 2026-07-28 server whose lists carry cache hints: valid ones, none, and ones the revision
    does not allow."""
    message = json.loads(request.content)
    result: dict = {"resultType": "complete"}
    method = message["method"]
    if method == "server/discover":
        result.update(supportedVersions=[MODERN], capabilities={"tools": {}, "prompts": {}, "resources": {}},
                      ttlMs=30000, cacheScope="public")
    elif method == "tools/list":
        result.update(tools=[], ttlMs=60000, cacheScope="public")
    elif method == "prompts/list":
        result.update(prompts=[])
    elif method == "resources/list":
        result.update(resources=[], ttlMs=-1, cacheScope="shared")
    else:
        result.update(resourceTemplates=[], ttlMs=True, cacheScope="private")
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})


@pytest.mark.feature("CACHE-06")
async def test_the_async_client_surfaces_cache_hints_on_every_list_page_and_on_discover():
    client = fake_client(hinted_server)
    await client.connect(mode="modern")
    try:
        found = await client.discover()
        assert (found.ttl_ms, found.cache_scope) == (30000, "public")
        pages = [await client.list_tools(), await client.list_prompts(), await client.list_resources(),
                 await client.list_resource_templates()]
        assert [(page.ttl_ms, page.cache_scope) for page in pages] == \
            [(60000, "public"), (None, None), (None, None), (None, "private")]
    finally:
        await client.close()


@pytest.mark.feature("CACHE-06")
def test_the_blocking_client_surfaces_the_same_hints():
    client = fake_client(hinted_server, cls=Client)
    client.connect(mode="modern")
    try:
        assert (client.discover().ttl_ms, client.list_tools().cache_scope) == (30000, "public")
        assert client.list_resources().ttl_ms is None and client.list_prompts().cache_scope is None
    finally:
        client.close()


@pytest.mark.feature("TRACE-03")
async def test_discover_merges_meta_into_the_request_beside_the_envelope(served):  # noqa: F811
    recorded: list[httpx.Request] = []
    client = client_over(served(), recorded)
    await client.connect(mode="modern")
    try:
        given = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        await client.discover(meta=given)
        sent = json.loads(recorded[-1].content)
        assert sent["method"] == "server/discover"
        assert sent["params"]["_meta"]["traceparent"] == given["traceparent"]
        assert sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert given == {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    finally:
        await client.close()
