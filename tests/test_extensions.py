"""Capability extensions and the MCP Apps helpers on the server, handshake era (EXT, APPS)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_server import Apps, Capabilities, Resource, Server, ServerContext, ServerSession

from .harness import InProcessClient

REVISIONS = ["2025-11-25", "2024-11-05"]
UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp_apps.md"


# Server extensions -------------------------------------------------------------------------
@pytest.mark.feature("EXT-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_server_extensions_appear_in_initialize(make_client, revision):
    capabilities = (
        Capabilities().support_tools()
        .support_extensions({"com.example/feature": {}})
        .support_extensions(Apps.capability())
        .support_extensions({"org.example.search/v2": {"maxResults": 50}})
    )
    client = InProcessClient(Server("ext", capabilities=capabilities), revision)
    result = client.initialize()
    assert result["capabilities"] == {
        "tools": {},
        "extensions": {
            "com.example/feature": {},
            UI: {"mimeTypes": [APP_MIME]},
            "org.example.search/v2": {"maxResults": 50},
        },
    }


@pytest.mark.feature("EXT-01")
def test_server_extensions_from_a_dict():
    capabilities = {"tools": {}, "extensions": {"com.example/feature": {}}}
    server = Server("ext", capabilities=capabilities)
    capabilities["extensions"]["com.example/later"] = {}  # the server keeps its own copy
    result = InProcessClient(server).initialize()
    assert result["capabilities"]["extensions"] == {"com.example/feature": {}}
    result = InProcessClient(Server("ext", capabilities={"tools": {}})).initialize()
    assert "extensions" not in result["capabilities"], "no extensions unless declared"


# Client extensions -------------------------------------------------------------------------
class SessionServer:
    def __init__(self, server: Server, session: ServerSession):
        self.server, self.session = server, session

    def handle(self, payload: Any) -> Any:
        return async_to_sync(self.server.handle_async)(payload, self.session)


@pytest.mark.feature("EXT-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_client_extensions_are_visible_on_the_server(make_client, revision):
    declared = {"com.example/feature": {}, UI: {"mimeTypes": [APP_MIME]}}
    seen: list[Any] = []
    server = Server("ext")

    @server.tool
    def inspect_client(server_context: ServerContext) -> str:
        seen.append(server_context.client_capabilities["extensions"])
        seen.append(server_context.session.client_capabilities["extensions"])
        return "ok"

    client = make_client(server, revision=revision,
                         capabilities={"roots": {"listChanged": True}, "extensions": declared})
    assert server.client_capabilities["extensions"] == declared
    assert server.session.client_capabilities["extensions"] == declared
    client.result("tools/call", {"name": "inspect_client", "arguments": {}})
    assert seen == [declared, declared]


@pytest.mark.feature("EXT-02")
def test_each_session_sees_its_own_client_extensions():
    server = Server("ext")
    sessions = [ServerSession(server), ServerSession(server)]
    InProcessClient(SessionServer(server, sessions[0])).initialize(
        capabilities={"extensions": {"com.example/a": {}}})
    InProcessClient(SessionServer(server, sessions[1])).initialize(capabilities={})
    assert sessions[0].client_capabilities["extensions"] == {"com.example/a": {}}
    assert "extensions" not in sessions[1].client_capabilities
    assert Apps.client_supports(sessions[1].client_capabilities) is False


# Apps helpers ------------------------------------------------------------------------------
@pytest.mark.feature("APPS-01")
def test_apps_capability():
    assert Apps.capability() == {UI: {"mimeTypes": [APP_MIME]}}
    assert Apps.capability(mime_types=["text/html;profile=mcp-app", "text/x-other"]) == {
        UI: {"mimeTypes": ["text/html;profile=mcp-app", "text/x-other"]}}
    assert Apps.EXTENSION_ID == UI and Apps.RESOURCE_MIME_TYPE == APP_MIME
    first = Apps.capability()
    first[UI]["mimeTypes"].append("changed")
    assert Apps.capability() == {UI: {"mimeTypes": [APP_MIME]}}, "each call is a fresh dict"


@pytest.mark.feature("APPS-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_ui_resource(make_client, revision):
    listed = Apps.ui_resource("ui://dashboard/main.html", "dashboard", title="Dashboard",
                              description="The main dashboard", meta={"ui": {"prefersBorder": True}})
    assert isinstance(listed, Resource)
    assert listed.mime_type == APP_MIME
    assert listed.readable is False
    served = Apps.ui_resource("ui://dashboard/served.html", "served", handler=lambda: "<p>hi</p>")
    client = make_client(Server("apps", resources=[listed, served]), revision=revision)
    assert client.result("resources/list")["resources"] == [
        {"uri": "ui://dashboard/main.html", "name": "dashboard", "title": "Dashboard",
         "description": "The main dashboard", "mimeType": APP_MIME, "_meta": {"ui": {"prefersBorder": True}}},
        {"uri": "ui://dashboard/served.html", "name": "served", "mimeType": APP_MIME},
    ]
    assert client.result("resources/read", {"uri": "ui://dashboard/served.html"}) == {"contents": [
        {"uri": "ui://dashboard/served.html", "mimeType": APP_MIME, "text": "<p>hi</p>"}]}


@pytest.mark.feature("APPS-02")
@pytest.mark.parametrize("uri", ["https://example.com/app.html", "file:///app.html", "ui:/x", "ui//x",
                                 "", None, 7])
def test_ui_resource_needs_a_ui_uri(uri):
    with pytest.raises(ValueError, match="ui://"):
        Apps.ui_resource(uri, "app")


@pytest.mark.feature("APPS-03")
def test_tool_meta():
    assert Apps.tool_meta("ui://weather/card") == {"ui": {"resourceUri": "ui://weather/card"}}
    assert Apps.tool_meta("ui://weather/card", visibility=["model", "app"]) == {
        "ui": {"resourceUri": "ui://weather/card", "visibility": ["model", "app"]}}
    assert Apps.tool_meta("ui://weather/card", visibility=["app"], legacy=True) == {
        "ui": {"resourceUri": "ui://weather/card", "visibility": ["app"]},
        "ui/resourceUri": "ui://weather/card",
    }
    given = {"com.example/owner": "weather-team", "ui": {"prefersBorder": False}}
    merged = Apps.tool_meta("ui://weather/card", meta=given)
    assert merged == {"com.example/owner": "weather-team",
                      "ui": {"prefersBorder": False, "resourceUri": "ui://weather/card"}}
    assert given == {"com.example/owner": "weather-team", "ui": {"prefersBorder": False}}, (
        "the given meta is not changed")


@pytest.mark.feature("APPS-03")
@pytest.mark.parametrize("uri", ["https://example.com/card", "card", "", None])
def test_tool_meta_needs_a_ui_uri(uri):
    with pytest.raises(ValueError, match="ui://"):
        Apps.tool_meta(uri)
    with pytest.raises(ValueError, match="ui://"):
        Apps.tool_meta(uri, legacy=True)


@pytest.mark.feature("APPS-03")
def test_tool_meta_visibility_entries():
    with pytest.raises(ValueError, match="visibility"):
        Apps.tool_meta("ui://x", visibility=["user"])


@pytest.mark.feature("APPS-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_tool_meta_on_the_wire(make_client, revision):
    server = Server("apps")
    server.tool(lambda: "ok", name="show", meta=Apps.tool_meta("ui://x/card", legacy=True))
    [tool] = make_client(server, revision=revision).result("tools/list")["tools"]
    assert tool["_meta"] == {"ui": {"resourceUri": "ui://x/card"}, "ui/resourceUri": "ui://x/card"}


@pytest.mark.feature("APPS-04")
@pytest.mark.parametrize(("capabilities", "mime_type", "expected"), [
    ({"extensions": {UI: {}}}, None, True),
    ({"extensions": {UI: {"mimeTypes": [APP_MIME]}}}, None, True),
    ({"extensions": {UI: {"mimeTypes": ["text/x-other", APP_MIME]}}}, None, True),
    ({"extensions": {UI: {"mimeTypes": ["text/x-other"]}}}, None, False),
    ({"extensions": {UI: {"mimeTypes": []}}}, None, False),
    ({"extensions": {UI: {"mimeTypes": ["text/x-other"]}}}, "text/x-other", True),
    ({"extensions": {UI: {}}}, "text/x-other", True),
    ({"extensions": {UI: {"mimeTypes": [APP_MIME]}}}, "text/x-other", False),
    ({"extensions": {"com.example/other": {}}}, None, False),
    ({"extensions": {}}, None, False),
    ({"experimental": {UI: {}}}, None, False),
    ({}, None, False),
    (None, None, False),
])
def test_client_supports(capabilities, mime_type, expected):
    args = () if mime_type is None else (mime_type,)
    assert Apps.client_supports(capabilities, *args) is expected


# The documented example (APPS-05) ----------------------------------------------------------
def documented_example() -> dict[str, Any]:
    """Run the Python code blocks of docs/mcp_apps.md, in order, and return their namespace."""
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.S | re.M)
    assert blocks, "docs/mcp_apps.md has no python example"
    namespace: dict[str, Any] = {"__name__": "mcp_apps_example"}
    exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)
    return namespace


@pytest.mark.feature("APPS-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("extensions", [{UI: {}}, {UI: {"mimeTypes": [APP_MIME]}}],
                         ids=["no-mime-types", "mime-types"])
def test_documented_example_for_an_apps_client(revision, extensions):
    server = documented_example()["server"]
    client = InProcessClient(server, revision)
    initialized = client.initialize(capabilities={"extensions": extensions})
    assert initialized["capabilities"]["extensions"] == {UI: {"mimeTypes": [APP_MIME]}}

    [tool] = client.result("tools/list")["tools"]
    assert tool["name"] == "forecast"
    assert tool["_meta"]["ui"] == {"resourceUri": "ui://weather/forecast-card.html",
                                   "visibility": ["model", "app"]}
    [card] = client.result("resources/list")["resources"]
    assert card["uri"] == "ui://weather/forecast-card.html" and card["mimeType"] == APP_MIME
    [html] = client.result("resources/read", {"uri": card["uri"]})["contents"]
    assert html["mimeType"] == APP_MIME and html["text"].startswith("<!doctype html>")

    result = client.result("tools/call", {"name": "forecast", "arguments": {"city": "Paris"}})
    assert result["content"] == [{"type": "text", "text": "Forecast for Paris: 21 °C, sunny."}]
    assert result["structuredContent"] == {"city": "Paris", "temperature_c": 21, "conditions": "sunny"}
    assert result["isError"] is False


@pytest.mark.feature("APPS-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("capabilities", [
    {}, {"extensions": {}}, {"extensions": {UI: {"mimeTypes": ["text/x-other"]}}},
    {"extensions": {"com.example/other": {}}},
], ids=["nothing", "no-extensions", "other-mime-type", "other-extension"])
def test_documented_example_falls_back_to_text(make_client, revision, capabilities):
    server = documented_example()["server"]
    client = make_client(server, revision=revision, capabilities=capabilities)
    result = client.result("tools/call", {"name": "forecast", "arguments": {"city": "Oslo"}})
    assert result == {"content": [{"type": "text", "text": "Forecast for Oslo: 4 °C, light snow."}],
                      "isError": False}
