"""The legacy fulfilment shim (MRTR-06/07/08/11): one handler written for input_required serves
handshake-era sessions, whose clients cannot answer it, by asking them live instead.

In process through a client peer (tests/peer.py), then end to end: the demo's ``delete_note`` over
Streamable HTTP (daphne) and over stdio. Every message is checked against the schema of the
session's revision.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server import InputRequiredResult, Prompt, PromptResult, Server, ServerContext

from .harness import StdioServer
from .http_harness import DaphneServer, HTTPClient
from .peer import connected

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASK_NAME = InputRequiredResult.form_elicitation("What is your name?", NAME_FORM)
NAME_ANSWER = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m",
           "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}
EVERYTHING = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}}
CONFIRM = {"action": "accept", "content": {"confirm": True}}


def shim_server(**options: Any) -> tuple[Server, list[dict]]:
    server = Server("shim", **options)
    runs: list[dict] = []

    @server.define_tool(name="ask", input_schema={"type": "object"})
    async def ask(arguments: dict, server_context: ServerContext) -> Any:
        runs.append({"responses": server_context.input_responses, "state": server_context.request_state})
        if server_context.input_responses is None and server_context.request_state is None:
            return InputRequiredResult(arguments.get("requests"), request_state=arguments.get("state"))
        return {"content": [{"type": "text", "text": "done"}],
                "structuredContent": {"responses": server_context.input_responses,
                                      "state": server_context.request_state}}

    @server.define_tool(name="two_steps", input_schema={"type": "object"})
    def two_steps(arguments: dict, server_context: ServerContext) -> Any:
        runs.append({"responses": server_context.input_responses, "state": server_context.request_state})
        if server_context.request_state is None:
            return InputRequiredResult({"step1": ASK_NAME}, request_state="after-1")
        if server_context.request_state == "after-1":
            name = server_context.input_response("step1")["content"]["name"]
            return InputRequiredResult({"step2": InputRequiredResult.list_roots()},
                                       request_state=f"after-2:{name}")
        roots = server_context.input_response("step2")["roots"]
        return f"{server_context.request_state} with {len(roots)} root"

    @server.define_tool(name="forever", input_schema={"type": "object"})
    def forever(arguments: dict, server_context: ServerContext) -> Any:
        runs.append({"responses": server_context.input_responses, "state": server_context.request_state})
        return InputRequiredResult({"again": ASK_NAME})

    class Greeting(Prompt):
        name = "greeting"

        def template(self, args: dict, server_context: ServerContext) -> Any:
            answer = server_context.input_response("name")
            if answer is None:
                return InputRequiredResult({"name": ASK_NAME})
            text = f"Hello, {answer['content']['name']}"
            return PromptResult(messages=[{"role": "user", "content": {"type": "text", "text": text}}])

    server.add_prompt(Greeting)

    @server.resource_template("test://{who}/card", name="card")
    def card(who: str, server_context: ServerContext) -> Any:
        roots = server_context.input_response("roots")
        if roots is None:
            return InputRequiredResult({"roots": InputRequiredResult.list_roots()})
        return f"{who}: {roots['roots'][0]['uri']}"

    return server, runs


def structured(response: dict) -> Any:
    assert "result" in response, response
    return response["result"]["structuredContent"]


@pytest.mark.feature("MRTR-07", "MRTR-11")
async def test_each_input_request_is_asked_live_for_the_originating_request(settings):
    settings.MCP_SERVER = {}  # no sealing keys: the shim keeps the state in process, unsealed
    server, runs = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", NAME_ANSWER)
    peer.answer("sampling/createMessage", SAMPLED)
    peer.answer("roots/list", ROOTS)
    requests = {"who": ASK_NAME, "capital": InputRequiredResult.sampling(
        [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}], 20),
        "roots": InputRequiredResult.list_roots()}
    response = await peer.call_tool("ask", {"requests": requests, "state": "raw-state"}, request_id=41)
    assert structured(response) == {"responses": {"who": NAME_ANSWER, "capital": SAMPLED, "roots": ROOTS},
                                    "state": "raw-state"}
    sent = peer.requests()
    assert [s.method for s in sent] == ["elicitation/create", "sampling/createMessage", "roots/list"]
    assert all(s.related_request_id == 41 for s in sent)  # SEP-2260: tied to the tool call
    assert sent[0].params == {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM}
    assert runs == [{"responses": None, "state": None},
                    {"responses": {"who": NAME_ANSWER, "capital": SAMPLED, "roots": ROOTS},
                     "state": "raw-state"}]


@pytest.mark.feature("MRTR-07")
async def test_rounds_follow_each_other_with_the_new_answers_and_state():
    server, runs = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", NAME_ANSWER)
    peer.answer("roots/list", ROOTS)
    response = await peer.call_tool("two_steps")
    assert response["result"]["content"][0]["text"] == "after-2:Ada with 1 root"
    assert [r["state"] for r in runs] == [None, "after-1", "after-2:Ada"]
    assert runs[2]["responses"] == {"step2": ROOTS}  # only the last round's answers


@pytest.mark.feature("MRTR-07")
async def test_prompts_and_resource_templates_are_fulfilled_too():
    server, _ = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", NAME_ANSWER)
    peer.answer("roots/list", ROOTS)
    prompt = await peer.result("prompts/get", {"name": "greeting"})
    assert prompt["messages"][0]["content"]["text"] == "Hello, Ada"
    read = await peer.result("resources/read", {"uri": "test://ada/card"})
    assert read["contents"][0]["text"] == "ada: file:///work"


@pytest.mark.feature("MRTR-07")
async def test_a_2025_06_18_client_gets_a_form_without_mode_and_its_answer_is_checked():
    server, _ = shim_server()
    peer = await connected(server, "2025-06-18", {"elicitation": {}})
    script = peer.answer("elicitation/create", {"action": "accept", "content": {"name": 5}}, check=False)
    response = await peer.call_tool("ask", {"requests": {"who": ASK_NAME}})
    assert script.answered[0]["params"] == {"message": "What is your name?", "requestedSchema": NAME_FORM}
    assert response["error"]["code"] == -32602  # the answer does not match the form


@pytest.mark.feature("MRTR-05", "MRTR-07")
async def test_a_state_only_result_is_retried_at_once_with_its_state():
    server, runs = shim_server()
    peer = await connected(server, "2025-11-25", {})
    response = await peer.call_tool("ask", {"state": "busy"})
    assert structured(response) == {"responses": None, "state": "busy"}
    assert peer.requests() == [] and len(runs) == 2


@pytest.mark.feature("MRTR-08")
async def test_at_most_eight_rounds_then_internal_error():
    server, runs = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", NAME_ANSWER)
    response = await peer.call_tool("forever")
    assert response["error"]["code"] == -32603 and "8 rounds" in response["error"]["message"]
    assert len(peer.requests("elicitation/create")) == 8 and len(runs) == 9


@pytest.mark.feature("MRTR-08")
async def test_the_round_cap_is_a_server_option():
    server, _ = shim_server(input_required_max_rounds=2)
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", NAME_ANSWER)
    response = await peer.call_tool("forever")
    assert response["error"]["code"] == -32603
    assert len(peer.requests("elicitation/create")) == 2
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError):
            Server("s", input_required_max_rounds=bad)


@pytest.mark.feature("MRTR-08")
@pytest.mark.parametrize(("revision", "capabilities", "missing"), [
    ("2025-11-25", {"elicitation": {"url": {}}}, "elicitation.form, roots"),
    ("2025-11-25", {}, "elicitation.form, roots"),
    ("2024-11-05", {"roots": {}}, "elicitation.form"),  # no elicitation in that revision at all
])
async def test_missing_client_capabilities_are_listed_in_an_internal_error(revision, capabilities, missing):
    server, runs = shim_server()
    peer = await connected(server, revision, capabilities)
    requests = {"a": ASK_NAME, "b": InputRequiredResult.list_roots(), "c": ASK_NAME}
    response = await peer.call_tool("ask", {"requests": requests})
    assert response["error"]["code"] == -32603
    assert response["error"]["message"].endswith(missing)
    assert peer.requests() == [] and len(runs) == 1  # nothing asked, nothing re-run


@pytest.mark.feature("MRTR-08")
async def test_a_url_elicitation_without_an_id_gets_one():
    server, _ = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.answer("elicitation/create", {"action": "accept"})
    with_id = InputRequiredResult.url_elicitation("Sign in", "https://example.com/a", "given")
    without = InputRequiredResult.url_elicitation("Sign in", "https://example.com/b")
    response = await peer.call_tool("ask", {"requests": {"a": with_id, "b": without}})
    assert "result" in response
    first, second = (s.params for s in peer.requests("elicitation/create"))
    assert first["elicitationId"] == "given"
    assert isinstance(second["elicitationId"], str) and len(second["elicitationId"]) >= 16
    assert "elicitationId" not in without["params"]  # the handler's value is left as it was


@pytest.mark.feature("MRTR-06")
async def test_with_the_shim_off_a_handshake_session_gets_an_error():
    server, runs = shim_server(input_required_legacy_shim=False)
    peer = await connected(server, "2025-11-25", EVERYTHING)
    response = await peer.call_tool("ask", {"requests": {"a": ASK_NAME}})
    assert response["error"]["code"] == -32603
    assert "require the 2026-07-28 stateless lifecycle" in response["error"]["message"]
    assert peer.requests() == [] and len(runs) == 1


# End to end: the demo's delete_note ----------------------------------------------------------------

@pytest.fixture
def daphne(transactional_db):
    server = DaphneServer()
    yield server
    server.stop()


@pytest.mark.feature("MRTR-07")
def test_the_demo_tool_asks_over_streamable_http(daphne):
    client = HTTPClient(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    asked: list[dict] = []

    def confirm(params: dict) -> dict:
        asked.append(params)
        return CONFIRM

    client.answers["elicitation/create"] = confirm
    exchange = client.request("tools/call", {"name": "delete_note", "arguments": {"title": "old"}})
    assert exchange.response["result"]["content"][0]["text"] == "Deleted the note 'old'"
    assert asked[0]["message"] == "Delete the note 'old'?" and asked[0]["mode"] == "form"
    client.answers["elicitation/create"] = lambda params: {"action": "decline"}
    exchange = client.request("tools/call", {"name": "delete_note", "arguments": {"title": "old"}})
    assert exchange.response["result"]["content"][0]["text"] == "Kept the note 'old' (decline)"
    client.close()


@pytest.mark.feature("MRTR-07")
def test_the_demo_tool_asks_over_stdio():
    with StdioServer(env={"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}, revision="2025-11-25") as server:
        server.initialize("2025-11-25", {"elicitation": {"form": {}}})
        call = server.send_request("tools/call", {"name": "delete_note", "arguments": {"title": "draft"}})
        request = server.server_request("elicitation/create")
        assert request["params"]["requestedSchema"]["required"] == ["confirm"]
        server.answer(request, CONFIRM)
        response = server.response(call)
        assert response["result"]["content"] == [{"type": "text", "text": "Deleted the note 'draft'"}]


@pytest.mark.feature("MRTR-08")
async def test_a_session_that_cannot_reach_its_client_gets_an_internal_error():
    server, runs = shim_server()
    peer = await connected(server, "2025-11-25", EVERYTHING)
    peer.session.requests_refused = "stateless HTTP sends nothing but the response"
    response = await peer.call_tool("ask", {"requests": {"a": ASK_NAME}})
    assert response["error"]["code"] == -32603
    assert "stateless HTTP sends nothing but the response" in response["error"]["message"]
    assert peer.requests() == [] and len(runs) == 1
