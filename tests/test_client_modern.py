"""``AsyncClient`` in the 2026-07-28 lifecycle: the connect modes, the envelope and standard headers
of every request, ``x-mcp-header`` mirroring, over HTTP in process (the ASGI application of our
server called through httpx) and over stdio (``manage.py mcp_stdio`` as a subprocess). Every
message in both directions is checked against the schema of the revision it speaks."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from mcp_client import AsyncClient, Client, ClientError, InputRequiredError, ServerError
from mcp_server import Configuration
from mcp_server.http import StreamableHTTPTransport

from .client_support import CheckedHTTPTransport, our_stdio, script_stdio
from .modern_support import MODERN
from .test_modern_http import build_server, short_lived_connections  # noqa: F401

ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion"


def client_over(app, recorded: list[httpx.Request]) -> AsyncClient:
    async def record(request: httpx.Request) -> None:
        recorded.append(request)

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), event_hooks={"request": [record]})

    return AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory))


@pytest.fixture
async def served(short_lived_connections):  # noqa: F811
    transports = []

    def serve(**options) -> object:
        server, _ = build_server(configuration=Configuration(**options)) if options else build_server()
        transports.append(StreamableHTTPTransport(server))
        return transports[-1].as_asgi()

    yield serve
    for transport in transports:
        await transport.close()


@pytest.mark.feature("CLI-02", "CLI-08", "CLI-14", "CLI-15", "CLI-16")
async def test_auto_mode_adopts_the_modern_lifecycle_and_every_request_carries_it(served):
    recorded: list[httpx.Request] = []
    client = client_over(served(), recorded)
    # No mode is auto mode.
    result = await client.connect(client_info={"name": "t", "version": "1"})
    assert client.is_modern and client.protocol_version == MODERN == result["protocolVersion"]
    assert client.server_implementation == {"name": "modern", "version": "2.0"}
    assert client.instructions == "Use echo."
    assert client.server_capabilities["tools"] == {"listChanged": True}
    tools = {tool.name for tool in await client.tools()}
    assert {"echo", "query"} <= tools
    assert (await client.call_tool("echo", {"message": "hé"})).text == "hé"
    # x-mcp-header arguments go into Mcp-Param-* headers; the server checks they match the body.
    assert (await client.call_tool("query", {"query": "q", "region": "us-west1", "limit": 42})).text == "q"
    sent = [json.loads(request.content) for request in recorded]
    assert [message["method"] for message in sent] == ["server/discover", "tools/list", "tools/call",
                                                        "tools/call"]
    for request, message in zip(recorded, sent, strict=True):
        meta = message["params"]["_meta"]
        assert meta[ENVELOPE_VERSION] == MODERN
        assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "t", "version": "1"}
        assert request.headers["mcp-protocol-version"] == MODERN
        assert request.headers["mcp-method"] == message["method"]
        assert "mcp-session-id" not in request.headers
    assert recorded[2].headers["mcp-name"] == "echo"
    assert (recorded[3].headers["mcp-param-region"], recorded[3].headers["mcp-param-limit"]) == \
        ("us-west1", "42")
    # A refused request reaches the caller as the server's JSON-RPC error.
    with pytest.raises(ServerError) as refused:
        await client.call_tool("no-such-tool", {})
    assert refused.value.code == -32602
    await client.close()
    assert not client.connected and not client.is_modern


@pytest.mark.feature("CLI-02", "CLI-04")
async def test_legacy_mode_and_a_pinned_handshake_revision_never_probe(served):
    app = served()
    for options in ({"mode": "legacy"}, {"protocol_version": "2025-11-25"},
                    {"mode": "auto", "protocol_version": "2025-06-18"}):
        recorded: list[httpx.Request] = []
        client = client_over(app, recorded)
        result = await client.connect(**options)
        assert not client.is_modern and result["protocolVersion"] in ("2025-11-25", "2025-06-18")
        assert json.loads(recorded[0].content)["method"] == "initialize"
        assert client.server_implementation["name"] == "modern" and client.instructions == "Use echo."
        assert (await client.call_tool("echo", {"message": "x"})).text == "x"
        assert "_meta" not in json.loads(recorded[-1].content)["params"]
        await client.close()


@pytest.mark.feature("CLI-04")
async def test_modes_and_pins_that_contradict_each_other_are_refused(served):
    client = client_over(served(), [])
    for options, words in (({"mode": "sideways"}, "mode must be"),
                           ({"mode": "modern", "protocol_version": "2025-11-25"}, "handshake revision"),
                           ({"mode": "legacy", "protocol_version": MODERN}, "not a handshake"),
                           ({"protocol_version": "2031-01-01"}, "neither a handshake")):
        with pytest.raises(ValueError, match=words):
            await client.connect(**options)
    result = await client.connect(protocol_version=MODERN)
    assert client.is_modern and result["protocolVersion"] == MODERN
    await client.close()


def legacy_only_server(request: httpx.Request) -> httpx.Response:
    """A handshake-era server of another SDK: no server/discover without a session."""
    if request.method == "DELETE":
        return httpx.Response(204)
    message = json.loads(request.content)
    if message.get("method") == "server/discover":
        return httpx.Response(400, json={"jsonrpc": "2.0", "id": None,
                                         "error": {"code": -32600, "message": "Missing session ID"}})
    if message.get("method") == "initialize":
        return httpx.Response(200, headers={"mcp-session-id": "s1"}, json={
            "jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "old", "version": "1"}}})
    if message.get("method") == "tools/list":
        assert request.headers["mcp-session-id"] == "s1"
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
    return httpx.Response(202)


def fake_client(handler, cls=AsyncClient) -> AsyncClient:
    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    return cls(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory,
                                    check_server=False))


@pytest.mark.feature("CLI-02", "CLI-04")
async def test_auto_mode_falls_back_to_initialize_and_modern_mode_refuses():
    client = fake_client(legacy_only_server)
    result = await client.connect(mode="auto")
    assert not client.is_modern and result["protocolVersion"] == "2025-11-25"
    assert client.server_implementation == {"name": "old", "version": "1"}
    assert (await client.list_tools()).items == []
    await client.close()
    with pytest.raises(ClientError, match="does not speak the 2026-07-28 lifecycle"):
        await client.connect(mode="modern")
    assert not client.connected


BAD_HEADERS = {"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "A"}}}
GOOD_HEADERS = {"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}

def modern_fake(request: httpx.Request) -> httpx.Response:
    message = json.loads(request.content)
    result: dict = {"resultType": "complete"}
    if message["method"] == "server/discover":
        result.update(supportedVersions=[MODERN], capabilities={"tools": {}},
                      _meta={"io.modelcontextprotocol/serverInfo": {"name": "f", "version": "1"}})
    elif message["params"].get("name") == "asks":
        result.update(resultType="input_required", inputRequests={"r1": {
            "method": "roots/list", "params": {}}})
    elif message["method"] == "tools/list":
        result["tools"] = [{"name": "bad", "inputSchema": BAD_HEADERS},
                           {"name": "good", "inputSchema": GOOD_HEADERS}]
    else:
        assert request.headers["mcp-param-b"] == "=?base64?" + "w6k=" + "?="
        result["content"] = [{"type": "text", "text": "ok"}]
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})



@pytest.mark.feature("CLI-14")
async def test_tools_with_invalid_x_mcp_header_declarations_are_left_out(caplog):
    client = fake_client(modern_fake)
    await client.connect(mode="modern")
    with caplog.at_level(logging.WARNING, logger="mcp_client"):
        assert [tool.name for tool in await client.tools()] == ["good"]
    assert "leaving out tool 'bad'" in caplog.text
    assert (await client.call_tool("good", {"b": "é"})).text == "ok"
    # No roots handler is registered: the caller is told, with the requests, to answer them.
    with pytest.raises(InputRequiredError, match="input_required") as needs:
        await client.call_tool("asks", {})
    assert needs.value.result["inputRequests"]["r1"]["method"] == "roots/list"
    await client.close()


@pytest.mark.feature("CLI-02", "CSTDIO-03")
@pytest.mark.parametrize("mode", ["auto", "modern"])
async def test_over_stdio_the_modern_lifecycle_is_adopted(mode):
    transport = our_stdio()
    client = AsyncClient(transport)
    result = await client.connect(mode=mode)
    assert client.is_modern and result["protocolVersion"] == MODERN
    assert client.server_implementation["name"]
    assert "echo" in {tool.name for tool in await client.tools()}
    assert transport.wire.sent[0]["method"] == "server/discover"
    assert all(message["params"]["_meta"][ENVELOPE_VERSION] == MODERN for message in transport.wire.sent)
    await client.close()


SILENT_ON_DISCOVER = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "serverInfo": {"name": "silent", "version": "1"}}}), flush=True)
"""


