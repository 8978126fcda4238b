"""``AsyncClient`` driving ``input_required`` results (SEP-2322): through the registered handlers,
with capped rounds, backoff for state-only legs, and manual driving when no handler fits.

The modern server is ours, its ASGI application called in process through httpx (every message
both ways checked against the 2026-07-28 schema); the handshake era runs on the same server in
process, where the legacy shim asks the client live. A scripted fake covers what a well-behaved
server never sends.
"""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_client import (
    COMPLETE,
    INPUT_REQUIRED,
    AsyncClient,
    InputRequiredError,
    ServerError,
    ValidationError,
)
from mcp_client import input_required as driver
from mcp_server import InputRequiredResult, Prompt, PromptResult, Server, ServerContext
from mcp_server.http import StreamableHTTPTransport

from .client_support import CheckedHTTPTransport, InProcessTransport, every_message_checked
from .modern_support import MODERN
from .test_modern_http import short_lived_connections  # noqa: F401

CONFIRM_FORM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
PICK_TOOLS = [{"name": "weather", "description": "The weather in a city",
               "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


def asking_server() -> Server:
    """Handlers that ask the client for input, each in the one way that works in either era."""
    server = Server("asking", version="1.0")

    @server.tool
    def delete(title: str, server_context: ServerContext) -> str | InputRequiredResult:
        """Deletes after a confirmation; the state says which title was asked about."""
        answer = server_context.input_response("confirm")
        if answer is None or server_context.request_state != title:
            return InputRequiredResult({"confirm": InputRequiredResult.form_elicitation(
                f"Delete {title}?", CONFIRM_FORM)}, request_state=title)
        confirmed = answer.get("action") == "accept" and answer["content"]["confirm"]
        return f"{'deleted' if confirmed else 'kept'} {title}"

    @server.tool
    def plan(server_context: ServerContext) -> str | InputRequiredResult:
        """Asks the client's model, offering it a tool (SEP-1577), and the client's roots."""
        model, roots = server_context.input_response("model"), server_context.input_response("roots")
        if model is None or roots is None:
            return InputRequiredResult({
                "model": InputRequiredResult.sampling(
                    [{"role": "user", "content": {"type": "text", "text": "Weather in Paris?"}}], 30,
                    tools=PICK_TOOLS, tool_choice={"mode": "auto"}),
                "roots": InputRequiredResult.list_roots()})
        return f"{model['content']['text']} in {', '.join(r['uri'] for r in roots['roots'])}"

    @server.tool
    def busy(legs: int, server_context: ServerContext) -> str | InputRequiredResult:
        """Sheds load ``legs`` times (state only), then asks once, then sheds once more."""
        done = int(server_context.request_state or 0)
        if done == legs and server_context.input_response("go") is None:
            return InputRequiredResult({"go": InputRequiredResult.form_elicitation("Go?", CONFIRM_FORM)},
                                       request_state=str(done))
        if done <= legs:
            return InputRequiredResult(request_state=str(done + 1))
        return f"done after {done} legs"

    @server.tool
    def forever(server_context: ServerContext) -> InputRequiredResult:
        """Asks again whatever the answer."""
        return InputRequiredResult({"again": InputRequiredResult.form_elicitation("Again?", CONFIRM_FORM)})

    class Letter(Prompt):
        name = "letter"

        def template(self, args: dict, server_context: ServerContext) -> PromptResult | InputRequiredResult:
            answer = server_context.input_response("to")
            if answer is None:
                return InputRequiredResult({"to": InputRequiredResult.form_elicitation(
                    "To whom?", {"type": "object", "properties": {"name": {"type": "string"}}})})
            return PromptResult(messages=[{"role": "user", "content": {
                "type": "text", "text": f"Write to {answer['content']['name']}"}}])

    server.add_prompt(Letter)

    @server.resource("test://secret", name="secret")
    def secret(server_context: ServerContext) -> str | InputRequiredResult:
        if server_context.input_response("pin") is None:
            return InputRequiredResult({"pin": InputRequiredResult.form_elicitation(
                "PIN?", {"type": "object", "properties": {"pin": {"type": "string"}}})})
        return f"opened with {server_context.input_response('pin')['content']['pin']}"

    return server


@pytest.fixture
async def modern_client(short_lived_connections):  # noqa: F811
    """A client onto the asking server's Streamable HTTP application; ``sent`` keeps every body."""
    transport = StreamableHTTPTransport(asking_server())
    sent: list[dict] = []

    async def record(request: httpx.Request) -> None:
        if request.content:  # not the closing DELETE
            sent.append(json.loads(request.content))

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi()),
                                 event_hooks={"request": [record]})

    client = AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory))
    client.sent = sent
    yield client
    await client.close()
    await transport.close()


