"""Tool input and output schemas (JSON Schema 2020-12) and result validation, handshake era."""

from __future__ import annotations

import builtins
import socket
import urllib.request
import uuid
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mcp_protocol import json_schema
from mcp_protocol.json_schema import MAX_SCHEMA_DEPTH, MAX_SUBSCHEMA_COUNT, SchemaError
from mcp_server import (
    Configuration,
    InputSchema,
    OutputSchema,
    SchemaValidationError,
    Server,
    Text,
    Tool,
    ToolResponse,
)

REVISIONS = ["2025-11-25", "2024-11-05"]
# outputSchema and structuredContent exist from 2025-06-18 on.
OUTPUT_REVISIONS = ["2025-11-25", "2025-06-18"]
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def call(client, name: str, arguments: dict | None = None) -> dict:
    return client.request("tools/call", {"name": name, "arguments": arguments or {}})


def listed(client) -> dict[str, dict]:
    return {entry["name"]: entry for entry in client.result("tools/list")["tools"]}


def define_in_every_style(**fields: Any) -> None:
    """Define a tool with ``fields`` as a class, with Tool.define and with both server decorators."""
    type("Styled", (Tool,), {"call": lambda self, **a: "", **fields})
    Tool.define(lambda arguments: "", name="styled", **fields)
    server = Server("styles")
    server.define_tool(lambda arguments: "", name="styled", **fields)
    server.tool(name="styled_fn", **fields)(lambda: "")


# TOOL-08: input schemas -----------------------------------------------------------------------

