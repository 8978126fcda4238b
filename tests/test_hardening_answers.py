"""Answers an attacker can force, on the demo in real processes: a result JSON cannot carry (``add``
with 1e308 + 1e308 is an infinity) is answered -32603 with its request's id on every transport,
never a 500 with no id; and an elicitation answered with an action a user cannot give ("sure")
never reaches the tool."""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from mcp_server import Server, ServerContext
from mcp_server.elicitation import ElicitationActionError, ElicitationContentError

from .harness import StdioServer
from .http_support import HOOKS, Client, running, tool_text
from .modern_support import envelope, modern_headers, post_over_http
from .peer import connected
from .waiting import PATIENCE
from .wire import check_server_message

HUGE = {"a": 1e308, "b": 1e308}  # their sum is an infinity, which JSON has no form for
UNENCODABLE = {"code": INTERNAL_ERROR, "message": "Internal error"}
SURE = {"action": "sure", "content": {"confirm": True}}
NOT_AN_ANSWER = ("Invalid elicitation response: not an answer a user can give: action: 'sure' is not "
                 "one of ['accept', 'decline', 'cancel']")


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings=HOOKS) as server:
        yield server


@pytest.fixture(scope="module")
def daphne_json(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings={"ENABLE_JSON_RESPONSE": True}) as server:
        yield server


@pytest.fixture
def on_daphne(daphne, transactional_db):
    return daphne


# A result JSON cannot carry -----------------------------------------------------------------------
def test_over_an_sse_stream_it_is_an_error_with_its_id(on_daphne):
    client = Client(on_daphne.url)
    client.initialize()
    exchange = client.request("tools/call", {"name": "add", "arguments": HUGE}, request_id="inf-1")
    assert exchange.response == {"jsonrpc": "2.0", "id": "inf-1", "error": UNENCODABLE}
    assert tool_text(client.tool("add", {"a": 1, "b": 2})) == '{"sum": 3}'  # the session goes on


def test_as_a_json_response_it_is_an_error_with_its_id(daphne_json, transactional_db):
    client = Client(daphne_json.url)
    client.initialize()
    response = client.post_json({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                 "params": {"name": "add", "arguments": HUGE}})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": 7, "error": UNENCODABLE}
    check_server_message(response.json(), "2025-11-25", "tools/call")


def test_on_a_2026_07_28_request_it_is_an_error_with_its_id(on_daphne):
    status, messages = post_over_http(on_daphne.url, "tools/call", 11, name="add", arguments=HUGE)
    assert (status, messages) == (200, [{"jsonrpc": "2.0", "id": 11, "error": UNENCODABLE}])


def test_after_notifications_on_a_2026_07_28_stream_it_is_the_last_event(on_daphne):
    meta = {**envelope(), "progressToken": "p"}
    status, messages = post_over_http(on_daphne.url, "tools/call", 12, meta=meta,
                                      name="progress_then_product", arguments={"value": 1e308, "factor": 10})
    assert status == 200
    assert [message.get("method") for message in messages] == ["notifications/progress", None]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 12, "error": UNENCODABLE}


def test_over_stdio_it_is_an_error_with_its_id():
    with StdioServer(env={"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}) as server:
        server.initialize()
        assert server.request("tools/call", {"name": "add", "arguments": HUGE})["error"] == UNENCODABLE
        answer = server.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert answer["result"]["structuredContent"] == {"sum": 3}


# An elicitation action a user cannot give ----------------------------------------------------------
def test_a_live_answer_that_is_no_action_never_reaches_the_tool(on_daphne):
    client = Client(on_daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    client.answers["elicitation/create"] = lambda params: SURE
    exchange = client.tool("confirm_action", {"action": "launch"})
    assert exchange.response["error"] == {
        "code": INVALID_PARAMS, "message": NOT_AN_ANSWER,
        "data": {"errors": ["action: 'sure' is not one of ['accept', 'decline', 'cancel']"]}}
    client.answers["elicitation/create"] = lambda params: {"action": "decline"}
    assert tool_text(client.tool("confirm_action", {"action": "launch"})) == "Not done: launch (decline)"


def test_a_retry_whose_input_response_is_no_action_is_refused(on_daphne):
    # Sent as it is: the answer is invalid on purpose, so it is not checked against the schema.
    message = {"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {
        "name": "delete_note", "arguments": {"title": "plans"}, "inputResponses": {"confirm": SURE},
        "_meta": envelope()}}
    headers = {k: v for k, v in modern_headers(message).items() if k not in ("host", "content-type")}
    response = httpx.post(on_daphne.url, json=message, headers=headers, timeout=PATIENCE)
    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": 21, "error": {
        "code": INVALID_PARAMS, "message": "Invalid params: inputResponses['confirm'].action must be one of "
                                           "['accept', 'decline', 'cancel'], not 'sure'"}}
    check_server_message(response.json(), "2026-07-28", "tools/call")


@pytest.mark.parametrize("answer", [SURE, {"content": {}}, {"action": None}, {"action": 5}])
async def test_a_url_or_form_answer_that_is_no_action_raises_to_the_tool(answer):
    server = Server("answers")
    caught: list[BaseException] = []

    @server.tool
    async def ask(mode: str, server_context: ServerContext) -> str:
        try:
            if mode == "url":
                await server_context.create_url_elicitation("Sign in", "https://example.com/x", "e1")
            else:
                await server_context.create_form_elicitation("Name?", {
                    "type": "object", "properties": {"name": {"type": "string"}}})
        except ElicitationContentError as exc:  # the invalid action is caught as invalid content is
            caught.append(exc)
            return "refused"
        return "answered"

    peer = await connected(server, "2025-11-25", {"elicitation": {"form": {}, "url": {}}})
    for mode in ("url", "form"):
        peer.answer("elicitation/create", answer)
        response = await peer.call_tool("ask", {"mode": mode})
        assert response["result"]["content"][0]["text"] == "refused"
    assert len(caught) == 2 and all(isinstance(exc, ElicitationActionError) for exc in caught)
    assert caught[0].code == INVALID_PARAMS and caught[0].content == answer


def test_the_demo_stays_usable_after_the_refusals(on_daphne):
    client = Client(on_daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {"confirm": True}}
    assert tool_text(client.tool("confirm_action", {"action": "launch"})) == "Done: launch (priority normal)"
    assert httpx.get(on_daphne.url.replace("/mcp", "/admin/login/"), timeout=30).status_code == 200
    assert json.loads(tool_text(client.tool("add", {"a": 2, "b": 2}))) == {"sum": 4}