def accept(content: dict):
    asked: list[dict] = []

    def handler(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": content}

    handler.asked = asked
    return handler


def sampled(params: dict) -> dict:
    sampled.seen.append(params)
    return {"role": "assistant", "content": {"type": "text", "text": "sunny"}, "model": "m",
            "stopReason": "endTurn"}


@pytest.mark.feature("MRTR-12", "MRTR-16", "MRTR-17", "PRM-08", "RES-13", "CLI-10", "CLI-12")
async def test_each_input_request_is_answered_by_its_handler_and_the_request_reissued(modern_client):
    client = modern_client
    elicit = accept({"confirm": True, "name": "Ada", "pin": "1234"})
    client.on_elicitation(elicit)
    await client.connect()
    assert client.is_modern
    # Only the kinds a handler is registered for are declared (MRTR-17), beside the Tasks extension.
    assert client.sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}

    assert (await client.call_tool("delete", {"title": "notes"})).text == "deleted notes"
    first, retry = client.sent[-2:]
    assert first["id"] != retry["id"] and "inputResponses" not in first["params"]
    assert retry["params"]["arguments"] == {"title": "notes"}
    assert retry["params"]["inputResponses"] == {"confirm": {
        "action": "accept", "content": {"confirm": True, "name": "Ada", "pin": "1234"}}}
    assert elicit.asked[0]["message"] == "Delete notes?"
    assert elicit.asked[0]["requestedSchema"] == CONFIRM_FORM
    # The sealed state comes back byte for byte: the server opens it, and only then deletes.
    assert retry["params"]["requestState"].startswith("v1.")

    prompt = await client.get_prompt("letter")
    assert prompt["messages"][0]["content"]["text"] == "Write to Ada"
    assert "requestState" not in client.sent[-1]["params"]  # none was given: none is sent back
    [contents] = await client.read_resource("test://secret")
    assert contents["text"] == "opened with 1234"
    # A request of another kind carries nothing of those rounds.
    await client.tools()
    assert set(client.sent[-1]["params"]) == {"_meta"}


