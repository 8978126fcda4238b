"""Form elicitation schemas: the flat-schema rule (enforced, unlike Ruby) and the enum builders."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server import Server, ServerContext
from mcp_server.elicitation import EnumSchema, check_requested_schema

from .peer import connected
from .wire import check_server_message


def on_the_wire(schema: dict, revision: str = "2025-11-25") -> None:
    """The schema is valid as the requestedSchema of an elicitation/create of ``revision``."""
    params: dict[str, Any] = {"message": "m", "requestedSchema": schema}
    if revision >= "2025-11-25":
        params["mode"] = "form"
    check_server_message({"jsonrpc": "2.0", "id": "x", "method": "elicitation/create",
                          "params": params}, revision)


def form(**properties: Any) -> dict:
    return {"type": "object", "properties": properties}


# ELI-06: what a flat form schema is ---------------------------------------------------------------

VALID_FORMS = {
    "empty": {"type": "object", "properties": {}},
    "primitives": form(
        name={"type": "string", "title": "Name", "description": "Full name", "minLength": 1,
              "maxLength": 80, "default": "Ada"},
        email={"type": "string", "format": "email"},
        born={"type": "string", "format": "date"},
        seen={"type": "string", "format": "date-time"},
        site={"type": "string", "format": "uri"},
        age={"type": "integer", "minimum": 0, "maximum": 150, "default": 36},
        score={"type": "number", "default": 0.5},
        ok={"type": "boolean", "default": False},
    ),
    "required": {**form(name={"type": "string"}, age={"type": "integer"}), "required": ["name"]},
    "builders": form(
        a=EnumSchema.untitled_single_select(["x", "y"]),
        b=EnumSchema.titled_single_select([("x", "X")]),
        c=EnumSchema.untitled_multi_select(["x", "y"], default=["y"]),
        d=EnumSchema.titled_multi_select([("x", "X"), ("y", "Y")]),
        e=EnumSchema.legacy_titled(["x"], ["X"]),
    ),
}


@pytest.mark.feature("ELI-06")
@pytest.mark.parametrize("name", list(VALID_FORMS))
def test_flat_forms_are_accepted_and_valid_on_the_wire(name):
    schema = VALID_FORMS[name]
    assert check_requested_schema(schema) is schema
    on_the_wire(schema)


INVALID_FORMS = {
    "not a dict": ["type", "object"],
    "not an object root": {"type": "string"},
    "no type": {"properties": {}},
    "no properties": {"type": "object"},
    "properties not an object": {"type": "object", "properties": ["a"]},
    "nested object": form(address={"type": "object", "properties": {"city": {"type": "string"}}}),
    "array of objects": form(items={"type": "array", "items": {"type": "object"}}),
    "array of free strings": form(tags={"type": "array", "items": {"type": "string"}}),
    "property not a dict": form(name="string"),
    "no property type": form(name={"title": "Name"}),
    "null type": form(name={"type": "null"}),
    "type list": form(name={"type": ["string", "null"]}),
    "composition": form(name={"anyOf": [{"type": "string"}]}),
    "reference": form(name={"$ref": "#/$defs/name"}),
    "pattern keyword": form(name={"type": "string", "pattern": "^a"}),
    "unknown format": form(name={"type": "string", "format": "ipv4"}),
    "string default not a string": form(name={"type": "string", "default": 3}),
    "integer default a float": form(n={"type": "integer", "default": 1.5}),
    "number default a boolean": form(n={"type": "number", "default": True}),
    "boolean default a string": form(b={"type": "boolean", "default": "yes"}),
    "required names an unknown field": {**form(name={"type": "string"}), "required": ["age"]},
    "required not a list": {**form(name={"type": "string"}), "required": "name"},
}


@pytest.mark.feature("ELI-06")
@pytest.mark.parametrize("name", list(INVALID_FORMS))
def test_other_schemas_are_refused(name):
    with pytest.raises(ValueError):
        check_requested_schema(INVALID_FORMS[name])


def form_server(caught: list[BaseException]) -> Server:
    server = Server("forms")

    @server.define_tool(name="ask", input_schema={"type": "object"})
    async def ask(arguments: dict, server_context: ServerContext) -> str:
        try:
            answer = await server_context.create_form_elicitation("Fill in", arguments["schema"])
        except ValueError as exc:
            if not arguments.get("catch"):
                raise
            caught.append(exc)
            return "refused"
        return answer["action"]

    return server


@pytest.mark.feature("ELI-06")
@pytest.mark.parametrize("name", ["nested object", "array of free strings", "pattern keyword"])
async def test_create_form_elicitation_refuses_a_schema_that_is_not_flat(name):
    caught: list[BaseException] = []
    peer = await connected(form_server(caught), "2025-11-25", {"elicitation": {}})
    peer.answer("elicitation/create", {"action": "decline"})
    # The handler sees ValueError before anything is sent...
    response = await peer.call_tool("ask", {"schema": INVALID_FORMS[name], "catch": True})
    assert response["result"]["content"][0]["text"] == "refused"
    assert isinstance(caught[0], ValueError)
    # ...and, uncaught, it is the tool's failure: reported, with no details for the client.
    response = await peer.call_tool("ask", {"schema": INVALID_FORMS[name]})
    assert response["result"]["isError"] is True
    assert response["result"]["content"] == [{"type": "text", "text": "Internal error occurred"}]
    assert peer.sent == []

    # A flat one goes out.
    response = await peer.call_tool("ask", {"schema": VALID_FORMS["primitives"]})
    assert response["result"]["content"][0]["text"] == "decline"
    assert peer.sent[0].params["requestedSchema"] == VALID_FORMS["primitives"]


@pytest.mark.feature("ELI-06")
async def test_multi_select_needs_2025_11_25():
    """Array fields arrived with SEP-1330 (2025-11-25); a 2025-06-18 wire cannot carry them."""
    caught: list[BaseException] = []
    peer = await connected(form_server(caught), "2025-06-18", {"elicitation": {}})
    peer.answer("elicitation/create", {"action": "accept", "content": {"size": "s"}})
    multi = form(tags=EnumSchema.untitled_multi_select(["a", "b"]))
    response = await peer.call_tool("ask", {"schema": multi, "catch": True})
    assert response["result"]["content"][0]["text"] == "refused"
    assert "2025-11-25" in str(caught[0])
    assert peer.sent == []
    # Single selects, titled ones included, are fine there.
    single = form(size=EnumSchema.untitled_single_select(["s", "m"]),
                  color=EnumSchema.legacy_titled(["r"], ["Red"]))
    on_the_wire(single, "2025-06-18")
    response = await peer.call_tool("ask", {"schema": single})
    assert response["result"]["content"][0]["text"] == "accept"


# ELI-07: the enum builders ------------------------------------------------------------------------

@pytest.mark.feature("ELI-07")
def test_untitled_single_select():
    assert EnumSchema.untitled_single_select(["s", "m", "l"]) == {"type": "string", "enum": ["s", "m", "l"]}
    assert EnumSchema.untitled_single_select(("s", "m"), default="m", title="Size",
                                             description="T-shirt size") == {
        "type": "string", "enum": ["s", "m"], "title": "Size", "description": "T-shirt size",
        "default": "m",
    }


@pytest.mark.feature("ELI-07")
def test_titled_single_select():
    expected_options = [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]
    assert EnumSchema.titled_single_select([("#f00", "Red"), ("#0f0", "Green")]) == \
        {"type": "string", "oneOf": expected_options}
    assert EnumSchema.titled_single_select(expected_options, default="#0f0", title="Color",
                                           description="Pick one") == {
        "type": "string", "oneOf": expected_options, "title": "Color", "description": "Pick one",
        "default": "#0f0",
    }


@pytest.mark.feature("ELI-07")
def test_untitled_multi_select():
    assert EnumSchema.untitled_multi_select(["a", "b"]) == \
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    assert EnumSchema.untitled_multi_select(["a", "b"], default=["b"], title="Tags",
                                            description="Any") == {
        "type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "title": "Tags",
        "description": "Any", "default": ["b"],
    }


@pytest.mark.feature("ELI-07")
def test_titled_multi_select():
    options = [{"const": "ham", "title": "Ham"}, {"const": "egg", "title": "Egg"}]
    assert EnumSchema.titled_multi_select([("ham", "Ham"), ("egg", "Egg")]) == \
        {"type": "array", "items": {"anyOf": options}}
    assert EnumSchema.titled_multi_select(options, default=["egg", "ham"], title="Toppings",
                                          description="Several") == {
        "type": "array", "items": {"anyOf": options}, "title": "Toppings", "description": "Several",
        "default": ["egg", "ham"],
    }


@pytest.mark.feature("ELI-07")
def test_legacy_titled():
    assert EnumSchema.legacy_titled(["r", "g"], ["Red", "Green"]) == \
        {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}
    assert EnumSchema.legacy_titled(["r"], ["Red"], default="r", title="Color", description="d") == {
        "type": "string", "enum": ["r"], "enumNames": ["Red"], "title": "Color", "description": "d",
        "default": "r",
    }


@pytest.mark.feature("ELI-07")
@pytest.mark.parametrize("build", [
    lambda: EnumSchema.untitled_single_select(["s", "m"], default="m", title="T", description="D"),
    lambda: EnumSchema.titled_single_select([("a", "A")], default="a", title="T", description="D"),
    lambda: EnumSchema.untitled_multi_select(["a", "b"], default=["a"], title="T", description="D"),
    lambda: EnumSchema.titled_multi_select([("a", "A")], default=["a"], title="T", description="D"),
    lambda: EnumSchema.legacy_titled(["a"], ["A"], default="a", title="T", description="D"),
], ids=["untitled_single", "titled_single", "untitled_multi", "titled_multi", "legacy"])
def test_every_builder_output_is_valid_on_the_wire(build):
    schema = build()
    check_requested_schema(form(field=schema))
    on_the_wire(form(field=schema))


INVALID_BUILDS = {
    "no values": lambda: EnumSchema.untitled_single_select([]),
    "values not a list": lambda: EnumSchema.untitled_single_select("abc"),
    "non-string value": lambda: EnumSchema.untitled_single_select(["a", 1]),
    "repeated value": lambda: EnumSchema.untitled_single_select(["a", "a"]),
    "default not a value": lambda: EnumSchema.untitled_single_select(["a"], default="b"),
    "no options": lambda: EnumSchema.titled_single_select([]),
    "option without title": lambda: EnumSchema.titled_single_select([{"const": "a"}]),
    "option of three": lambda: EnumSchema.titled_single_select([("a", "A", "x")]),
    "option value not a string": lambda: EnumSchema.titled_single_select([(1, "One")]),
    "repeated option value": lambda: EnumSchema.titled_single_select([("a", "A"), ("a", "B")]),
    "titled default not a value": lambda: EnumSchema.titled_single_select([("a", "A")], default="b"),
    "multi default not a list": lambda: EnumSchema.untitled_multi_select(["a"], default="a"),
    "multi default not values": lambda: EnumSchema.untitled_multi_select(["a"], default=["a", "z"]),
    "titled multi default not values": lambda: EnumSchema.titled_multi_select([("a", "A")],
                                                                               default=["z"]),
    "multi with no values": lambda: EnumSchema.untitled_multi_select([]),
    "titles of another length": lambda: EnumSchema.legacy_titled(["a", "b"], ["A"]),
    "titles not strings": lambda: EnumSchema.legacy_titled(["a"], [1]),
    "legacy default not a value": lambda: EnumSchema.legacy_titled(["a"], ["A"], default="b"),
}


@pytest.mark.feature("ELI-07")
@pytest.mark.parametrize("name", list(INVALID_BUILDS))
def test_builders_refuse_invalid_values_or_options(name):
    with pytest.raises(ValueError):
        INVALID_BUILDS[name]()