@pytest.mark.feature("CLI-02", "CSTDIO-03")
async def test_a_stdio_server_silent_on_discover_gets_the_handshake_after_the_bound():
    transport = script_stdio(SILENT_ON_DISCOVER)
    client = AsyncClient(transport)
    client.discover_timeout = 0.5  # the 5 s default, shortened for the test
    result = await client.connect(mode="auto")
    assert not client.is_modern and result["serverInfo"]["name"] == "silent"
    assert [message["method"] for message in transport.wire.sent] == [
        "server/discover", "initialize", "notifications/initialized"]
    await client.close()


LATE_ON_DISCOVER = r"""
import json, sys
discover = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "late", "version": "1"}}}
held = None
def say(message):
    print(json.dumps({"jsonrpc": "2.0", **message}), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "server/discover" and held is None:
        held = message  # answered only once the client has given up on it and sent initialize
    elif message.get("method") == "initialize":
        say({"id": held["id"], "result": discover})
        say({"id": message["id"], "error": {"code": -32601, "message": "this connection uses 2026-07-28"}})
    elif message.get("method") == "server/discover":
        say({"id": message["id"], "result": discover})
    elif "id" in message:
        say({"id": message["id"], "result": {"resultType": "complete", "tools": []}})
"""


@pytest.mark.feature("CLI-02", "CSTDIO-03")
async def test_a_server_that_answers_the_probe_late_is_followed_into_the_modern_lifecycle():
    """A stdio server slower to start than the probe's bound: it answers the timed-out probe late,
    takes the 2026-07-28 lifecycle and refuses initialize; the client probes again and follows."""
    transport = script_stdio(LATE_ON_DISCOVER)
    client = AsyncClient(transport)
    client.discover_timeout = 0.5  # the 5 s default, shortened for the test
    result = await client.connect()
    assert client.is_modern and result["serverInfo"] == {"name": "late", "version": "1"}
    assert transport.wire.methods_sent() == ["server/discover", "initialize", "server/discover"]
    assert (await client.list_tools()).items == []
    await client.close()