@pytest.mark.feature("TOOL-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_input_schema_root_is_an_object_by_default(make_client, revision):
    class NoSchema(Tool):
        pass

    class PropertiesOnly(Tool):
        input_schema = {"properties": {"q": {"type": "string"}}}

    client = make_client(Server("roots", tools=[NoSchema, PropertiesOnly]), revision)
    entries = listed(client)
    assert entries["no_schema"]["inputSchema"] == {"$schema": DRAFT, "type": "object"}
    assert entries["properties_only"]["inputSchema"] == {
        "$schema": DRAFT, "type": "object", "properties": {"q": {"type": "string"}}
    }
    assert InputSchema(properties={"q": {"type": "string"}}).schema == {
        "type": "object", "properties": {"q": {"type": "string"}}
    }


@pytest.mark.feature("TOOL-08")
@pytest.mark.parametrize("schema", [{"type": "array"}, {"type": "string"}, {"type": ["object", "null"]}])
def test_input_schema_root_must_be_an_object(schema):
    with pytest.raises(ValueError, match="object"):
        define_in_every_style(input_schema=schema)


RICH_SCHEMA = {
    "type": "object",
    "$defs": {"positive": {"type": "integer", "minimum": 1}},
    "properties": {
        "count": {"$ref": "#/$defs/positive"},
        "id": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^[a-z]+$"}]},
        "tag": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "name": {"allOf": [{"type": "string"}, {"minLength": 2}]},
        "code": {"not": {"const": "forbidden"}},
        "kind": {"enum": ["circle", "square"]},
        "radius": {"type": "number"},
        "shape": {
            "type": "object",
            "if": {"properties": {"filled": {"const": True}}, "required": ["filled"]},
            "then": {"required": ["color"]},
            "else": {"not": {"required": ["color"]}},
        },
    },
    "if": {"properties": {"kind": {"const": "circle"}}, "required": ["kind"]},
    "then": {"required": ["radius"]},
    "required": ["count"],
}
VALID = {"count": 2, "id": "abc", "tag": None, "name": "Al", "code": "ok", "kind": "circle",
         "radius": 1.5, "shape": {"filled": True, "color": "red"}}


@pytest.mark.feature("TOOL-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_full_2020_12_vocabulary_below_the_root_is_listed_and_enforced(make_client, revision):
    received = []
    server = Server("rich")
    server.define_tool(lambda arguments: received.append(arguments) or "ok", name="rich",
                       input_schema=RICH_SCHEMA)
    client = make_client(server, revision)
    assert listed(client)["rich"]["inputSchema"] == {"$schema": DRAFT, **RICH_SCHEMA}

    assert call(client, "rich", VALID)["result"]["isError"] is False
    assert call(client, "rich", {"count": 1, "id": 7, "tag": "t",
                                 "shape": {"filled": False}})["result"]["isError"] is False
    violations = {
        "$ref": {"count": 0},
        "oneOf": {"id": "ABC"},
        "anyOf": {"tag": 5},
        "allOf": {"name": "A"},
        "not": {"code": "forbidden"},
        "if/then at the root": {"radius": None},
        "then below the root": {"shape": {"filled": True}},
        "else below the root": {"shape": {"filled": False, "color": "red"}},
    }
    for keyword, change in violations.items():
        arguments = {key: value for key, value in {**VALID, **change}.items() if value is not None}
        result = call(client, "rich", arguments)["result"]
        assert result["isError"] is True, keyword
        assert result["content"][0]["text"].startswith("Invalid arguments: "), keyword
    assert len(received) == 2


# TOOL-09: resource bounds ----------------------------------------------------------------------

EXTERNAL_REFS = [
    "https://example.com/schema.json", "http://example.com/s.json#/$defs/x", "file:///etc/passwd",
    "other.json", "other.json#/$defs/x", "urn:example:schema", "//example.com/x",
]


@pytest.mark.feature("TOOL-09")
@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
@pytest.mark.parametrize("ref", EXTERNAL_REFS)
def test_only_same_document_references_are_allowed(keyword, ref):
    nested = {"properties": {"a": {"type": "array", "items": {keyword: ref}}}}
    with pytest.raises(SchemaError, match="same-document"):
        define_in_every_style(input_schema=nested)
    with pytest.raises(SchemaError, match="same-document"):
        define_in_every_style(output_schema=nested)


@pytest.mark.feature("TOOL-09")
def test_same_document_references_work_without_network_or_file_access(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("schema handling must not touch the network or the file system")

    for target, name in [(socket.socket, "connect"), (socket, "create_connection"),
                         (socket, "getaddrinfo"), (urllib.request, "urlopen"), (builtins, "open")]:
        monkeypatch.setattr(target, name, forbidden)

    tag = uuid.uuid4().hex  # a schema never seen before, so nothing comes from a cache
    schema = {
        "description": tag,
        "$defs": {"node": {"$dynamicAnchor": "node", "type": "object",
                           "properties": {"child": {"$dynamicRef": "#node"}}},
                  "name": {"$anchor": "name", "type": "string"}},
        "properties": {"tree": {"$ref": "#/$defs/node"}, "label": {"$ref": "#name"}},
    }
    tool = Tool.define(lambda arguments: "", name="refs", input_schema=schema, output_schema=schema)
    assert tool.input_schema.errors({"tree": {"child": {}}, "label": "x"}) == []
    assert tool.input_schema.errors({"tree": {"child": 5}, "label": 1})
    tool.output_schema.validate_result({"label": "ok"})
    for ref in EXTERNAL_REFS:
        with pytest.raises(SchemaError):
            Tool.define(lambda arguments: "", name="external", input_schema={"$ref": ref})


def nested(depth: int) -> dict:
    """A schema ``depth`` levels deep, counted as Ruby counts them: every JSON value on the
    deepest path, from the root (level 1) down to the innermost scalar."""
    schema: dict = {"type": "string"}  # two levels: the object and its string
    for _ in range(depth - 2):
        schema = {"not": schema}
    return schema


@pytest.mark.feature("TOOL-09")
def test_schema_depth_is_bounded():
    assert MAX_SCHEMA_DEPTH == 64
    OutputSchema(nested(64))
    InputSchema({"type": "object", "properties": {"a": nested(62)}})
    with pytest.raises(SchemaError, match="MAX_SCHEMA_DEPTH"):
        OutputSchema(nested(65))
    with pytest.raises(SchemaError, match="MAX_SCHEMA_DEPTH"):
        define_in_every_style(input_schema={"properties": {"a": nested(63)}})


@pytest.mark.feature("TOOL-09")
def test_subschema_count_is_bounded():
    assert MAX_SUBSCHEMA_COUNT == 10_000
    # The root object plus n subschemas in a list.
    OutputSchema({"anyOf": [{} for _ in range(MAX_SUBSCHEMA_COUNT - 1)]})
    with pytest.raises(SchemaError, match="MAX_SUBSCHEMA_COUNT"):
        define_in_every_style(output_schema={"anyOf": [{} for _ in range(MAX_SUBSCHEMA_COUNT)]})
    with pytest.raises(SchemaError, match="MAX_SUBSCHEMA_COUNT"):
        define_in_every_style(input_schema={"$defs": {f"d{i}": {} for i in range(MAX_SUBSCHEMA_COUNT)}})


# TOOL-10: metaschema check and cache -----------------------------------------------------------

@pytest.mark.feature("TOOL-10")
@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"type": "strin"}}},
    {"properties": {"a": {"minLength": -1}}},
    {"required": "a"},
    {"properties": {"a": {"pattern": "("}}},
    {"properties": "a"},
    {"properties": {"a": {"enum": "not-a-list"}}},
])
def test_invalid_schemas_raise_at_construction(schema):
    with pytest.raises(SchemaError, match="invalid JSON Schema"):
        define_in_every_style(input_schema=schema)
    with pytest.raises(SchemaError, match="invalid JSON Schema"):
        define_in_every_style(output_schema=schema)


