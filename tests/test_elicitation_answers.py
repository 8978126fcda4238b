"""An accepted form elicitation reaches the tool only when its content matches the requested schema;
otherwise the tool gets ``ElicitationContentError`` (-32602 when uncaught). In process and over HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_server import Server, ServerContext
from mcp_server.elicitation import ElicitationContentError, EnumSchema

from .http_support import Client, running, tool_text
from .peer import connected

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "size": EnumSchema.untitled_single_select(["s", "m", "l"]),
        "tier": EnumSchema.titled_single_select([("gold", "Gold"), ("free", "Free")]),
        "tags": {**EnumSchema.untitled_multi_select(["a", "b", "c"]), "maxItems": 2},
    },
    "required": ["name", "age"],
}
VALID = {"name": "Ada", "age": 36, "score": 0.5, "ok": True, "size": "m", "tier": "gold", "tags": ["a"]}

INVALID = {
    "missing required field": ({"name": "Ada"}, "'age' is a required property"),
    "no content at all": (None, "'name' is a required property"),
    "wrong type": ({**VALID, "age": "thirty-six"}, "age: 'thirty-six' is not of type 'integer'"),
    "boolean for a number": ({**VALID, "score": True}, "score: True is not of type 'number'"),
    "not in enum": ({**VALID, "size": "xl"}, "size: 'xl' is not one of ['s', 'm', 'l']"),
    "not a titled option": ({**VALID, "tier": "platinum"}, "tier: 'platinum' is not valid"),
    "multi-select not in enum": ({**VALID, "tags": ["z"]}, "tags/0:"),
    "below minimum": ({**VALID, "age": -1}, "age: -1 is less than the minimum of 0"),
    "above maximum": ({**VALID, "age": 151}, "age: 151 is greater than the maximum of 150"),
    "too long": ({**VALID, "name": "A" * 11}, "name: 'AAAAAAAAAAA' is too long"),
    "too many items": ({**VALID, "tags": ["a", "b", "c"]}, "tags: ['a', 'b', 'c'] is too long"),
}


def answer(content: Any) -> dict:
    return {"action": "accept"} if content is None else {"action": "accept", "content": content}


def form_server(caught: list[BaseException]) -> Server:
    server = Server("forms")

    @server.define_tool(name="ask", input_schema={"type": "object"})
    async def ask(arguments: dict, server_context: ServerContext) -> str:
        try:
            result = await server_context.create_form_elicitation("Fill in", FORM)
        except ElicitationContentError as exc:
            if not arguments.get("catch"):
                raise
            caught.append(exc)
            return "invalid"
        return json.dumps(result)

    @server.define_tool(name="ask_blocking", input_schema={"type": "object"})
    def ask_blocking(arguments: dict, server_context: ServerContext) -> str:
        try:
            return json.dumps(server_context.create_form_elicitation("Fill in", FORM))
        except ElicitationContentError as exc:
            caught.append(exc)
            return "invalid"

    return server


@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
@pytest.mark.parametrize("name", list(INVALID))
async def test_content_not_matching_the_schema_raises_to_the_tool(name, tool):
    content, expected = INVALID[name]
    caught: list[BaseException] = []
    peer = await connected(form_server(caught), "2025-11-25", {"elicitation": {}})
    peer.answer("elicitation/create", answer(content))
    response = await peer.call_tool(tool, {"catch": True})
    assert response["result"]["content"][0]["text"] == "invalid"
    [error] = caught
    assert isinstance(error, ElicitationContentError) and error.code == -32602
    assert any(expected in message for message in error.errors), error.errors
    assert error.content == ({} if content is None else content)


@pytest.mark.parametrize("name", ["missing required field", "wrong type", "not in enum"])
async def test_uncaught_it_answers_the_request_with_invalid_params(name):
    peer = await connected(form_server([]), "2025-11-25", {"elicitation": {}})
    peer.answer("elicitation/create", answer(INVALID[name][0]))
    response = await peer.call_tool("ask", {})
    error = response["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("Invalid elicitation response: the accepted content does not "
                                       "match the requested schema: ")
    assert INVALID[name][1] in error["message"]
    assert error["data"]["errors"]


@pytest.mark.parametrize("result", [
    answer(VALID),
    answer({"name": "Ada", "age": 0}),  # optional fields may be left out
    {"action": "decline"},
    {"action": "cancel"},
])
async def test_valid_answers_reach_the_tool_unchanged(result):
    caught: list[BaseException] = []
    peer = await connected(form_server(caught), "2025-11-25", {"elicitation": {}})
    peer.answer("elicitation/create", result)
    response = await peer.call_tool("ask", {"catch": True})
    assert json.loads(response["result"]["content"][0]["text"]) == result
    assert caught == []


async def test_fields_the_form_did_not_ask_for_are_left_out():
    caught: list[BaseException] = []
    peer = await connected(form_server(caught), "2025-11-25", {"elicitation": {}})
    peer.answer("elicitation/create", answer({**VALID, "admin": True}))
    response = await peer.call_tool("ask", {"catch": True})
    assert json.loads(response["result"]["content"][0]["text"]) == answer(VALID)
    # They are no excuse for the rest: a wrong value still raises.
    peer.answer("elicitation/create", answer({"name": "Ada", "age": "old", "admin": True}))
    response = await peer.call_tool("ask", {"catch": True})
    assert response["result"]["content"][0]["text"] == "invalid"
    assert caught[0].errors == ["age: 'old' is not of type 'integer'"]


# Over Streamable HTTP (the ``ask_client`` tool of tests/stdio_app asks for a required "colour") --
@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker) as server:
        yield server


def test_invalid_content_over_http(daphne, transactional_db):
    client = Client(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {"colour": 7}}
    caught = json.loads(tool_text(client.tool("ask_client", {"request": "elicit"})))
    assert caught["error"]["type"] == "ElicitationContentError"
    assert caught["error"]["code"] == -32602
    assert "colour: 7 is not of type 'string'" in caught["error"]["message"]

    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {}}
    exchange = client.tool("ask_client", {"request": "elicit", "catch": False})
    assert exchange.response["error"]["code"] == -32602
    assert "'colour' is a required property" in exchange.response["error"]["message"]

    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {"colour": "red"}}
    assert json.loads(tool_text(client.tool("ask_client", {"request": "elicit"}))) == {
        "result": {"action": "accept", "content": {"colour": "red"}}}


@pytest.mark.parametrize("prop", [{"type": "string", "minLength": -1}, {"type": "integer", "maximum": "10"}])
async def test_a_schema_its_answer_could_not_be_checked_against_is_refused_before_asking(prop):
    """Flat but not valid JSON Schema: refused when asking (a ValueError), as a nested one is."""
    server = Server("forms")
    refused: list[BaseException] = []

    @server.define_tool(name="ask", input_schema={"type": "object"})
    async def ask(arguments: dict, server_context: ServerContext) -> str:
        try:
            await server_context.create_form_elicitation("Fill in", {"type": "object",
                                                                     "properties": {"x": prop}})
        except ValueError as exc:
            refused.append(exc)
        return "done"

    peer = await connected(server, "2025-11-25", {"elicitation": {}})
    await peer.call_tool("ask", {})
    assert [type(e).__name__ for e in refused] == ["SchemaError"]
    assert peer.sent == []