@pytest.mark.feature("CLI-04", "CLI-08")
def test_the_blocking_client_connects_in_either_mode():
    client = fake_client(modern_fake, Client)
    try:
        assert client.connect(mode="modern")["serverInfo"] == {"name": "f", "version": "1"}
        assert client.is_modern and client.protocol_version == MODERN
    finally:
        client.shutdown()
    client = fake_client(legacy_only_server, Client)
    try:
        client.connect(mode="auto")
        assert not client.is_modern and client.protocol_version == "2025-11-25"
    finally:
        client.shutdown()


def garbage_on_discover(answer):
    """A handshake-era server (``legacy_only_server``) whose discover answer is ``answer``."""
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and json.loads(request.content).get("method") == "server/discover":
            return answer(json.loads(request.content))
        return legacy_only_server(request)

    return handle


@pytest.mark.feature("CLI-02", "CLI-04")
async def test_a_server_answering_discover_with_garbage_gets_a_clear_error_or_the_handshake():
    # A result that names no revision: auto mode falls back to initialize; modern mode refuses.
    for result in ("garbage", {"supportedVersions": "2026-07-28"}, [1, 2]):
        handler = garbage_on_discover(lambda message, result=result: httpx.Response(
            200, json={"jsonrpc": "2.0", "id": message["id"], "result": result}))
        client = fake_client(handler)
        await client.connect()
        assert not client.is_modern and client.server_implementation == {"name": "old", "version": "1"}
        await client.close()
        with pytest.raises(ClientError, match="supports none of the client's modern revisions"):
            await client.connect(mode="modern")
    # Our revision, but no capabilities: not a usable connection, said so.
    client = fake_client(garbage_on_discover(lambda message: httpx.Response(
        200, json={"jsonrpc": "2.0", "id": message["id"], "result": {"supportedVersions": [MODERN]}})))
    with pytest.raises(ClientError, match="server/discover result is not usable"):
        await client.connect()
    assert not client.connected
    # Bytes that are not JSON-RPC at all: a transport error naming them, and nothing left open.
    client = fake_client(garbage_on_discover(lambda message: httpx.Response(
        200, content=b"<html>not mcp</html>", headers={"content-type": "text/html"})))
    with pytest.raises(ClientError, match="not JSON"):
        await client.connect()
    assert not client.connected and not client.is_modern