@pytest.mark.feature("TOOL-10")
def test_invalid_output_roots_raise():
    for schema in ({"type": "objekt"}, {"anyOf": []}, {"const": 1, "minimum": "x"}):
        with pytest.raises(SchemaError):
            OutputSchema(schema)


@pytest.mark.feature("TOOL-10")
def test_validated_schemas_are_cached_in_a_bounded_lru(monkeypatch):
    checks: list[Any] = []
    original = Draft202012Validator.check_schema.__func__

    def counting(cls, schema, *args, **kwargs):
        checks.append(schema)
        return original(cls, schema, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(counting))
    schema = {"description": uuid.uuid4().hex, "properties": {"a": {"type": "integer"}}}
    first = Tool.define(lambda arguments: "", name="first", input_schema=schema)
    Tool.define(lambda arguments: "", name="second", input_schema=dict(schema))
    assert first.input_schema.errors({"a": "x"}) and first.input_schema.errors({"a": 1}) == []
    assert len(checks) == 1

    assert json_schema.VALIDATOR_CACHE_SIZE == 1000
    info = json_schema._validator.cache_info()
    assert info.maxsize == 1000
    for index in range(1001):
        InputSchema({"description": f"{uuid.uuid4().hex}-{index}"})
    assert json_schema._validator.cache_info().currsize == 1000


# TOOL-11: output schemas with any root ----------------------------------------------------------

@pytest.mark.feature("TOOL-11")
@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "integer"}},
    {"type": "string"},
    {"type": "integer", "minimum": 0},
    {"anyOf": [{"type": "string"}, {"type": "object"}]},
    {"oneOf": [{"type": "number"}, {"type": "null"}]},
    {"allOf": [{"type": "string"}, {"minLength": 1}]},
    {"not": {"type": "null"}},
    {"if": {"type": "string"}, "then": {"minLength": 1}},
    {"const": 42},
    {"enum": ["red", "green"]},
    {"$ref": "#/$defs/item", "$defs": {"item": {"type": "boolean"}}},
])
def test_output_schema_roots_are_kept_as_given(schema):
    tool = Tool.define(lambda arguments: None, name="any_root", output_schema=schema)
    assert tool.output_schema.schema == schema
    assert tool.output_schema.to_dict() == {"$schema": DRAFT, **schema}


@pytest.mark.feature("TOOL-11")
@pytest.mark.parametrize("schema", [
    {}, {"properties": {"n": {"type": "integer"}}}, {"$defs": {"x": {}}, "required": ["x"]},
])
def test_output_schema_root_defaults_to_object_without_shape_keywords(schema):
    assert OutputSchema(schema).schema == {"type": "object", **schema}


@pytest.mark.feature("TOOL-11")
@pytest.mark.parametrize("revision", OUTPUT_REVISIONS)
def test_handshake_clients_see_only_object_output_schemas(make_client, revision):
    """Handshake revisions require an object root: other roots are left out of their listing,
    and the tool still answers with its value as text."""
    server = Server("roots")
    server.define_tool(lambda a: [1, 2], name="array", output_schema={"type": "array"})
    server.define_tool(lambda a: {"n": 1}, name="object",
                       output_schema={"properties": {"n": {"type": "integer"}}})
    client = make_client(server, revision)
    entries = listed(client)
    assert "outputSchema" not in entries["array"]
    assert entries["object"]["outputSchema"] == {
        "$schema": DRAFT, "type": "object", "properties": {"n": {"type": "integer"}}
    }
    assert call(client, "array")["result"] == {"content": [{"type": "text", "text": "[1, 2]"}],
                                               "isError": False}
    assert call(client, "object")["result"] == {"content": [{"type": "text", "text": '{"n": 1}'}],
                                                "structuredContent": {"n": 1}, "isError": False}


# TOOL-17: result validation --------------------------------------------------------------------

