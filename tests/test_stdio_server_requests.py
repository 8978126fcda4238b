"""The server talks back over stdio: requests to the client, timeouts, cancellation, progress, logging.

Every test runs ``manage.py mcp_stdio`` as a subprocess with the demo project plus the test app
(tests/stdio_app: ``ask_client``, ``log_every_level``, ``wait_for_cancel``), and answers the
server's requests itself. Every line in both directions is checked against the negotiated
revision's schema (tests/harness.py StdioServer); the client's answers also against the result
type of the request they answer.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mcp_server.logging_levels import LEVELS

from .harness import StdioServer
from .waiting import PATIENCE, SLOW_STEPS

# Not imported from tests/stdio_app/mcp.py or tests/stdio_settings.py: importing the test app here
# would register its tools on this process's default server.
COLOUR_SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string", "title": "Colour"}},
    "required": ["colour"],
}
INSTRUMENTATION_PREFIX = "mcp-test-instrumentation "
REVISIONS = ["2025-11-25", "2024-11-05"]
TEST_SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}
INSTRUMENTED = {**TEST_SETTINGS, "MCP_TEST_INSTRUMENT": "1"}
# Elicitation exists from 2025-06-18 on; sampling and roots in every revision.
CLIENT_CAPABILITIES = {
    "2025-11-25": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}},
    "2025-06-18": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}},
    "2024-11-05": {"roots": {"listChanged": True}, "sampling": {}},
}
# A request of each kind the test app can make, in a revision that has it.
KINDS = [("2025-11-25", "elicit"), ("2024-11-05", "sample"), ("2025-11-25", "roots")]
NESTED_METHOD = {"elicit": "elicitation/create", "sample": "sampling/createMessage", "roots": "roots/list"}
# A valid answer of the client to each kind.
ANSWERS = {
    "elicit": {"action": "accept", "content": {"colour": "teal"}},
    "sample": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "test-model",
               "stopReason": "endTurn"},
    "roots": {"roots": [{"uri": "file:///work/project", "name": "project"}]},
}
SAMPLING_PARAMS = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "What is 2 + 2?"}}],
    "maxTokens": 64, "systemPrompt": "Answer briefly.", "temperature": 0.5, "stopSequences": ["END"],
    "metadata": {"purpose": "test"}, "includeContext": "thisServer",
    "modelPreferences": {"hints": [{"name": "small"}], "speedPriority": 0.75},
}


def start(revision: str, env: dict | None = None, **options: Any) -> StdioServer:
    server = StdioServer(env={**TEST_SETTINGS, **(env or {})}, revision=revision, **options)
    server.initialize(revision, CLIENT_CAPABILITIES[revision])
    return server


def call_tool(server: StdioServer, name: str, arguments: dict | None = None, *,
              request_id: Any = None, progress_token: Any = None) -> Any:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return server.send_request("tools/call", params, request_id=request_id)


def tool_json(response: dict) -> Any:
    """The JSON text a test tool returned."""
    assert "result" in response and response["result"].get("isError") is False, response
    return json.loads(response["result"]["content"][0]["text"])


def index_of(server: StdioServer, message: dict) -> int:
    """Where ``message`` came in the server's output (identity, not equality)."""
    return next(i for i, m in enumerate(server.received) if m is message)


def cancelled_notifications(server: StdioServer) -> list[dict]:
    return [m["params"] for m in server.notifications if m["method"] == "notifications/cancelled"]