@pytest.mark.feature("MRTR-12", "SMP-06", "MRTR-17", "ROOT-05", "MOD-15")
async def test_sampling_with_tools_and_roots_are_answered_in_one_round(modern_client):
    client = modern_client
    sampled.seen = []
    client.on_sampling(sampled)
    client.on_roots(lambda params: {"roots": [{"uri": "file:///work"}]})
    with pytest.warns(DeprecationWarning) as warned:
        await client.connect(capabilities={"sampling": {"tools": {}}})
    # SEP-2577: both deprecated capabilities are named (MOD-15).
    assert sorted(str(warning.message) for warning in warned) == [
        f"the {name} client capability is deprecated as of 2026-07-28 (SEP-2577); it still works, but "
        "servers are moving to other means" for name in ("roots", "sampling")]
    declared = client.sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert declared == {"sampling": {"tools": {}}, "roots": {"listChanged": True},
                        "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert (await client.call_tool("plan")).text == "sunny in file:///work"
    [asked] = sampled.seen
    assert asked["tools"] == PICK_TOOLS and asked["toolChoice"] == {"mode": "auto"}
    assert set(client.sent[-1]["params"]["inputResponses"]) == {"model", "roots"}


@pytest.mark.feature("MRTR-14")
async def test_state_only_legs_back_off_and_reset_after_a_leg_with_input(modern_client, monkeypatch):
    client = modern_client
    client.on_elicitation(accept({"confirm": True}))
    await client.connect()
    delays: list[float] = []

    async def recorded(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(driver, "sleep", recorded)
    assert (await client.call_tool("busy", {"legs": 5})).text == "done after 6 legs"
    # Five state-only legs from 50 ms doubling to the 250 ms cap, a leg with input (no wait),
    # then one more state-only leg from 50 ms again.
    assert delays == [0.05, 0.1, 0.2, 0.25, 0.25, 0.05]
    calls = [m for m in client.sent if m.get("method") == "tools/call"]
    assert len(calls) == 8 and len({m["id"] for m in calls}) == 8
    assert "requestState" not in calls[0]["params"]
    assert all(m["params"]["requestState"].startswith("v1.") for m in calls[1:])  # sealed, echoed


@pytest.mark.feature("MRTR-13", "CLI-01")
async def test_a_server_that_asks_forever_gets_an_error_after_the_cap(modern_client):
    client = modern_client
    client.input_required_max_rounds = 3
    client.on_elicitation(accept({"confirm": True}))
    await client.connect()
    with pytest.raises(InputRequiredError, match="still asking after 3 rounds") as raised:
        await client.call_tool("forever")
    assert list(raised.value.input_requests) == ["again"]
    # Every leg counts: the first request and three retries.
    assert [m.get("method") for m in client.sent].count("tools/call") == 4
    with pytest.raises(ValueError, match="input_required_max_rounds"):
        AsyncClient(client.transport, input_required_max_rounds=-1)


@pytest.mark.feature("MRTR-15")
async def test_with_no_handler_the_caller_drives_by_hand(modern_client):
    client = modern_client
    # Declared without a handler: the caller answers elicitations itself.
    await client.connect(capabilities={"elicitation": {}})
    with pytest.raises(InputRequiredError, match="no handler for elicitation/create") as raised:
        await client.call_tool("delete", {"title": "draft"})
    needed = raised.value
    assert needed.input_requests["confirm"]["params"]["message"] == "Delete draft?"
    assert needed.request_state and needed.result["resultType"] == INPUT_REQUIRED
    answered = await client.call_tool("delete", {"title": "draft"}, request_state=needed.request_state,
                                      input_responses={"confirm": {"action": "decline"}})
    assert answered.text == "kept draft"
    retry = client.sent[-1]["params"]
    assert retry["requestState"] == needed.request_state
    assert retry["inputResponses"] == {"confirm": {"action": "decline"}}
    # A server that asks for input the client has no handler for: declared nothing, so -32021.
    with pytest.raises(ServerError) as refused:
        await client.call_tool("plan")
    assert refused.value.code == -32021


@pytest.mark.feature("ELI-09", "MRTR-12", "SMP-06")
async def test_one_handler_answers_a_live_request_and_an_embedded_one(modern_client):
    """The same application code in either era: on a handshake-era session the server asks live
    (the legacy shim); on a 2026-07-28 connection it answers input_required, which the client
    drives through the very same handlers."""
    elicit = accept({"confirm": True})
    sampled.seen = []
    roots = lambda params: {"roots": [{"uri": "file:///work"}]}  # noqa: E731
    legacy = AsyncClient(InProcessTransport(asking_server()))
    for client in (legacy, modern_client):
        client.on_elicitation(elicit)
        client.on_sampling(sampled)
        client.on_roots(roots)
    await legacy.connect(mode="legacy", capabilities={"sampling": {"tools": {}}})
    with pytest.warns(DeprecationWarning):
        await modern_client.connect(capabilities={"sampling": {"tools": {}}})
    assert not legacy.is_modern and modern_client.is_modern
    for client in (legacy, modern_client):
        assert (await client.call_tool("delete", {"title": "a"})).text == "deleted a"
        assert (await client.call_tool("plan")).text == "sunny in file:///work"
    assert [params["message"] for params in elicit.asked] == ["Delete a?", "Delete a?"]
    # The server offered its tools to the model both times: live, and embedded (SMP-06).
    assert [params["toolChoice"] for params in sampled.seen] == [{"mode": "auto"}] * 2
    await legacy.close()


def scripted(results: list[dict]):
    """A modern server that answers discover, then each tools/call with the next result."""
    def handle(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        if message["method"] == "server/discover":
            result = {"resultType": COMPLETE, "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "scripted", "version": "1"}}
        else:
            result = results.pop(0)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(handle))

    return AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory,
                                            check_server=False))


@pytest.mark.feature("MRTR-16")
async def test_result_types_a_client_does_not_know_are_invalid_answers():
    client = scripted([
        {"content": [{"type": "text", "text": "no resultType"}]},
        {"resultType": "eventually", "content": []},
        {"resultType": INPUT_REQUIRED},
        {"resultType": INPUT_REQUIRED, "inputRequests": {"x": {"method": "ping", "params": {}}}},
    ])
    await client.connect()
    assert client.server_implementation == {"name": "scripted", "version": "1"}
    assert (await client.call_tool("t")).text == "no resultType"  # missing means complete
    with pytest.raises(ValidationError, match="unknown resultType 'eventually'"):
        await client.call_tool("t")
    with pytest.raises(ValidationError, match="neither inputRequests nor requestState"):
        await client.call_tool("t")
    with pytest.raises(ValidationError, match="input request 'x' must be one of"):
        await client.call_tool("t")
    await client.close()


@pytest.mark.feature("CLI-10")
async def test_input_responses_are_refused_on_a_handshake_era_connection():
    client = AsyncClient(InProcessTransport(asking_server()))
    await client.connect(mode="legacy")
    with pytest.raises(ValueError, match="handshake era"):
        await client.call_tool("delete", {"title": "x"}, request_state="s")
    await client.close()


@pytest.mark.feature("EXT-03")
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_extensions_the_application_declares_are_sent_in_either_era(modern_client, mode):
    client = modern_client
    await client.connect(mode=mode, capabilities={"extensions": {"com.example/feature": {"level": 2}}})
    if mode == "auto":
        declared = client.sent[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        # The Tasks extension joins the application's own (call_tool drives a task to its end).
        assert declared["extensions"] == {"com.example/feature": {"level": 2},
                                          "io.modelcontextprotocol/tasks": {}}
        await client.tools()
        assert client.sent[-1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == declared
    else:
        [initialize] = [body for body in client.sent if body.get("method") == "initialize"]
        assert initialize["params"]["capabilities"]["extensions"] == {"com.example/feature": {"level": 2}}