SUM_SCHEMA = {"properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


def results_server(configuration: Configuration | None = None) -> Server:
    server = Server("results", configuration=configuration)
    server.define_tool(lambda a: {"sum": 3}, name="good", output_schema=SUM_SCHEMA)
    server.define_tool(lambda a: {"sum": "three"}, name="bad", output_schema=SUM_SCHEMA)
    server.define_tool(lambda a: ToolResponse([Text("3")]), name="unstructured",
                       output_schema=SUM_SCHEMA)
    server.define_tool(lambda a: ToolResponse([Text("failed")], structured_content={"oops": 1},
                                              error=True), name="failed", output_schema=SUM_SCHEMA)
    server.define_tool(lambda a: {"anything": True}, name="schemaless")
    server.define_tool(lambda a: ["x"], name="bad_array",
                       output_schema={"type": "array", "items": {"type": "integer"}})
    server.define_tool(lambda a: [1, 2], name="good_array",
                       output_schema={"type": "array", "items": {"type": "integer"}})
    return server


@pytest.mark.feature("TOOL-17", "CFG-07")
@pytest.mark.parametrize("revision", OUTPUT_REVISIONS)
def test_results_are_not_validated_by_default(make_client, revision):
    client = make_client(results_server(), revision)
    assert call(client, "bad")["result"]["structuredContent"] == {"sum": "three"}
    assert call(client, "unstructured")["result"]["isError"] is False
    assert call(client, "bad_array")["result"]["isError"] is False


@pytest.mark.feature("TOOL-17", "CFG-07")
@pytest.mark.parametrize("revision", OUTPUT_REVISIONS)
def test_validated_results_must_carry_conforming_structured_content(make_client, revision):
    client = make_client(results_server(Configuration(validate_tool_call_results=True)), revision)
    assert call(client, "good")["result"]["structuredContent"] == {"sum": 3}
    assert call(client, "good_array")["result"]["isError"] is False
    for name in ("bad", "unstructured", "bad_array"):
        error = call(client, name)["error"]
        assert error["code"] == -32603, name
        assert name in error["message"]
    # Error results and tools without an output schema are not checked.
    assert call(client, "failed")["result"] == {"content": [{"type": "text", "text": "failed"}],
                                                "structuredContent": {"oops": 1}, "isError": True}
    assert call(client, "schemaless")["result"]["structuredContent"] == {"anything": True}


# TOOL-18: the in-handler helper ----------------------------------------------------------------

@pytest.mark.feature("TOOL-18")
def test_validate_result_raises_on_non_conforming_data():
    class Sum(Tool):
        output_schema = SUM_SCHEMA

    defined = Tool.define(lambda a: None, name="sum", output_schema=SUM_SCHEMA)
    for schema in (Sum.output_schema, Sum().output_schema, defined.output_schema,
                   OutputSchema(SUM_SCHEMA), OutputSchema(**SUM_SCHEMA)):
        assert schema.validate_result({"sum": 1}) is None
        for bad in ({"sum": "1"}, {}, [1], None):
            with pytest.raises(SchemaValidationError) as raised:
                schema.validate_result(bad)
            assert raised.value.errors
    with pytest.raises(SchemaValidationError):
        OutputSchema({"type": "array", "items": {"type": "integer"}}).validate_result([1, "2"])


@pytest.mark.feature("TOOL-18")
@pytest.mark.parametrize("revision", OUTPUT_REVISIONS)
def test_validate_result_inside_a_handler(make_client, revision):
    reports = []

    class Sum(Tool):
        input_schema = {"properties": {"value": {}}}
        output_schema = SUM_SCHEMA

        def call(self, value):
            result = {"sum": value}
            self.output_schema.validate_result(result)
            return ToolResponse([Text(str(value))], structured_content=result)

    server = Server("helper", tools=[Sum],
                    configuration=Configuration(exception_reporter=lambda e, c: reports.append(e)))
    client = make_client(server, revision)
    assert call(client, "sum", {"value": 4})["result"]["structuredContent"] == {"sum": 4}
    assert call(client, "sum", {"value": "4"})["result"] == {
        "content": [{"type": "text", "text": "Internal error occurred"}], "isError": True
    }
    assert [type(exc) for exc in reports] == [SchemaValidationError]


# What a background call keeps of its arguments: those its input schema declares --------------
ARGUMENTS = {"name": "n", "size": 2, "x-trace": "t", "junk": "j"}


@pytest.mark.parametrize(("schema", "kept"), [
    ({"properties": {"name": {"type": "string"}}}, {"name": "n"}),
    ({"properties": {"name": {}}, "patternProperties": {"^x-": {}}}, {"name": "n", "x-trace": "t"}),
    ({"allOf": [{"properties": {"name": {}}}, {"anyOf": [{"properties": {"size": {}}}]}]},
     {"name": "n", "size": 2}),
    ({"if": {"properties": {"name": {}}}, "then": {"properties": {"size": {}}},
      "dependentSchemas": {"name": {"properties": {"x-trace": {}}}}},
     {"name": "n", "size": 2, "x-trace": "t"}),
    ({"$defs": {"sized": {"properties": {"size": {}}}}, "$ref": "#/$defs/sized"}, {"size": 2}),
    ({"properties": {"name": {}}, "additionalProperties": False}, {"name": "n"}),
    # A schema that admits other properties on purpose, or that cannot be read so, keeps them all.
    ({"properties": {"name": {}}, "additionalProperties": {"type": "string"}}, ARGUMENTS),
    ({"properties": {"name": {}}, "unevaluatedProperties": True}, ARGUMENTS),
    ({"$defs": {"a": {"$anchor": "a", "properties": {"size": {}}}}, "$ref": "#a"}, ARGUMENTS),
    ({}, {}),
])
def test_only_the_arguments_an_input_schema_declares_are_kept(schema, kept):
    assert InputSchema(schema).declared(ARGUMENTS) == kept