def instrumentation(server: StdioServer, tool: str, timeout: float = PATIENCE) -> dict:
    """The instrumentation data of the call of ``tool`` (MCP_TEST_INSTRUMENT), once it has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in server.stderr.splitlines():
            if line.startswith(INSTRUMENTATION_PREFIX):
                data = json.loads(line[len(INSTRUMENTATION_PREFIX):])
                if data.get("tool_name") == tool:
                    return data
        time.sleep(0.01)
    raise AssertionError(f"no instrumentation for {tool} in {timeout}s; stderr:\n{server.stderr}")


def assert_serves_meanwhile(server: StdioServer) -> None:
    """A ping and a tool call sent now are answered although a server request is still open."""
    assert server.request("ping")["result"] == {}
    echoed = server.request("tools/call", {"name": "echo", "arguments": {"message": "meanwhile"}})
    assert echoed["result"]["content"] == [{"type": "text", "text": "meanwhile"}]


# --- STDIO-04: requests to the client; other frames are served while one waits ------------------

@pytest.mark.feature("STDIO-04", "ELI-01")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])
def test_elicitation_is_written_and_other_frames_are_served_while_it_waits(revision):
    with start(revision) as server:
        call = call_tool(server, "ask_client", {"request": "elicit"})
        request = server.server_request("elicitation/create")
        expected = {"message": "Which colour?", "requestedSchema": COLOUR_SCHEMA}
        if revision >= "2025-11-25":
            expected = {"mode": "form", **expected}  # modes arrived with 2025-11-25
        assert request["params"] == expected
        assert_serves_meanwhile(server)
        server.answer(request, ANSWERS["elicit"])
        assert tool_json(server.response(call)) == {"result": ANSWERS["elicit"]}
        # A decline comes back as such, without content.
        call = call_tool(server, "ask_client", {"request": "elicit"})
        server.answer(server.server_request("elicitation/create"), {"action": "decline"})
        assert tool_json(server.response(call)) == {"result": {"action": "decline"}}
        assert server.close() == 0


@pytest.mark.feature("STDIO-04", "SMP-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_sampling_is_written_with_camel_case_params_and_its_answer_returned(revision):
    with start(revision) as server:
        call = call_tool(server, "ask_client", {"request": "sample"})
        request = server.server_request("sampling/createMessage")
        # Exactly these keys: tools and toolChoice, left as None, are not sent.
        assert request["params"] == SAMPLING_PARAMS
        assert_serves_meanwhile(server)
        server.answer(request, ANSWERS["sample"])
        assert tool_json(server.response(call)) == {"result": ANSWERS["sample"]}
        assert server.close() == 0


@pytest.mark.feature("STDIO-04", "ROOT-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_roots_list_is_written_and_its_answer_returned(revision):
    with start(revision) as server:
        call = call_tool(server, "ask_client", {"request": "roots"})
        request = server.server_request("roots/list")
        assert "params" not in request
        assert_serves_meanwhile(server)
        server.answer(request, ANSWERS["roots"])
        assert tool_json(server.response(call)) == {"result": ANSWERS["roots"]}
        assert server.close() == 0


@pytest.mark.feature("STDIO-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_answers_are_matched_by_id_when_several_requests_wait(revision):
    with start(revision) as server:
        first = call_tool(server, "ask_client", {"request": "sample"})
        second = call_tool(server, "ask_client", {"request": "roots"})
        third = call_tool(server, "ask_client", {"request": "ping"})
        requests = {m: server.server_request(m) for m in ("sampling/createMessage", "roots/list", "ping")}
        assert len({r["id"] for r in requests.values()}) == 3
        # Answered in the reverse order: each handler still gets its own answer.
        server.answer(requests["ping"], {})
        server.answer(requests["roots/list"], ANSWERS["roots"])
        server.answer(requests["sampling/createMessage"], ANSWERS["sample"])
        assert tool_json(server.response(third)) == {"result": {}}
        assert tool_json(server.response(second)) == {"result": ANSWERS["roots"]}
        assert tool_json(server.response(first)) == {"result": ANSWERS["sample"]}
        assert server.close() == 0


@pytest.mark.feature("STDIO-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_client_that_answers_every_server_request_as_it_comes(revision):
    def answer(request: dict) -> dict:
        result = {} if request["method"] == "ping" else ANSWERS["roots"]
        return {"jsonrpc": "2.0", "id": request["id"], "result": result}

    with start(revision, on_request=answer) as server:
        pinged = server.request("tools/call", {"name": "ask_client", "arguments": {"request": "ping"}})
        assert tool_json(pinged) == {"result": {}}
        rooted = server.request("tools/call", {"name": "ask_client", "arguments": {"request": "roots"}})
        assert tool_json(rooted) == {"result": ANSWERS["roots"]}
        assert [r["method"] for r in server.server_requests] == ["ping", "roots/list"]
        assert server.close() == 0


@pytest.mark.feature("STDIO-04", "SMP-04", "ROOT-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_client_error_raises_in_the_handler_with_its_code_and_message(revision):
    with start(revision) as server:
        cases = [("sample", {"code": -1, "message": "User rejected sampling"}),
                 ("roots", {"code": -32601, "message": "Roots not supported"})]
        for kind, error in cases:
            call = call_tool(server, "ask_client", {"request": kind})
            server.answer(server.server_request(NESTED_METHOD[kind]), error=error)
            assert tool_json(server.response(call)) == {"error": {"type": "MCPError", **error}}
            line = f"-> MCPError: {error['message']}"
            assert line in server.wait_for_stderr(line)
        # Uncaught, the client's error answers the tool call with that code and message.
        call = call_tool(server, "ask_client", {"request": "sample", "catch": False})
        server.answer(server.server_request("sampling/createMessage"),
                      error={"code": -1, "message": "User rejected sampling", "data": {"why": "no"}})
        assert server.response(call)["error"] == {"code": -1, "message": "User rejected sampling",
                                                  "data": {"why": "no"}}
        assert server.close() == 0


@pytest.mark.feature("STDIO-04")
@pytest.mark.parametrize(("revision", "kind"), KINDS)
def test_end_of_input_ends_the_wait_with_transport_closed(revision, kind):
    with start(revision) as server:
        call = call_tool(server, "ask_client", {"request": kind})
        server.server_request(NESTED_METHOD[kind])
        rest = server.read_to_end()  # stdin closes with the request unanswered
        assert [m["id"] for m in rest] == [call]
        error = tool_json(rest[0])["error"]
        assert error["type"] == "DeliveryError"
        assert error["message"].startswith("Transport closed"), error
        assert server.process.wait(PATIENCE) == 0


# --- STDIO-05 (exceeded: timeouts apply over stdio), CAN-10, ELI-10 ------------------------------

@pytest.mark.feature("STDIO-05", "CAN-10", "ELI-10")
@pytest.mark.parametrize(("revision", "kind"), KINDS)
def test_per_call_timeout_cancels_the_request_and_answers_the_call_with_32001(revision, kind):
    with start(revision) as server:  # the server's own default is 600 s
        sent = time.monotonic()
        call = call_tool(server, "ask_client", {"request": kind, "timeout": 0.3, "catch": False})
        request = server.server_request(NESTED_METHOD[kind])
        response = server.response(call)
        waited = time.monotonic() - sent
        assert response["error"]["code"] == -32001
        assert "within 0.3 s" in response["error"]["message"]  # the call's timeout, not the default
        assert waited >= 0.3, waited  # not before its time
        # The client was told first, naming the request that timed out.
        [cancel] = [m for m in server.notifications if m["method"] == "notifications/cancelled"]
        assert cancel["params"] == {"requestId": request["id"], "reason": "timed out"}
        assert index_of(server, cancel) < index_of(server, response)
        line = f"ask_client({kind}) of request {call!r} -> RequestTimeoutError"
        assert line in server.wait_for_stderr(line)
        # An answer after the timeout is ignored, and the server carries on.
        server.answer(request, ANSWERS[kind])
        seen = len(server.received)
        assert server.request("ping")["result"] == {}
        assert len(server.received) == seen + 1
        assert server.close() == 0


@pytest.mark.feature("STDIO-05", "CAN-10")
@pytest.mark.parametrize(("revision", "kind"), KINDS)
def test_server_default_timeout_applies_over_stdio(revision, kind):
    with start(revision, {"MCP_TEST_S2C_TIMEOUT": "0.4"}) as server:
        call = call_tool(server, "ask_client", {"request": kind})
        request = server.server_request(NESTED_METHOD[kind])
        error = tool_json(server.response(call))["error"]
        assert (error["type"], error["code"]) == ("RequestTimeoutError", -32001)
        assert "0.4" in error["message"]
        assert cancelled_notifications(server) == [{"requestId": request["id"], "reason": "timed out"}]
        assert server.close() == 0


@pytest.mark.feature("STDIO-05", "ELI-10", "CAN-10")
@pytest.mark.parametrize(("revision", "kind"), [("2025-11-25", "elicit"), ("2024-11-05", "sample")])
def test_per_call_timeout_overrides_a_shorter_server_default(revision, kind):
    with start(revision, {"MCP_TEST_S2C_TIMEOUT": "0.2"}) as server:
        call = call_tool(server, "ask_client", {"request": kind, "timeout": 30})
        request = server.server_request(NESTED_METHOD[kind])
        # Three times the server's default passes on the server itself (a call that sleeps that
        # long is answered); only the call's own timeout holds.
        slept = server.request("tools/call", {"name": "sleepy", "arguments": {"seconds": 0.6}})
        assert slept["result"]["content"] == [{"type": "text", "text": "slept 0.6s"}]
        server.answer(request, ANSWERS[kind])
        assert tool_json(server.response(call)) == {"result": ANSWERS[kind]}
        assert cancelled_notifications(server) == []
        assert server.close() == 0


# --- CAN: cancellation over stdio ------------------------------------------------------------------

@pytest.mark.feature("CAN-01", "CAN-02", "CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_cancelling_slow_count_midway_stops_it_and_no_response_ever_comes(revision):
    with start(revision, {"MCP_TEST_INSTRUMENT": "1"}) as server:
        # A minute if nothing stopped it.
        call = call_tool(server, "slow_count", {"count": SLOW_STEPS, "delay": 0.1}, request_id="slow",
                         progress_token="count")
        server.wait_for(lambda m: m.get("method") == "notifications/progress"
                        and m["params"]["progress"] == 2, what="progress 2")
        server.notify("notifications/cancelled", {"requestId": call, "reason": "user stop"})
        assert server.request("ping")["result"] == {}
        data = instrumentation(server, "slow_count")
        assert data["cancelled"] is True and data["cancellation_reason"] == "user stop"
        rest = server.read_to_end()
        assert all(m.get("id") != call for m in server.received), rest
        progress = [m["params"]["progress"] for m in server.notifications
                    if m["method"] == "notifications/progress"]
        # raise_if_cancelled stopped the loop
        assert progress == list(range(1, len(progress) + 1)) and len(progress) < SLOW_STEPS, progress
        assert server.process.wait(PATIENCE) == 0


@pytest.mark.feature("CAN-02", "CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_handler_that_returns_early_when_cancelled_gets_no_response(revision):
    with start(revision, {"MCP_TEST_INSTRUMENT": "1"}) as server:
        call = call_tool(server, "wait_for_cancel", request_id="w")
        assert server.request("ping")["result"] == {}  # the call is in flight by now
        server.notify("notifications/cancelled", {"requestId": call, "reason": "enough"})
        stderr = server.wait_for_stderr("saw the cancellation")
        assert "wait_for_cancel of request 'w' saw the cancellation: enough" in stderr
        data = instrumentation(server, "wait_for_cancel")
        assert data["cancelled"] is True and data["cancellation_reason"] == "enough"
        server.read_to_end()
        assert all(m.get("id") != call for m in server.received), server.received
        assert server.process.wait(PATIENCE) == 0


@pytest.mark.feature("CAN-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_cancelling_an_unknown_or_finished_request_is_ignored_silently(revision):
    with start(revision) as server:
        done = server.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        server.notify("notifications/cancelled", {"requestId": done["id"], "reason": "too late"})
        server.notify("notifications/cancelled", {"requestId": "no-such-request"})
        seen = len(server.received)
        # Had either cancel been answered, that answer would come before the ping's.
        assert server.request("ping")["result"] == {}
        assert len(server.received) == seen + 1
        assert server.close() == 0


@pytest.mark.feature("CAN-05", "CAN-03", "STDIO-04")
@pytest.mark.parametrize(("revision", "kind"), KINDS)
def test_cancelling_a_call_that_waits_on_the_client_cancels_the_nested_request(revision, kind):
    with start(revision) as server:
        call = call_tool(server, "ask_client", {"request": kind}, request_id="parent")
        nested = server.server_request(NESTED_METHOD[kind])
        server.notify("notifications/cancelled", {"requestId": call, "reason": "changed my mind"})
        told = server.wait_for(lambda m: m.get("method") == "notifications/cancelled",
                               what="notifications/cancelled")
        assert told["params"] == {"requestId": nested["id"], "reason": "changed my mind"}
        stderr = server.wait_for_stderr("CancelledError")
        assert (f"ask_client({kind}) of request 'parent' -> CancelledError: "
                "Request was cancelled: changed my mind") in stderr
        # The answer that comes too late is ignored; the server carries on; the call never answers.
        server.answer(nested, ANSWERS[kind])
        assert server.request("ping")["result"] == {}
        server.read_to_end()
        assert all(m.get("id") != call for m in server.received), server.received
        assert server.process.wait(PATIENCE) == 0


# --- PROG: progress over stdio ---------------------------------------------------------------------

@pytest.mark.feature("PROG-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("token", ["count-token", 7])
def test_progress_carries_the_clients_token_before_the_response(revision, token):
    with start(revision) as server:
        call = call_tool(server, "slow_count", {"count": 3, "delay": 0.01}, progress_token=token)
        response = server.response(call)
        assert response["result"]["content"] == [{"type": "text", "text": "Counted to 3"}]
        progress = [m for m in server.notifications if m["method"] == "notifications/progress"]
        assert [m["params"] for m in progress] == [
            {"progressToken": token, "progress": step, "total": 3, "message": f"counted {step}"}
            for step in (1, 2, 3)
        ]
        assert all(index_of(server, m) < index_of(server, response) for m in progress)
        assert server.close() == 0


@pytest.mark.feature("PROG-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_concurrent_calls_each_get_progress_with_their_own_token(revision):
    with start(revision) as server:
        calls = {token: call_tool(server, "slow_count", {"count": count, "delay": 0.02},
                                  progress_token=token)
                 for token, count in (("a", 3), ("b", 5))}
        for call in calls.values():
            assert "result" in server.response(call)
        by_token: dict[str, list] = {"a": [], "b": []}
        for message in server.notifications:
            params = message["params"]
            by_token[params["progressToken"]].append((params["progress"], params["total"]))
        assert by_token == {"a": [(1, 3), (2, 3), (3, 3)], "b": [(s, 5) for s in range(1, 6)]}
        assert server.close() == 0


@pytest.mark.feature("PROG-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_no_progress_token_means_no_progress_and_no_error(revision):
    with start(revision) as server:
        response = server.response(call_tool(server, "slow_count", {"count": 3, "delay": 0.01}))
        assert response["result"]["content"] == [{"type": "text", "text": "Counted to 3"}]
        assert response["result"]["isError"] is False
        server.read_to_end()
        assert server.notifications == []
        assert server.process.wait(PATIENCE) == 0


# --- LOG: logging/setLevel and notifications/message over stdio ------------------------------------

@pytest.mark.feature("LOG-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_set_level_accepts_the_eight_levels_and_rejects_anything_else(revision):
    with start(revision) as server:
        for level in LEVELS:
            assert server.request("logging/setLevel", {"level": level})["result"] == {}
        for bad in ("verbose", "WARNING", "", 3, None):
            server.send({"jsonrpc": "2.0", "id": "bad", "method": "logging/setLevel",
                         "params": {"level": bad}}, check=False)
            assert server.response("bad")["error"]["code"] == -32602, bad
        server.send({"jsonrpc": "2.0", "id": "none", "method": "logging/setLevel", "params": {}},
                    check=False)
        assert server.response("none")["error"]["code"] == -32602
        assert server.close() == 0


@pytest.mark.feature("LOG-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_set_level_without_the_logging_capability_is_an_error(revision):
    with start(revision, {"MCP_TEST_NO_LOGGING": "1"}) as server:
        error = server.request("logging/setLevel", {"level": "info"})["error"]
        assert error["code"] == -32601 and "logging" in json.dumps(error)
        assert server.close() == 0


def log_round(server: StdioServer) -> tuple[dict, list[dict]]:
    """Call log_every_level; its result and the notifications/message that came before it."""
    server.notifications.clear()
    response = server.response(call_tool(server, "log_every_level"))
    messages = [m for m in server.notifications if m["method"] == "notifications/message"]
    assert all(index_of(server, m) < index_of(server, response) for m in messages)
    return tool_json(response), [m["params"] for m in messages]


def expected_messages(levels: list[str]) -> list[dict]:
    """Per level, the session message (object data, with logger) then the server-wide one."""
    out: list[dict] = []
    for level in levels:
        out.append({"level": level, "logger": "stdio_app",
                    "data": {"index": LEVELS.index(level), "level": level}})
        out.append({"level": level, "data": f"server-wide {level}"})
    return out


@pytest.mark.feature("LOG-02", "LOG-03", "LOG-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_log_messages_pass_only_at_or_above_the_level_the_client_set(revision):
    with start(revision) as server:
        # Nothing is sent before the client sets a level.
        assert log_round(server) == ({"session": [], "server": []}, [])
        for threshold in ("warning", "debug", "emergency"):
            assert server.request("logging/setLevel", {"level": threshold})["result"] == {}
            passing = list(LEVELS[LEVELS.index(threshold):])
            result, messages = log_round(server)
            assert result == {"session": passing, "server": passing}
            assert messages == expected_messages(passing)
        assert server.close() == 0
