"""Declared asks (``Annotated[T, Resolve(fn)]``, ``mcp_server.asks``), in process, in both eras.

A 2026-07-28 request gets the asks of a round together in one input_required result whose sealed
state carries the answers so far; a handshake-era session is asked live (tests/peer.py). The
handler's body runs once either way. Every message is checked against its revision's schema.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from mcp_server import (
    AskDeclinedError,
    Elicit,
    ElicitationResult,
    ElicitURL,
    ListRoots,
    Prompt,
    RequestStateSecurity,
    Resolve,
    Sample,
    Server,
    ServerContext,
    Tool,
)

from .peer import connected
from .test_input_required import KEY, modern

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CITY_FORM = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TONE_FORM = {"type": "object", "properties": {"tone": {"type": "string"}}, "required": ["tone"]}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}
EVERYTHING = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}


# Resolvers are module-level names: the handlers' annotations (strings here) refer to them.
def name_of(greeting: str) -> Elicit:
    return Elicit(f"{greeting}! What is your name?", NAME_FORM)

def city_of(name: Annotated[dict, Resolve(name_of)], server_context: ServerContext) -> Elicit:
    assert isinstance(server_context, ServerContext)
    return Elicit(f"Where do you live, {name['name']}?", CITY_FORM)

def capital() -> Sample:
    return Sample([{"role": "user", "content": {"type": "text", "text": "Capital?"}}], 20)


def asking_server() -> tuple[Server, list[Any]]:
    server = Server("asks", ttl_ms=1000, cache_scope="public",
                    request_state_security=RequestStateSecurity(key=KEY))
    bodies: list[Any] = []

    @server.tool
    def travel(greeting: str, name: Annotated[dict, Resolve(name_of)],
               city: Annotated[dict, Resolve(city_of)], server_context: ServerContext) -> str:
        bodies.append(("travel", name, city))
        return f"{greeting}, {name['name']} from {city['city']}"

    @server.tool
    def survey(answer: Annotated[ElicitationResult, Elicit("Happy?", NAME_FORM)],
               sampled: Annotated[dict, Resolve(capital)], roots: Annotated[list, ListRoots()]) -> str:
        bodies.append(("survey", answer, sampled["content"]["text"], roots))
        return f"{answer.action} {sampled['content']['text']} {len(roots)}"

    @server.tool
    def strict(name: Annotated[dict, Elicit("Name?", NAME_FORM)]) -> str:
        bodies.append(("strict", name))
        return name["name"]

    @server.tool
    def sign_in(done: Annotated[dict, ElicitURL("Sign in", "https://example.com/in", "e-1")]) -> str:
        return f"signed in {done}"

    class Deploy(Tool):
        input_schema = {"properties": {"target": {"type": "string"}, "greeting": {"type": "string"}}}

        def call(self, target: str, greeting: str, name: Annotated[dict, Resolve(name_of)]) -> str:
            bodies.append(("deploy", name))
            return f"{target} by {name['name']}"

    server.add_tool(Deploy)

    @server.define_tool(name="define_style", input_schema={"type": "object"})
    def define_style(arguments: dict, name: Annotated[dict, Elicit("Name?", NAME_FORM)]) -> str:
        return f"{arguments.get('greeting')} {name['name']}"

    class Card(Prompt):
        name = "card"

        def template(self, args: dict, name: Annotated[dict, Resolve(name_of)]) -> str:
            return f"A card for {name['name']} ({args['greeting']})"

    server.add_prompt(Card)

    @server.prompt
    def review(topic: str, tone: Annotated[dict, Elicit("Which tone?", TONE_FORM)]) -> str:
        return f"Review {topic} in a {tone['tone']} tone."

    @server.resource_template("test://{who}/note", name="note")
    def note(who: str, name: Annotated[dict, Elicit("Name?", NAME_FORM)]) -> str:
        return f"{who} by {name['name']}"

    return server, bodies


def accept(**content: Any) -> dict:
    return {"action": "accept", "content": content}


def text(response: dict) -> str:
    assert "result" in response, response
    return response["result"]["content"][0]["text"]


def test_declared_parameters_are_not_arguments():
    server, _ = asking_server()
    tools = {name: tool.to_dict() for name, tool in server.tools.items()}
    schema = tools["travel"]["inputSchema"]
    assert (schema["properties"], schema["required"]) == ({"greeting": {"type": "string"}}, ["greeting"])
    assert tools["survey"]["inputSchema"]["properties"] == {}


async def test_a_modern_request_asks_round_by_round_and_the_body_runs_once():
    server, bodies = asking_server()
    call = {"name": "travel", "arguments": {"greeting": "Hi"}}
    first = (await modern(server, "tools/call", call))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"name_of": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Hi! What is your name?", "requestedSchema": NAME_FORM}}}
    assert first["requestState"].startswith("v1.")
    # The second form depends on the first answer; the state carries that answer on.
    retry = {**call, "inputResponses": {"name_of": accept(name="Ada")}, "requestState": first["requestState"]}
    second = (await modern(server, "tools/call", retry, request_id=2))["result"]
    assert list(second["inputRequests"]) == ["city_of"]
    assert second["inputRequests"]["city_of"]["params"]["message"] == "Where do you live, Ada?"
    assert bodies == []
    third = await modern(server, "tools/call", {**call, "inputResponses": {"city_of": accept(city="Paris")},
                                                "requestState": second["requestState"]}, request_id=3)
    assert text(third) == "Hi, Ada from Paris"
    assert bodies == [("travel", {"name": "Ada"}, {"city": "Paris"})]


async def test_independent_asks_go_out_together_and_a_decline_reaches_a_full_outcome():
    server, bodies = asking_server()
    first = (await modern(server, "tools/call", {"name": "survey", "arguments": {}}))["result"]
    assert sorted(first["inputRequests"]) == ["answer", "capital", "roots"]
    answers = {"answer": {"action": "decline"}, "capital": SAMPLED, "roots": ROOTS}
    done = await modern(server, "tools/call", {"name": "survey", "arguments": {},
                                               "inputResponses": answers,
                                               "requestState": first["requestState"]}, request_id=2)
    assert text(done) == "decline Paris 1"
    assert bodies == [("survey", ElicitationResult("decline"), "Paris", ROOTS["roots"])]


async def test_a_decline_of_an_unwrapped_ask_ends_the_call_with_an_error_result():
    server, bodies = asking_server()
    first = (await modern(server, "tools/call", {"name": "strict", "arguments": {}}))["result"]
    done = await modern(server, "tools/call", {"name": "strict", "arguments": {},
                                               "inputResponses": {"name": {"action": "cancel"}},
                                               "requestState": first["requestState"]}, request_id=2)
    assert done["result"]["isError"] is True
    assert text(done) == "The user cancelled the request: Name?"
    assert bodies == []
    # A prompt or resource read ends with the JSON-RPC error of a user's rejection instead.
    read = (await modern(server, "resources/read", {"uri": "test://ada/note"}))["result"]
    declined = await modern(server, "resources/read", {
        "uri": "test://ada/note", "inputResponses": {"name": {"action": "decline"}},
        "requestState": read["requestState"]}, request_id=3)
    assert declined["error"]["code"] == AskDeclinedError.code == -1
    assert declined["error"]["message"] == "The user declined the request: Name?"


async def test_answers_are_checked_and_only_count_for_the_question_asked():
    server, bodies = asking_server()
    first = (await modern(server, "tools/call", {"name": "strict", "arguments": {}}))["result"]
    bad = await modern(server, "tools/call", {"name": "strict", "arguments": {},
                                              "inputResponses": {"name": accept(name=7)},
                                              "requestState": first["requestState"]}, request_id=2)
    assert bad["error"]["code"] == -32602
    # Without the state of the round that asked, an answer is not taken: the question comes again.
    again = (await modern(server, "tools/call", {"name": "strict", "arguments": {},
                                                 "inputResponses": {"name": accept(name="Eve")}}))["result"]
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["name"]
    assert bodies == []


async def test_prompts_and_resource_templates_declare_asks_too():
    server, _ = asking_server()
    listed = server.prompts["card"].to_dict()
    assert listed["arguments"] == []
    card = {"name": "card", "arguments": {"greeting": "Hey"}}
    first = (await modern(server, "prompts/get", card))["result"]
    assert first["inputRequests"]["name_of"]["params"]["message"] == "Hey! What is your name?"
    done = await modern(server, "prompts/get", {"name": "card", "arguments": {"greeting": "Hey"},
                                                "inputResponses": {"name_of": accept(name="Ada")},
                                                "requestState": first["requestState"]}, request_id=2)
    assert done["result"]["messages"][0]["content"]["text"] == "A card for Ada (Hey)"
    assert [a["name"] for a in server.prompts["review"].to_dict()["arguments"]] == ["topic"]
    review = {"name": "review", "arguments": {"topic": "the plan"}}
    first = (await modern(server, "prompts/get", review))["result"]
    done = await modern(server, "prompts/get", {**review, "inputResponses": {"tone": accept(tone="kind")},
                                                "requestState": first["requestState"]}, request_id=3)
    assert done["result"]["messages"][0]["content"]["text"] == "Review the plan in a kind tone."
    first = (await modern(server, "resources/read", {"uri": "test://ada/note"}))["result"]
    done = await modern(server, "resources/read", {"uri": "test://ada/note",
                                                   "inputResponses": {"name": accept(name="Bo")},
                                                   "requestState": first["requestState"]}, request_id=2)
    assert done["result"]["contents"][0]["text"] == "ada by Bo"


async def test_tool_classes_and_defined_handlers_declare_asks_too():
    server, bodies = asking_server()
    cases = (("deploy", {"target": "prod", "greeting": "Yo"}, "name_of", "prod by Ada"),
             ("define_style", {"greeting": "Yo"}, "name", "Yo Ada"))
    for name, arguments, key, expected in cases:
        first = (await modern(server, "tools/call", {"name": name, "arguments": arguments}))["result"]
        assert list(first["inputRequests"]) == [key]
        done = await modern(server, "tools/call", {"name": name, "arguments": arguments,
                                                   "inputResponses": {key: accept(name="Ada")},
                                                   "requestState": first["requestState"]}, request_id=2)
        assert text(done) == expected
    assert bodies == [("deploy", {"name": "Ada"})]


async def test_a_handshake_session_is_asked_live_and_the_resolvers_run_once():
    server, bodies = asking_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    answers = iter([accept(name="Ada"), accept(city="Oslo")])
    peer.answer("elicitation/create", respond=lambda params: next(answers))
    response = await peer.call_tool("travel", {"greeting": "Hi"}, request_id=9)
    assert text(response) == "Hi, Ada from Oslo"
    sent = peer.requests()
    assert [s.params["message"] for s in sent] == ["Hi! What is your name?", "Where do you live, Ada?"]
    assert all(s.related_request_id == 9 for s in sent)
    peer.answer("elicitation/create", {"action": "decline"})
    peer.answer("sampling/createMessage", SAMPLED)
    peer.answer("roots/list", ROOTS)
    assert text(await peer.call_tool("survey", {})) == "decline Paris 1"
    declined = await peer.call_tool("strict", {})
    assert declined["result"]["isError"] is True
    assert text(declined) == "The user declined the request: Name?"
    assert [b[0] for b in bodies] == ["travel", "survey"]


async def test_a_modern_client_without_the_capability_gets_32021():
    server, _ = asking_server()
    response = await modern(server, "tools/call", {"name": "sign_in", "arguments": {}},
                            capabilities={"elicitation": {"form": {}}})
    assert response["error"]["code"] == -32021
    assert response["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


def _itself(x: Any) -> Any:
    return x


def test_a_resolver_that_depends_on_itself_is_refused_and_a_plain_handler_has_no_plan():
    from mcp_server.resolution import plan_of

    _itself.__annotations__ = {"x": Annotated[dict, Resolve(_itself)]}

    def handler(value: Any) -> None:
        pass

    handler.__annotations__ = {"value": Annotated[dict, Resolve(_itself)]}
    with pytest.raises(TypeError, match="depends on itself"):
        plan_of(handler)
    assert plan_of(text) is None


async def test_the_live_requests_name_the_declarative_way_on_the_modern_wire():
    from mcp_protocol.envelope import parse_envelope
    from mcp_server.modern.request_session import ModernSession

    from .test_input_required import envelope_meta

    server = Server("live")

    @server.tool
    async def old_style(server_context: ServerContext) -> str:
        return str(await server_context.create_form_elicitation("Name?", NAME_FORM))

    params = {"name": "old_style", "arguments": {}, "_meta": envelope_meta()}
    session = ModernSession(server, parse_envelope(params), outbound=None, listen_supported=False)
    response = await server.handle_async({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                          "params": params}, session)
    message = response["error"]["message"]
    assert message.startswith("elicitation/create: server-to-client requests are not part of the 2026-07-28")
    assert "Annotated[dict, Resolve(fn)]" in message and "Elicit(message, schema)" in message
