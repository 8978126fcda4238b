"""Tools on the server, handshake era: authoring, listing, calling and their failures.

Schema-specific behaviour (input/output schemas, result validation) is in test_tool_schemas.py.
"""

from __future__ import annotations

import base64
import io
import json
import re
from typing import Any

import pytest

from mcp_protocol import CancelledError, MCPError
from mcp_server import (
    Audio,
    BlobContents,
    Configuration,
    ConfigurationError,
    EmbeddedResource,
    Image,
    Server,
    ServerContext,
    StdioTransport,
    Text,
    TextContents,
    Tool,
    ToolResponse,
)

from .harness import REPO
from .wire import check_server_message

# Every feature below exists in both the newest and the oldest handshake revision.
REVISIONS = ["2025-11-25", "2024-11-05"]

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
SUM_SCHEMA = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}},
    "required": ["sum"],
}


def call(client, name: str, arguments: Any = None, meta: dict | None = None) -> dict:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not None:
        params["_meta"] = meta
    return client.request("tools/call", params)


def listed(client) -> dict[str, dict]:
    return {entry["name"]: entry for entry in client.result("tools/list")["tools"]}


class Recorder:
    """An exception reporter that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[BaseException, dict]] = []

    def __call__(self, exc: BaseException, context: dict) -> None:
        self.calls.append((exc, context))


# TOOL-01: one tool written in each authoring style ------------------------------------------------

def _sum_or_fail(a: int, b: int) -> str:
    if a < 0:
        raise RuntimeError("secret: negative a in /srv/app/calc.py")
    return str(a + b)


def class_style(configuration: Configuration | None = None) -> Server:
    class Add(Tool):
        description = "Add two integers."
        input_schema = ADD_SCHEMA

        def call(self, a, b):
            return _sum_or_fail(a, b)

    return Server("calc", tools=[Add], configuration=configuration)


def define_style(configuration: Configuration | None = None) -> Server:
    add = Tool.define(
        lambda arguments: _sum_or_fail(arguments["a"], arguments["b"]),
        name="add", description="Add two integers.", input_schema=ADD_SCHEMA,
    )
    return Server("calc", tools=[add], configuration=configuration)


def server_define_style(configuration: Configuration | None = None) -> Server:
    server = Server("calc", configuration=configuration)

    @server.define_tool(name="add", description="Add two integers.", input_schema=ADD_SCHEMA)
    def add(arguments):
        return _sum_or_fail(arguments["a"], arguments["b"])

    return server


def decorator_style(configuration: Configuration | None = None) -> Server:
    server = Server("calc", configuration=configuration)

    @server.tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return _sum_or_fail(a, b)

    return server


STYLES = [class_style, define_style, server_define_style, decorator_style]


@pytest.mark.feature("TOOL-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_authoring_styles_give_identical_entries_and_calls(make_client, revision):
    observed = []
    for build in STYLES:
        reporter = Recorder()
        client = make_client(build(Configuration(exception_reporter=reporter)), revision)
        answers = [
            call(client, "add", {"a": 2, "b": 3}),
            call(client, "add", {"a": 2}),
            call(client, "add", {"a": "2", "b": 3}),
            call(client, "add", {"a": -1, "b": 3}),
        ]
        observed.append((client.result("tools/list"), answers, len(reporter.calls)))

    first = observed[0]
    assert first[0]["tools"] == [{
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema", **ADD_SCHEMA},
    }]
    ok, missing, invalid, failed = (answer["result"] for answer in first[1])
    assert ok == {"content": [{"type": "text", "text": "5"}], "isError": False}
    assert missing == {"content": [{"type": "text", "text": "Missing required arguments: b"}],
                       "isError": True}
    assert invalid["isError"] is True
    assert invalid["content"][0]["text"].startswith("Invalid arguments: ")
    assert failed == {"content": [{"type": "text", "text": "Internal error occurred"}], "isError": True}
    assert first[2] == 1
    for build, other in zip(STYLES[1:], observed[1:], strict=True):
        assert other == first, build.__name__


@pytest.mark.feature("TOOL-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_authoring_styles_give_identical_structured_results(make_client, revision):
    class Add(Tool):
        description = "Add two integers."
        input_schema = ADD_SCHEMA
        output_schema = SUM_SCHEMA

        def call(self, a, b):
            return {"sum": a + b}

    defined = Tool.define(lambda args: {"sum": args["a"] + args["b"]}, name="add",
                          description="Add two integers.", input_schema=ADD_SCHEMA,
                          output_schema=SUM_SCHEMA)
    on_server = Server("calc")
    on_server.define_tool(lambda args: {"sum": args["a"] + args["b"]}, name="add",
                          description="Add two integers.", input_schema=ADD_SCHEMA,
                          output_schema=SUM_SCHEMA)
    decorated = Server("calc")

    @decorated.tool(output_schema=SUM_SCHEMA)
    async def add(a: int, b: int) -> dict:
        """Add two integers."""
        return {"sum": a + b}

    servers = [Server("calc", tools=[Add]), Server("calc", tools=[defined]), on_server, decorated]
    seen = []
    for server in servers:
        client = make_client(server, revision)
        seen.append((client.result("tools/list"), call(client, "add", {"a": 4, "b": 5})["result"]))
    listing, result = seen[0]
    assert listing["tools"][0]["outputSchema"] == {
        "$schema": "https://json-schema.org/draft/2020-12/schema", **SUM_SCHEMA
    }
    assert result == {"content": [{"type": "text", "text": '{"sum": 9}'}],
                      "structuredContent": {"sum": 9}, "isError": False}
    assert all(other == seen[0] for other in seen[1:])


@pytest.mark.feature("TOOL-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_async_and_plain_handlers_behave_the_same_in_every_style(make_client, revision):
    class Plain(Tool):
        name = "plain_class"

        def call(self, text: str = "x"):
            return text.upper()

    class Async(Tool):
        name = "async_class"

        async def call(self, text: str = "x"):
            return text.upper()

    server = Server("calc", tools=[Plain, Async])
    server.define_tool(lambda args: args["text"].upper(), name="plain_define")

    async def async_define(args):
        return args["text"].upper()

    server.define_tool(async_define, name="async_define")

    @server.tool
    def plain_decorated(text: str) -> str:
        return text.upper()

    @server.tool
    async def async_decorated(text: str) -> str:
        return text.upper()

    client = make_client(server, revision)
    for name in listed(client):
        assert call(client, name, {"text": "hi"})["result"] == {
            "content": [{"type": "text", "text": "HI"}], "isError": False
        }, name


# TOOL-02 / TOOL-03 / TOOL-04: names ---------------------------------------------------------------

@pytest.mark.feature("TOOL-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_name_defaults_to_snake_case_class_name_and_can_be_overridden(make_client, revision):
    class MyTool(Tool):
        pass

    class HTTPFetcher(Tool):
        pass

    class Renamed(Tool):
        name = "custom.name-1"

    class Child(MyTool):
        pass

    assert (MyTool.name, HTTPFetcher.name, Renamed.name, Child.name) == (
        "my_tool", "http_fetcher", "custom.name-1", "child"
    )
    server = Server("names", tools=[MyTool, HTTPFetcher, Renamed, Child])

    @server.tool
    def from_function() -> str:
        return ""

    @server.tool(name="overridden")
    def ignored_name() -> str:
        return ""

    client = make_client(server, revision)
    assert list(listed(client)) == [
        "my_tool", "http_fetcher", "custom.name-1", "child", "from_function", "overridden"
    ]


@pytest.mark.feature("TOOL-03")
@pytest.mark.parametrize("name", [
    "", "a" * 129, "has space", "slash/name", "colon:name", "comma,name", "ünïcode", "emoji😀",
    "new\nline", 42, None,
])
def test_invalid_names_raise_at_definition_time(name):
    if name:  # an empty class name falls back to the class's own name
        with pytest.raises(ValueError, match="invalid tool name"):
            type("Bad", (Tool,), {"name": name})
    with pytest.raises(ValueError, match="invalid tool name"):
        Tool.define(lambda a: "", name=name)
    server = Server("names")
    with pytest.raises(ValueError, match="invalid tool name"):
        server.define_tool(lambda a: "", name=name)
    if name:  # an empty name given to the decorator means "the function's name"

        def well_named() -> str:
            return ""

        with pytest.raises(ValueError, match=re.escape(f"invalid tool name {name!r}")):
            server.tool(name=name)(well_named)
    assert server.tools == {}


@pytest.mark.feature("TOOL-03")
def test_invalid_class_names_raise_when_the_class_is_defined():
    with pytest.raises(ValueError, match="invalid tool name"):
        class Bad(Tool):  # defining it is the test
            name = "no spaces allowed"
    with pytest.raises(ValueError, match="invalid tool name"):
        type("Longest", (Tool,), {"name": "x" * 129})


@pytest.mark.feature("TOOL-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_valid_names_at_the_limits_are_accepted(make_client, revision):
    longest = "x" * 128
    server = Server("names", tools=[
        Tool.define(lambda a: "", name="a"),
        Tool.define(lambda a: "", name=longest),
        Tool.define(lambda a: "", name="Az09_.-"),
    ])
    client = make_client(server, revision)
    assert list(listed(client)) == ["a", longest, "Az09_.-"]


@pytest.mark.feature("TOOL-04")
def test_duplicate_names_at_construction_raise_listing_the_duplicates():
    class Echo(Tool):
        pass

    class Other(Tool):
        name = "echo"

    with pytest.raises(ValueError) as raised:
        Server("dupes", tools=[
            Echo, Other, Tool.define(lambda a: "", name="sum"),
            Tool.define(lambda a: "", name="sum"), Tool.define(lambda a: "", name="unique"),
        ])
    message = str(raised.value)
    assert "echo" in message and "sum" in message and "unique" not in message


@pytest.mark.feature("TOOL-04")
def test_a_duplicate_added_later_raises_and_keeps_the_first():
    first = Tool.define(lambda a: "first", name="same")
    server = Server("dupes", tools=[first])
    with pytest.raises(ValueError, match="same"):
        server.define_tool(lambda a: "second", name="same")
    with pytest.raises(ValueError, match="same"):
        server.tool(name="same")(lambda: "third")
    assert server.tools["same"] is first


# TOOL-05 / TOOL-06 / TOOL-07 / TOOL-23: the tools/list entry --------------------------------------

ICONS = [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"],
          "theme": "dark"}]


@pytest.mark.feature("TOOL-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_list_entry_carries_every_field_and_the_schema_dialect(make_client, revision):
    class Full(Tool):
        name = "full"
        title = "Full tool"
        description = "Every field set"
        icons = ICONS
        input_schema = {"properties": {"q": {"type": "string"}}, "required": ["q"]}
        output_schema = {"properties": {"n": {"type": "integer"}}}
        annotations = {"read_only_hint": True}
        meta = {"com.example/owner": "team-a"}

        def call(self, q):
            return {"n": len(q)}

    minimal = Tool.define(lambda a: "", name="minimal")
    given_dialect = Tool.define(lambda a: "", name="dialect", input_schema={
        "$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object",
    })
    client = make_client(Server("entries", tools=[Full, minimal, given_dialect]), revision)
    entries = listed(client)
    draft = "https://json-schema.org/draft/2020-12/schema"
    assert entries["full"] == {
        "name": "full",
        "title": "Full tool",
        "description": "Every field set",
        "icons": ICONS,
        "inputSchema": {"$schema": draft, "type": "object",
                        "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "outputSchema": {"$schema": draft, "type": "object", "properties": {"n": {"type": "integer"}}},
        "annotations": {"readOnlyHint": True, "destructiveHint": True, "idempotentHint": False,
                        "openWorldHint": True},
        "_meta": {"com.example/owner": "team-a"},
    }
    # Unset optional fields are omitted, never null.
    assert entries["minimal"] == {"name": "minimal", "inputSchema": {"$schema": draft, "type": "object"}}
    assert entries["dialect"]["inputSchema"]["$schema"] == "https://json-schema.org/draft/2019-09/schema"


@pytest.mark.feature("TOOL-06")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-03-26"])  # annotations exist since 2025-03-26
def test_annotations_become_camel_case_with_unset_hints_defaulted(make_client, revision):
    every = Tool.define(lambda a: "", name="every", annotations={
        "title": "Every hint", "read_only_hint": True, "destructive_hint": False,
        "idempotent_hint": True, "open_world_hint": False,
    })
    one = Tool.define(lambda a: "", name="one", annotations={"idempotent_hint": True})
    camel = Tool.define(lambda a: "", name="camel", annotations={"readOnlyHint": True})
    titled = Tool.define(lambda a: "", name="titled", annotations={"title": "Only a title"})
    plain = Tool.define(lambda a: "", name="plain")
    client = make_client(Server("hints", tools=[every, one, camel, titled, plain]), revision)
    entries = listed(client)
    defaults = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                "openWorldHint": True}
    assert entries["every"]["annotations"] == {
        "title": "Every hint", "readOnlyHint": True, "destructiveHint": False,
        "idempotentHint": True, "openWorldHint": False,
    }
    assert entries["one"]["annotations"] == {**defaults, "idempotentHint": True}
    assert entries["camel"]["annotations"] == {**defaults, "readOnlyHint": True}
    assert entries["titled"]["annotations"] == {**defaults, "title": "Only a title"}
    assert "annotations" not in entries["plain"]


@pytest.mark.feature("TOOL-06")
@pytest.mark.parametrize("annotations", [
    {"read_only": True}, {"read_only_hint": "yes"}, {"destructive_hint": 1}, ["read_only_hint"],
])
def test_unknown_or_non_boolean_annotations_raise(annotations):
    with pytest.raises(ValueError):
        Tool.define(lambda a: "", name="bad", annotations=annotations)


@pytest.mark.feature("TOOL-07")
def test_annotations_with_a_2024_11_05_pin_raise_at_construction():
    class Annotated(Tool):
        annotations = {"read_only_hint": True}

    pinned = Configuration(protocol_version="2024-11-05")
    with pytest.raises(ConfigurationError, match="annotations"):
        Server("old", tools=[Annotated], configuration=pinned)
    server = Server("old", configuration=pinned)
    with pytest.raises(ConfigurationError, match="annotations"):
        server.define_tool(lambda a: "", name="late", annotations={"read_only_hint": True})
    assert server.tools == {}
    # The first revision with annotations accepts them, and so does an unpinned server.
    Server("ok", tools=[Annotated], configuration=Configuration(protocol_version="2025-03-26"))
    Server("ok", tools=[Annotated])


@pytest.mark.feature("TOOL-07")
def test_the_docs_say_annotations_need_2025_03_26():
    page = (REPO / "docs" / "defining.md").read_text()
    assert any("annotations" in line and "2025-03-26" in line for line in page.splitlines())


@pytest.mark.feature("TOOL-23")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])  # tool _meta since 2025-06-18
def test_icons_and_meta_are_listed(make_client, revision):
    icons = [{"src": "https://example.com/a.svg", "mimeType": "image/svg+xml", "sizes": ["any"],
              "theme": "light"}, {"src": "data:image/png;base64,AAAA"}]
    server = Server("icons")
    server.define_tool(lambda a: "", name="iconic", icons=icons, meta={"ui/resourceUri": "ui://x"})
    entry = listed(make_client(server, revision))["iconic"]
    assert entry["icons"] == icons
    assert entry["_meta"] == {"ui/resourceUri": "ui://x"}


@pytest.mark.feature("TOOL-23")
@pytest.mark.parametrize("icons", [
    [{"src": "https://example.com/a.png", "theme": "blue"}],
    [{"mimeType": "image/png"}],
    [{"src": "https://example.com/a.png", "sizes": "48x48"}],
    {"src": "https://example.com/a.png"},
])
def test_invalid_icons_raise_at_definition(icons):
    with pytest.raises(ValueError):
        Tool.define(lambda a: "", name="bad", icons=icons)
    with pytest.raises(ValueError):
        type("BadIcons", (Tool,), {"icons": icons})


@pytest.mark.feature("TOOL-23")
def test_meta_must_be_an_object():
    with pytest.raises(ValueError):
        Tool.define(lambda a: "", name="bad", meta=["not", "a", "dict"])


# TOOL-12 / TOOL-13 / TOOL-14: arguments and unknown tools -----------------------------------------

def _counting_server(configuration: Configuration | None = None) -> tuple[Server, list]:
    calls: list[dict] = []

    def handler(arguments):
        calls.append(arguments)
        return "ran"

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3},
                       "c": {"type": "boolean"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    server = Server("args", configuration=configuration)
    server.define_tool(handler, name="strict", input_schema=schema)
    return server, calls


@pytest.mark.feature("TOOL-12")
@pytest.mark.parametrize("revision", REVISIONS)
def test_missing_required_arguments_give_an_error_result(make_client, revision):
    server, calls = _counting_server()
    client = make_client(server, revision)
    assert call(client, "strict", {"c": True})["result"] == {
        "content": [{"type": "text", "text": "Missing required arguments: a, b"}], "isError": True
    }
    assert call(client, "strict")["result"]["content"][0]["text"] == "Missing required arguments: a, b"
    assert call(client, "strict", {"b": "x"})["result"]["content"][0]["text"] == \
        "Missing required arguments: a"
    assert calls == []


@pytest.mark.feature("TOOL-12")
def test_missing_required_arguments_are_reported_even_without_validation(make_client):
    server, calls = _counting_server(Configuration(validate_tool_call_arguments=False))
    client = make_client(server)
    assert call(client, "strict", {"a": 1})["result"]["content"][0]["text"] == \
        "Missing required arguments: b"
    assert calls == []


@pytest.mark.feature("TOOL-13", "CFG-07")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("arguments", [
    {"a": "1", "b": "x"}, {"a": 1, "b": "long"}, {"a": 1, "b": "x", "extra": 1},
    {"a": 1, "b": "x", "c": "yes"},
])
def test_schema_violations_give_an_invalid_arguments_result(make_client, revision, arguments):
    server, calls = _counting_server()
    result = call(make_client(server, revision), "strict", arguments)["result"]
    assert result["isError"] is True
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    assert result["content"][0]["text"].startswith("Invalid arguments: ")
    assert calls == []


@pytest.mark.feature("TOOL-13", "CFG-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_validation_switched_off_passes_arguments_through(make_client, revision):
    server, calls = _counting_server(Configuration(validate_tool_call_arguments=False))
    result = call(make_client(server, revision), "strict", {"a": "1", "b": "long", "extra": [1]})
    assert result["result"] == {"content": [{"type": "text", "text": "ran"}], "isError": False}
    assert calls == [{"a": "1", "b": "long", "extra": [1]}]


@pytest.mark.feature("TOOL-13")
def test_valid_arguments_reach_the_handler(make_client):
    server, calls = _counting_server()
    assert call(make_client(server), "strict", {"a": 1, "b": "abc", "c": False})["result"]["isError"] \
        is False
    assert calls == [{"a": 1, "b": "abc", "c": False}]


@pytest.mark.feature("TOOL-14")
@pytest.mark.parametrize("revision", REVISIONS)
def test_unknown_tool_is_an_invalid_params_error(make_client, revision):
    client = make_client(class_style(), revision)
    response = call(client, "nope", {"a": 1})
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Tool not found: nope"


# TOOL-15 / TOOL-16 / TOOL-19: results and content ------------------------------------------------

@pytest.mark.feature("TOOL-15")
@pytest.mark.parametrize("revision", REVISIONS)
def test_result_shape_always_carries_is_error(make_client, revision):
    given_content = [{"type": "text", "text": "kept", "annotations": {"priority": 0.5}}]
    server = Server("shapes")
    server.define_tool(lambda a: "plain", name="string")
    server.define_tool(lambda a: None, name="nothing")
    server.define_tool(lambda a: ToolResponse([Text("t")], structured_content={"k": 1},
                                              meta={"com.example/trace": "t1"}), name="full")
    server.define_tool(lambda a: ToolResponse(given_content, error=True), name="failed")
    server.define_tool(lambda a: {"content": given_content}, name="raw")
    server.define_tool(lambda a: [Text("one"), {"type": "text", "text": "two"}], name="blocks")
    client = make_client(server, revision)
    results = {name: call(client, name)["result"] for name in listed(client)}
    assert results["string"] == {"content": [{"type": "text", "text": "plain"}], "isError": False}
    assert results["nothing"] == {"content": [], "isError": False}
    assert results["full"] == {"content": [{"type": "text", "text": "t"}], "isError": False,
                               "structuredContent": {"k": 1}, "_meta": {"com.example/trace": "t1"}}
    assert results["failed"] == {"content": given_content, "isError": True}
    assert results["raw"] == {"content": given_content, "isError": False}
    assert results["blocks"] == {"content": [{"type": "text", "text": "one"},
                                             {"type": "text", "text": "two"}], "isError": False}


@pytest.mark.feature("TOOL-16")
@pytest.mark.parametrize("value", [[1, 2, 3], "text", 42, 1.5, True, None])
def test_non_object_structured_content_is_any_json_and_mirrored_as_text(value):
    body = ToolResponse(structured_content=value).to_dict()
    assert body == {"content": [{"type": "text", "text": json.dumps(value)}],
                    "structuredContent": value, "isError": False}


@pytest.mark.feature("TOOL-16")
def test_object_or_given_content_is_not_mirrored():
    assert ToolResponse(structured_content={"a": 1}).to_dict() == {
        "content": [], "structuredContent": {"a": 1}, "isError": False
    }
    assert ToolResponse([Text("mine")], structured_content=[1]).to_dict() == {
        "content": [{"type": "text", "text": "mine"}], "structuredContent": [1], "isError": False
    }


@pytest.mark.feature("TOOL-16")
@pytest.mark.parametrize("revision", REVISIONS)
def test_structured_content_on_the_handshake_wire(make_client, revision):
    """Handshake revisions type ``structuredContent`` as an object: a non-object value (SEP-2106)
    reaches those clients only as its mirrored text, so every answer stays valid for them."""
    server = Server("structured")
    server.define_tool(lambda a: ToolResponse(structured_content=[1, 2]), name="array")
    server.define_tool(lambda a: ToolResponse(structured_content="s"), name="string")
    server.define_tool(lambda a: ToolResponse([Text("own")], structured_content=[1]), name="given")
    server.define_tool(lambda a: ToolResponse(structured_content={"k": [1]}), name="object")
    client = make_client(server, revision)
    assert call(client, "array")["result"] == {"content": [{"type": "text", "text": "[1, 2]"}],
                                               "isError": False}
    assert call(client, "string")["result"] == {"content": [{"type": "text", "text": '"s"'}],
                                                "isError": False}
    assert call(client, "given")["result"] == {"content": [{"type": "text", "text": "own"}],
                                               "isError": False}
    assert call(client, "object")["result"] == {"content": [], "structuredContent": {"k": [1]},
                                                "isError": False}


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
WAV = base64.b64encode(b"RIFF0000WAVE").decode()
ANNOTATIONS = {"audience": ["user"], "priority": 0.5}
META = {"com.example/id": 7}


@pytest.mark.feature("TOOL-19")
@pytest.mark.parametrize("revision", REVISIONS)
def test_text_image_and_embedded_resources_with_annotations_and_meta(make_client, revision):
    blocks = [
        Text("hello", annotations=ANNOTATIONS, meta=META),
        Image(PNG, "image/png", annotations=ANNOTATIONS, meta=META),
        EmbeddedResource(TextContents("file:///a.txt", "body", mime_type="text/plain"),
                         annotations=ANNOTATIONS, meta=META),
        EmbeddedResource(BlobContents.from_bytes("file:///a.bin", b"\x00\x01", "application/x-bin")),
        Text("bare"),
    ]
    server = Server("content")
    server.define_tool(lambda a: ToolResponse(blocks), name="content")
    assert call(make_client(server, revision), "content")["result"]["content"] == [
        {"type": "text", "text": "hello", "annotations": ANNOTATIONS, "_meta": META},
        {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": ANNOTATIONS,
         "_meta": META},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain",
                                          "text": "body"},
         "annotations": ANNOTATIONS, "_meta": META},
        {"type": "resource", "resource": {"uri": "file:///a.bin", "mimeType": "application/x-bin",
                                          "blob": base64.b64encode(b"\x00\x01").decode()}},
        {"type": "text", "text": "bare"},
    ]


@pytest.mark.feature("TOOL-19")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-03-26"])  # audio exists since 2025-03-26
def test_audio_content(make_client, revision):
    server = Server("content")
    server.define_tool(
        lambda a: [Audio(WAV, "audio/wav", annotations=ANNOTATIONS, meta=META), Audio(WAV, "audio/wav")],
        name="audio",
    )
    assert call(make_client(server, revision), "audio")["result"]["content"] == [
        {"type": "audio", "data": WAV, "mimeType": "audio/wav", "annotations": ANNOTATIONS,
         "_meta": META},
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
    ]


# TOOL-20: exceptions ---------------------------------------------------------------------------

@pytest.mark.feature("TOOL-20")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("build", STYLES)
def test_tool_exception_gives_a_generic_error_result_and_one_report(make_client, revision, build):
    reporter = Recorder()
    client = make_client(build(Configuration(exception_reporter=reporter)), revision)
    response = call(client, "add", {"a": -1, "b": 1})
    assert response["result"] == {
        "content": [{"type": "text", "text": "Internal error occurred"}], "isError": True
    }
    assert "secret" not in json.dumps(response) and "calc.py" not in json.dumps(response)
    assert len(reporter.calls) == 1
    exc, context = reporter.calls[0]
    assert isinstance(exc, RuntimeError) and "secret" in str(exc)
    assert context == {"request": {"jsonrpc": "2.0", "id": response["id"], "method": "tools/call",
                                   "params": {"name": "add", "arguments": {"a": -1, "b": 1}}}}


@pytest.mark.feature("TOOL-20")
@pytest.mark.parametrize("revision", REVISIONS)
def test_async_tool_exception_is_handled_the_same(make_client, revision):
    reporter = Recorder()
    server = Server("boom", configuration=Configuration(exception_reporter=reporter))

    @server.tool
    async def boom() -> str:
        raise KeyError("db-password")

    response = call(make_client(server, revision), "boom")
    assert response["result"]["content"] == [{"type": "text", "text": "Internal error occurred"}]
    assert "db-password" not in json.dumps(response)
    assert [type(exc) for exc, _ in reporter.calls] == [KeyError]


@pytest.mark.feature("TOOL-20")
@pytest.mark.parametrize("revision", REVISIONS)
def test_typed_mcp_errors_pass_through_unchanged(make_client, revision):
    reporter = Recorder()
    server = Server("typed", configuration=Configuration(exception_reporter=reporter))

    @server.tool
    def typed() -> str:
        raise MCPError("Quota exceeded", code=-32050, data={"retryAfter": 30})

    response = call(make_client(server, revision), "typed")
    assert response["error"] == {"code": -32050, "message": "Quota exceeded",
                                 "data": {"retryAfter": 30}}
    assert reporter.calls == []


@pytest.mark.feature("TOOL-20")
@pytest.mark.parametrize("revision", REVISIONS)
def test_cancellation_passes_through_with_no_response(make_client, revision):
    reporter = Recorder()
    server = Server("cancel", configuration=Configuration(exception_reporter=reporter))

    @server.tool
    def gives_up() -> str:
        raise CancelledError(reason="stopped")

    assert call(make_client(server, revision), "gives_up") is None
    assert reporter.calls == []


# TOOL-21 / TOOL-22: the handler context -----------------------------------------------------------

@pytest.mark.feature("TOOL-21")
@pytest.mark.parametrize("revision", REVISIONS)
def test_handlers_get_a_context_only_when_they_ask(make_client, revision):
    seen: dict[str, Any] = {}

    class Named(Tool):
        def call(self, x: int = 0, server_context=None):
            seen["class_named"] = server_context
            return "ok"

    class Kwargs(Tool):
        def call(self, x: int = 0, **kwargs):
            seen["class_kwargs"] = kwargs
            return "ok"

    class Without(Tool):
        def call(self, x: int = 0):
            seen["class_without"] = x
            return "ok"

    server = Server("ctx", tools=[Named, Kwargs, Without])

    @server.define_tool(name="define_named")
    def define_named(arguments, server_context):
        seen["define_named"] = server_context
        return "ok"

    @server.define_tool(name="define_without")
    def define_without(arguments):
        seen["define_without"] = arguments
        return "ok"

    @server.tool
    async def decorated_named(x: int, server_context: ServerContext) -> str:
        seen["decorated_named"] = server_context
        return "ok"

    @server.tool
    def decorated_without(x: int) -> str:
        seen["decorated_without"] = x
        return "ok"

    client = make_client(server, revision)
    entries = listed(client)
    # The context parameter is never part of the input schema.
    assert entries["decorated_named"]["inputSchema"]["properties"] == {"x": {"type": "integer"}}
    for name in entries:
        assert call(client, name, {"x": 1})["result"]["content"] == [{"type": "text", "text": "ok"}]
    for key in ("class_named", "define_named", "decorated_named"):
        assert isinstance(seen[key], ServerContext), key
        assert seen[key].method == "tools/call"
    assert isinstance(seen["class_kwargs"]["server_context"], ServerContext)
    assert seen["class_without"] == 1 and seen["decorated_without"] == 1
    assert seen["define_without"] == {"x": 1}


def _context_probe(server_context: Any) -> tuple[Server, list]:
    seen: list[ServerContext] = []
    server = Server("ctx", server_context=server_context)

    @server.define_tool(name="probe")
    def probe(arguments, server_context):
        seen.append(server_context)
        return "ok"

    return server, seen


@pytest.mark.feature("TOOL-22")
@pytest.mark.parametrize("revision", REVISIONS)
def test_meta_is_merged_into_a_dict_context(make_client, revision):
    user = {"user": "alice"}
    meta = {"progressToken": "p-1", "com.example/request": {"n": 1}}
    server, seen = _context_probe(user)
    client = make_client(server, revision)
    call(client, "probe", {}, meta=meta)
    call(client, "probe", {})
    with_meta, without_meta = seen
    assert dict(with_meta) == {"user": "alice", "_meta": meta}
    assert with_meta["_meta"] == meta and with_meta["user"] == "alice"
    assert dict(without_meta) == {"user": "alice"}
    assert user == {"user": "alice"}  # the server's own dict is not changed


@pytest.mark.feature("TOOL-22")
@pytest.mark.parametrize("revision", REVISIONS)
def test_meta_makes_a_new_dict_when_there_is_no_context(make_client, revision):
    server, seen = _context_probe(None)
    client = make_client(server, revision)
    call(client, "probe", {}, meta={"progressToken": 5})
    assert dict(seen[0]) == {"_meta": {"progressToken": 5}}


@pytest.mark.feature("TOOL-22")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_non_dict_context_gets_no_meta(make_client, revision):
    class Account:
        pass

    account = Account()
    server, seen = _context_probe(account)
    call(make_client(server, revision), "probe", {}, meta={"progressToken": 5})
    assert "_meta" not in seen[0]
    assert seen[0].context is account
    assert seen[0].meta == {"progressToken": 5}  # still readable from the request itself


# TOOL-25: runtime registration -----------------------------------------------------------------

@pytest.mark.feature("TOOL-25")
@pytest.mark.parametrize("revision", REVISIONS)
def test_tools_defined_after_start_are_listed_and_callable(make_client, revision):
    server = class_style()
    client = make_client(server, revision)
    assert list(listed(client)) == ["add"]
    server.define_tool(lambda args: "late!", name="late")

    @server.tool
    def later(x: int) -> str:
        return str(x * 2)

    assert list(listed(client)) == ["add", "late", "later"]
    assert call(client, "late")["result"]["content"] == [{"type": "text", "text": "late!"}]
    assert call(client, "later", {"x": 4})["result"]["content"] == [{"type": "text", "text": "8"}]


@pytest.mark.feature("TOOL-25")
@pytest.mark.parametrize("revision", REVISIONS)
def test_list_changed_is_sent_when_asked(make_client, revision):
    server = class_style()
    # No transport: nothing to send to.
    assert server.notify_tools_list_changed() is False
    stdout = io.BytesIO()
    StdioTransport(server, stdin=io.BytesIO(), stdout=stdout)
    client = make_client(server, revision)
    server.define_tool(lambda args: "", name="late")
    already_written = len(stdout.getvalue())
    assert server.notify_tools_list_changed() is True
    lines = stdout.getvalue()[already_written:].splitlines()
    assert len(lines) == 1
    message = json.loads(lines[0])
    check_server_message(message, revision)
    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert "late" in listed(client)


# TOOL-26: argument key typing -------------------------------------------------------------------

NESTED = {
    "user": {"name": "Ann", "tags": ["a", {"deep": {"x": 1, "y": [True, None, 2.5]}}]},
    "count": 3,
    "ratio": 0.25,
    "flag": False,
    "nothing": None,
    "matrix": [[1, [2, {"z": "w"}]]],
}


def _assert_plain_json(value: Any, path: str = "$") -> None:
    if isinstance(value, dict):
        assert type(value) is dict, path
        for key, item in value.items():
            assert type(key) is str, f"{path}: key {key!r}"
            _assert_plain_json(item, f"{path}.{key}")
    elif isinstance(value, list):
        assert type(value) is list, path
        for index, item in enumerate(value):
            _assert_plain_json(item, f"{path}[{index}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), path


@pytest.mark.feature("TOOL-26")
@pytest.mark.parametrize("revision", REVISIONS)
def test_arguments_arrive_as_parsed_json_with_str_keys(make_client, revision):
    received: dict[str, Any] = {}

    class Keywords(Tool):
        def call(self, user, count, ratio, flag, nothing, matrix):
            received["class"] = {"user": user, "count": count, "ratio": ratio, "flag": flag,
                                 "nothing": nothing, "matrix": matrix}
            return "ok"

    server = Server("json", tools=[Keywords])
    server.define_tool(lambda arguments: received.setdefault("define", arguments) and "ok",
                       name="define")

    @server.tool
    def decorated(user: dict, count: int, ratio: float, flag: bool, nothing: None,
                  matrix: list) -> str:
        received["decorated"] = {"user": user, "count": count, "ratio": ratio, "flag": flag,
                                 "nothing": nothing, "matrix": matrix}
        return "ok"

    client = make_client(server, revision)
    for name in ("keywords", "define", "decorated"):
        assert call(client, name, NESTED)["result"]["isError"] is False, name
    # Over JSON text too, so nothing depends on the caller's Python objects.
    text = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                       "params": {"name": "keywords", "arguments": NESTED}})
    assert client.raw_json(text)["result"]["isError"] is False
    for key in ("class", "define", "decorated"):
        assert received[key] == NESTED, key
        _assert_plain_json(received[key])
