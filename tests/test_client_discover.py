"""``discover()`` and what the client remembers for ``Mcp-Param-*`` mirroring: its typed answer,
the answers it refuses, the cap on remembered tools and the integers it leaves to the body."""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_client import DiscoverResult, ValidationError
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
