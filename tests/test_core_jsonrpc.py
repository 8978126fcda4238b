"""JSON-RPC 2.0 framing and dispatch on the server side, handshake era (CORE-01 to CORE-19)."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_protocol import errors, methods
from mcp_protocol.errors import InvalidParamsError, MCPError
from mcp_server import Configuration, Prompt, Server, ServerSession, Tool

from .harness import CLIENT_INFO, InProcessClient, StdioServer
from .waiting import PATIENCE
from .wire import SCHEMAS, check_client_message, check_server_message, validate

REVISIONS = ["2025-11-25", "2024-11-05"]
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def error_of(response: dict, code: int, request_id: Any) -> dict:
    """The error object of ``response``, after checking its code and echoed id."""
    assert set(response) == {"jsonrpc", "id", "error"}, response
    assert response["jsonrpc"] == "2.0"
    assert response["id"] == request_id and type(response["id"]) is type(request_id), response
    assert response["error"]["code"] == code, response
    return response["error"]


def echo_tool() -> Tool:
    return Tool.define(lambda arguments: json.dumps(arguments, sort_keys=True), name="echo")


# CORE-01 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("request_id", [0, 1, 2**53, -7, "abc", "A-b_9", "17"])
def test_request_gets_result_with_same_id_and_type(make_client, revision, request_id):
    client = make_client(Server("core", tools=[echo_tool()]), revision=revision)
    for method, params in (("ping", None), ("tools/list", {})):
        response = client.request(method, params, request_id=request_id)
        assert set(response) == {"jsonrpc", "id", "result"}, response
        assert response["jsonrpc"] == "2.0"
        assert response["id"] == request_id
        assert type(response["id"]) is type(request_id)
    assert client.request("ping", request_id=request_id)["result"] == {}


# CORE-02 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("text", [
    "{not json", '{"jsonrpc": "2.0", "id": 1, "method": "ping"', "", "   ", "\x00",
    '{"jsonrpc":"2.0","id":1,"method":"ping"} trailing', "[" * 200 + "]" * 200,
])
def test_body_that_is_not_json_gets_parse_error_with_null_id(make_client, revision, text):
    client = make_client(Server("core"), revision=revision)
    error = error_of(client.raw_json(text), errors.PARSE_ERROR, None)
    assert error["message"].startswith("Parse error")


@pytest.mark.feature("CORE-02")
def test_invalid_utf8_bytes_get_parse_error(make_client):
    client = make_client(Server("core"))
    answer = client.server.handle_json(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}')
    response = json.loads(answer)
    check_server_message(response, client.revision)
    error_of(response, errors.PARSE_ERROR, None)


@pytest.mark.feature("CORE-02")
def test_parse_error_over_stdio_and_the_connection_survives():
    with StdioServer() as server:
        server.initialize()
        server.write_line("{this is not json")
        response = server.read()
        assert response["id"] is None and response["error"]["code"] == errors.PARSE_ERROR
        assert server.request("ping")["result"] == {}
        assert server.close() == 0


# CORE-03 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("version", ["1.0", "2", 2.0, None, ["2.0"]])
def test_wrong_jsonrpc_version_echoes_a_readable_id(make_client, revision, version):
    client = make_client(Server("core"), revision=revision)
    for request_id in (5, "abc"):
        response = client.raw({"jsonrpc": version, "id": request_id, "method": "ping"})
        error_of(response, errors.INVALID_REQUEST, request_id)
    missing = client.raw({"id": 6, "method": "ping"})
    error_of(missing, errors.INVALID_REQUEST, 6)


@pytest.mark.feature("CORE-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_wrong_jsonrpc_version_with_unreadable_id_answers_null(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    for bad_id in (1.5, {"x": 1}, "has space", True):
        response = client.raw({"jsonrpc": "1.0", "id": bad_id, "method": "ping"})
        error_of(response, errors.INVALID_REQUEST, None)
    no_id = client.raw({"jsonrpc": "1.0", "method": "ping"})
    error_of(no_id, errors.INVALID_REQUEST, None)


# CORE-04 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("bad_id", [
    1.5, 2.0, {"id": 1}, [1], True, False, "", "a b", "a.b", "é", "id/1", "1\n",
])
def test_invalid_ids_get_invalid_request_with_null_id(make_client, revision, bad_id):
    calls = []
    server = Server("core", tools=[Tool.define(lambda a: calls.append(a) or "ran", name="spy")])
    client = make_client(server, revision=revision)
    for method, params in (("ping", None), ("tools/call", {"name": "spy", "arguments": {}})):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": bad_id, "method": method}
        if params is not None:
            message["params"] = params
        error_of(client.raw(message), errors.INVALID_REQUEST, None)
    assert calls == [], "a request with an invalid id must not be dispatched"


@pytest.mark.feature("CORE-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_float_id_in_json_text_is_rejected(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    for text in ('{"jsonrpc":"2.0","id":1.0,"method":"ping"}', '{"jsonrpc":"2.0","id":1e3,"method":"ping"}'):
        error_of(client.raw_json(text), errors.INVALID_REQUEST, None)


@pytest.mark.feature("CORE-04", "CORE-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_null_id_is_a_notification_and_gets_no_response(make_client, revision):
    client = make_client(Server("core", tools=[echo_tool()]), revision=revision)
    assert client.raw({"jsonrpc": "2.0", "id": None, "method": "ping"}) is None
    assert client.raw_json('{"jsonrpc":"2.0","id":null,"method":"ping"}') is None
    assert client.raw({"jsonrpc": "2.0", "id": None, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {}}}) is None
    assert client.raw({"jsonrpc": "2.0", "id": None, "method": "no/such"}) is None


# CORE-05 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", [5, None, ["ping"], {"name": "ping"}, True, "rpc.discover", "rpc.ping"])
def test_bad_method_names_get_invalid_request(make_client, revision, method):
    client = make_client(Server("core"), revision=revision)
    response = client.raw({"jsonrpc": "2.0", "id": 9, "method": method})
    error_of(response, errors.INVALID_REQUEST, 9)
    # No method at all (and no result or error, so not a response either).
    error_of(client.raw({"jsonrpc": "2.0", "id": 10}), errors.INVALID_REQUEST, 10)


@pytest.mark.feature("CORE-05")
def test_rpc_prefix_is_rejected_even_when_a_custom_method_has_that_name(make_client):
    server = Server("core")
    server.define_custom_method("rpc.echo", lambda params: "should never run")
    client = make_client(server)
    error_of(client.raw({"jsonrpc": "2.0", "id": 3, "method": "rpc.echo"}), errors.INVALID_REQUEST, 3)
    # A name that only contains "rpc." further in is an ordinary (unknown) method.
    error_of(client.raw({"jsonrpc": "2.0", "id": 4, "method": "x/rpc.y"}), errors.METHOD_NOT_FOUND, 4)


# CORE-06 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-06")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("params", ["x", 5, 1.5, True, False])
def test_params_that_are_not_object_or_array_get_invalid_params(make_client, revision, params):
    client = make_client(Server("core", tools=[echo_tool()]), revision=revision)
    for method in ("ping", "tools/list", "tools/call"):
        response = client.raw({"jsonrpc": "2.0", "id": 11, "method": method, "params": params})
        error_of(response, errors.INVALID_PARAMS, 11)


@pytest.mark.feature("CORE-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_object_array_and_absent_params_pass_the_shape_check(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    for extra in ({}, {"params": {}}, {"params": []}, {"params": None}):
        response = client.raw({"jsonrpc": "2.0", "id": 12, "method": "ping", **extra})
        assert response == {"jsonrpc": "2.0", "id": 12, "result": {}}, extra


# CORE-07 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-07")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", ["foo/bar", "tools/delete", "Ping", "", "initialise"])
def test_unknown_method_gets_method_not_found_naming_it(make_client, revision, method):
    client = make_client(Server("core"), revision=revision)
    error = error_of(client.raw({"jsonrpc": "2.0", "id": "u1", "method": method}),
                     errors.METHOD_NOT_FOUND, "u1")
    assert error["message"] == "Method not found"
    assert error["data"] == method


@pytest.mark.feature("CORE-07")
def test_unknown_method_over_stdio():
    with StdioServer() as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 41, "method": "no/such"}, check=False)
        response = server.read()
        assert response["id"] == 41
        assert response["error"] == {"code": -32601, "message": "Method not found", "data": "no/such"}
        assert server.close() == 0


# CORE-08 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_notifications_get_no_reply(make_client, revision):
    hook_calls = []
    server = Server("core")
    server.define_custom_method("notifications/custom", lambda params: hook_calls.append(params))
    client = make_client(server, revision=revision)
    assert client.notify("notifications/initialized") is None
    assert client.notify("notifications/progress", {"progressToken": "t", "progress": 1}) is None
    assert client.notify("notifications/cancelled", {"requestId": 999, "reason": "x"}) is None
    assert client.notify("notifications/roots/list_changed") is None
    # Unknown notifications are ignored silently.
    for method in ("notifications/unknown", "something/else", "tools/list", "ping"):
        assert client.raw({"jsonrpc": "2.0", "method": method}) is None
        assert client.raw_json(json.dumps({"jsonrpc": "2.0", "method": method, "params": {}})) is None
    # A notification a custom handler answers still gets no reply.
    assert client.raw({"jsonrpc": "2.0", "method": "notifications/custom", "params": {"a": 1}}) is None
    assert hook_calls == [{"a": 1}]


@pytest.mark.feature("CORE-08")
def test_failing_notification_hook_sends_nothing(make_client):
    reported = []
    server = Server("core", configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append((exc, context))))

    def explode(params):
        raise RuntimeError("hook failed")

    server.define_custom_method("notifications/boom", explode)
    client = make_client(server)
    assert client.raw({"jsonrpc": "2.0", "method": "notifications/boom"}) is None
    assert [str(exc) for exc, _ in reported] == ["hook failed"]


@pytest.mark.feature("CORE-08")
def test_notifications_produce_no_line_over_stdio():
    with StdioServer() as server:
        server.initialize()  # also sends notifications/initialized
        server.send({"jsonrpc": "2.0", "method": "notifications/unknown", "params": {"x": 1}}, check=False)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}})
        server.send({"jsonrpc": "2.0", "id": 500, "method": "ping"})
        # The first line written after the notifications is the ping's answer.
        assert server.read() == {"jsonrpc": "2.0", "id": 500, "result": {}}
        assert server.close() == 0


# CORE-09 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-09")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", [
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed", "notifications/whatever",
])
def test_notification_method_with_an_id_gets_method_not_found(make_client, revision, method):
    client = make_client(Server("core"), revision=revision)
    response = client.raw({"jsonrpc": "2.0", "id": 21, "method": method, "params": {}})
    error_of(response, errors.METHOD_NOT_FOUND, 21)
    assert "result" not in response


@pytest.mark.feature("CORE-09")
def test_notification_method_with_an_id_over_stdio():
    with StdioServer() as server:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 22, "method": "notifications/initialized"}, check=False)
        response = server.read()
        assert response["id"] == 22 and response["error"]["code"] == errors.METHOD_NOT_FOUND
        assert server.close() == 0


# CORE-10 and CORE-11 ----------------------------------------------------------------------------
@pytest.mark.feature("CORE-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_batch_is_answered_element_by_element_in_order(make_client, revision):
    client = make_client(Server("core", tools=[echo_tool()]), revision=revision)
    batch = [
        {"jsonrpc": "2.0", "id": "b1", "method": "tools/call",
         "params": {"name": "echo", "arguments": {"n": 1}}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such"},
        {"jsonrpc": "2.0", "id": "b4", "method": "tools/list"},
    ]
    check_client_message([m for m in batch if m["method"] != "no/such"], revision)
    responses = client.raw(batch)
    assert isinstance(responses, list)
    assert [r["id"] for r in responses] == ["b1", 2, 3, "b4"]
    assert responses[0]["result"]["content"] == [{"type": "text", "text": '{"n": 1}'}]
    assert responses[1]["result"] == {}
    assert responses[2]["error"]["code"] == errors.METHOD_NOT_FOUND
    assert [tool["name"] for tool in responses[3]["result"]["tools"]] == ["echo"]
    # The same through JSON text: the answer is a JSON array.
    as_json = client.raw_json(json.dumps(batch))
    assert as_json == responses


@pytest.mark.feature("CORE-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_batch_with_one_response_is_unwrapped(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 31, "method": "ping"}]
    assert client.raw(batch) == {"jsonrpc": "2.0", "id": 31, "result": {}}
    assert client.raw([{"jsonrpc": "2.0", "id": 32, "method": "ping"}]) == \
        {"jsonrpc": "2.0", "id": 32, "result": {}}
    assert client.raw_json(json.dumps(batch)) == {"jsonrpc": "2.0", "id": 31, "result": {}}


@pytest.mark.feature("CORE-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_all_notification_batch_gives_no_output(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
             {"jsonrpc": "2.0", "method": "notifications/unknown"}]
    assert client.raw(batch) is None
    assert client.raw_json(json.dumps(batch)) is None


@pytest.mark.feature("CORE-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_empty_batch_gets_invalid_request(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    error_of(client.raw([]), errors.INVALID_REQUEST, None)
    error_of(client.raw_json("[]"), errors.INVALID_REQUEST, None)
    error_of(client.raw_json(" [ ] "), errors.INVALID_REQUEST, None)


@pytest.mark.feature("CORE-11")
@pytest.mark.parametrize("revision", REVISIONS)
def test_non_object_batch_elements_each_get_their_own_error(make_client, revision):
    client = make_client(Server("core"), revision=revision)
    responses = client.raw_json('[1, {"jsonrpc":"2.0","id":7,"method":"ping"}, "x", null, [], true]')
    assert isinstance(responses, list) and len(responses) == 6
    assert responses[1] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    for response in responses[:1] + responses[2:]:
        error = error_of(response, errors.INVALID_REQUEST, None)
        assert error["message"] == "Request must be an object"


@pytest.mark.feature("CORE-11")
@pytest.mark.parametrize("revision", REVISIONS)
def test_invalid_elements_do_not_stop_the_others(make_client, revision):
    client = make_client(Server("core", tools=[echo_tool()]), revision=revision)
    responses = client.raw([
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": "bad"},
    ])
    assert [(r["id"], r.get("error", {}).get("code")) for r in responses] == [
        (1, errors.INVALID_REQUEST), (None, errors.INVALID_REQUEST), (3, None), (4, errors.INVALID_PARAMS),
    ]
    assert responses[2]["result"]["isError"] is False


@pytest.mark.feature("CORE-10", "CORE-11")
def test_batches_over_stdio():
    with StdioServer() as server:
        server.initialize()
        server.write_line(json.dumps([
            {"jsonrpc": "2.0", "id": 1001, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/unknown"},
            42,
            {"jsonrpc": "2.0", "id": 1002, "method": "tools/call",
             "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        ]))
        answer = server.read()
        assert [r["id"] for r in answer] == [1001, None, 1002]
        assert answer[1]["error"] == {"code": -32600, "message": "Request must be an object"}
        assert answer[2]["result"]["structuredContent"] == {"sum": 3}
        server.write_line('[{"jsonrpc":"2.0","method":"notifications/initialized"}]')
        server.write_line('[{"jsonrpc":"2.0","id":1003,"method":"ping"}]')
        server.write_line("[]")
        # Lines are served concurrently, so the two answers may come in either order.
        answers = sorted([server.read(), server.read()], key=lambda r: "error" in r)
        assert answers[0] == {"jsonrpc": "2.0", "id": 1003, "result": {}}
        assert answers[1]["id"] is None and answers[1]["error"]["code"] == errors.INVALID_REQUEST
        assert server.close() == 0


# CORE-12 ----------------------------------------------------------------------------------------
SECRET = "db-password=hunter2 at /srv/app/secrets.py line 3"


def _failing_prompt(kind: str) -> Prompt:
    if kind == "async":
        async def template(args):
            raise RuntimeError(SECRET)
    else:
        def template(args):
            raise KeyError(SECRET)
    return Prompt.define(template, name="fails")


@pytest.mark.feature("CORE-12")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_unexpected_exception_is_internal_error_without_details(make_client, revision, kind):
    reported = []
    server = Server("core", prompts=[_failing_prompt(kind)], configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append((exc, context))))
    client = make_client(server, revision=revision)
    response = client.request("prompts/get", {"name": "fails"}, request_id="p1")
    assert response == {"jsonrpc": "2.0", "id": "p1",
                        "error": {"code": -32603, "message": "Internal error"}}
    assert "hunter2" not in json.dumps(response)
    # The exception reporter still gets the exception itself, and the request it came from.
    assert len(reported) == 1
    exc, context = reported[0]
    assert isinstance(exc, RuntimeError if kind == "async" else KeyError)
    assert SECRET in str(exc)
    assert context["request"]["id"] == "p1" and context["request"]["method"] == "prompts/get"


@pytest.mark.feature("CORE-12")
def test_custom_method_exception_does_not_leak(make_client):
    reported = []
    server = Server("core", configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append(exc)))

    def crash(params):
        raise ValueError(SECRET)

    server.define_custom_method("acme/crash", crash)
    client = make_client(server)
    response = client.raw({"jsonrpc": "2.0", "id": 8, "method": "acme/crash"})
    assert response["error"] == {"code": -32603, "message": "Internal error"}
    assert "hunter2" not in json.dumps(response)
    assert [type(e) for e in reported] == [ValueError]


@pytest.mark.feature("CORE-12")
def test_exception_in_around_request_does_not_leak(make_client):
    reported = []

    def around(data, call_next):
        raise RuntimeError(SECRET)

    server = Server("core", configuration=Configuration(
        around_request=around, exception_reporter=lambda exc, context: reported.append(exc)))
    client = InProcessClient(server)
    response = client.request("ping", request_id=3)
    assert response["error"] == {"code": -32603, "message": "Internal error"}
    assert "hunter2" not in json.dumps(response)
    assert len(reported) == 1 and SECRET in str(reported[0])


@pytest.mark.feature("CORE-12")
@pytest.mark.parametrize("revision", REVISIONS)
def test_result_that_cannot_be_serialized_is_internal_error_with_its_id(make_client, revision):
    """A handler returning something JSON cannot carry (a datetime, say) must not lose the answer."""
    reported = []
    server = Server("core", configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append((exc, context))))
    server.define_custom_method("acme/now", lambda params: {"now": datetime.datetime(2020, 1, 1)})
    server.define_custom_method("acme/nan", lambda params: {"ratio": float("nan")})
    client = make_client(server, revision=revision)
    single = client.raw_json('{"jsonrpc":"2.0","id":"n1","method":"acme/now"}')
    assert single == {"jsonrpc": "2.0", "id": "n1", "error": {"code": -32603, "message": "Internal error"}}
    # In a batch, only that element fails; the others are still answered.
    batch = client.raw_json('[{"jsonrpc":"2.0","id":1,"method":"acme/now"},'
                            '{"jsonrpc":"2.0","id":{"bad":1},"method":"ping"},'
                            '{"jsonrpc":"2.0","id":2,"method":"ping"}]')
    assert batch[0] == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}
    assert batch[1]["id"] is None and batch[1]["error"]["code"] == errors.INVALID_REQUEST
    assert batch[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    # NaN is not JSON: it is refused rather than written as a bare NaN token.
    not_json = client.raw_json('{"jsonrpc":"2.0","id":"n2","method":"acme/nan"}')
    assert not_json == {"jsonrpc": "2.0", "id": "n2", "error": {"code": -32603, "message": "Internal error"}}
    assert [type(exc) for exc, _ in reported] == [TypeError, TypeError, ValueError]
    assert [context["request"]["id"] for _, context in reported] == ["n1", 1, "n2"]


# CORE-13 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-13")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("error, expected", [
    (MCPError("Quota exceeded", code=-32050, data={"limit": 10, "used": [1, 2]}),
     {"code": -32050, "message": "Quota exceeded", "data": {"limit": 10, "used": [1, 2]}}),
    (MCPError("No data here", code=-32000),
     {"code": -32000, "message": "No data here"}),
    (InvalidParamsError("Bad widget", data="widget-7"),
     {"code": -32602, "message": "Bad widget", "data": "widget-7"}),
    (MCPError("Falsy data kept", code=-32051, data=0),
     {"code": -32051, "message": "Falsy data kept", "data": 0}),
])
def test_typed_errors_reach_the_wire_exactly(make_client, revision, error, expected):
    async def tool_handler(arguments):
        raise error

    def prompt_handler(args):
        raise error

    server = Server("core", tools=[Tool.define(tool_handler, name="typed")],
                    prompts=[Prompt.define(prompt_handler, name="typed")])
    server.define_custom_method("acme/typed", prompt_handler)
    client = make_client(server, revision=revision)
    tool = client.request("tools/call", {"name": "typed", "arguments": {}}, request_id=1)
    prompt = client.request("prompts/get", {"name": "typed"}, request_id=2)
    custom = client.raw({"jsonrpc": "2.0", "id": 3, "method": "acme/typed"})
    for request_id, response in ((1, tool), (2, prompt), (3, custom)):
        assert response == {"jsonrpc": "2.0", "id": request_id, "error": expected}


# CORE-14 ----------------------------------------------------------------------------------------
def _initialize_message(request_id: Any = 0) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}}


def _slow_server() -> tuple[Server, asyncio.Event, asyncio.Event, list]:
    started, release, calls = asyncio.Event(), asyncio.Event(), []

    async def slow(arguments):
        calls.append(arguments)
        started.set()
        await release.wait()
        return f"done {arguments.get('n')}"

    return Server("core", tools=[Tool.define(slow, name="slow")]), started, release, calls


def _call(request_id: Any, n: int) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": "slow", "arguments": {"n": n}}}
    check_client_message(message, "2025-11-25")
    return message


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.001)


async def _answer(server: Server, message: Any, session: ServerSession | None = None) -> Any:
    response = await asyncio.wait_for(server.handle_async(message, session), timeout=PATIENCE)
    if response is not None:
        method = message.get("method") if isinstance(message, dict) else None
        check_server_message(response, "2025-11-25", method)
    return response


@pytest.mark.feature("CORE-14")
@pytest.mark.parametrize("request_id", [7, "dup-id"])
async def test_duplicate_in_flight_id_is_rejected_and_first_completes(request_id):
    server, started, release, calls = _slow_server()
    assert "result" in await _answer(server, _initialize_message())
    first = asyncio.create_task(_answer(server, _call(request_id, 1)))
    await asyncio.wait_for(started.wait(), timeout=PATIENCE)

    second = await _answer(server, _call(request_id, 2))
    assert second["id"] == request_id
    assert second["error"]["code"] == errors.INVALID_REQUEST
    assert re.search(r"request id .* already in flight", second["error"]["message"])
    assert calls == [{"n": 1}], "the duplicate must not run"
    assert not first.done()

    release.set()
    first_response = await asyncio.wait_for(first, timeout=PATIENCE)
    assert first_response == {"jsonrpc": "2.0", "id": request_id, "result": {
        "content": [{"type": "text", "text": "done 1"}], "isError": False}}

    # Once the first is answered, its id may be used again.
    again = await _answer(server, _call(request_id, 3))
    assert again["result"]["content"] == [{"type": "text", "text": "done 3"}]


@pytest.mark.feature("CORE-14")
async def test_same_id_in_flight_in_another_session_or_of_another_type_is_fine():
    server, started, release, calls = _slow_server()
    other = ServerSession(server)
    for session in (None, other):
        assert "result" in await _answer(server, _initialize_message(), session)
    first = asyncio.create_task(_answer(server, _call(5, 1)))
    await asyncio.wait_for(started.wait(), timeout=PATIENCE)
    # Same id in another session, and the string "5" (a different JSON-RPC id) in this one.
    concurrent = [asyncio.create_task(_answer(server, _call(5, 2), other)),
                  asyncio.create_task(_answer(server, _call("5", 3)))]
    await asyncio.wait_for(_until(lambda: len(calls) == 3), timeout=PATIENCE)  # all three in flight
    release.set()
    responses = await asyncio.wait_for(asyncio.gather(first, *concurrent), timeout=PATIENCE)
    assert [r["id"] for r in responses] == [5, 5, "5"]
    assert [r["result"]["content"][0]["text"] for r in responses] == ["done 1", "done 2", "done 3"]


@pytest.mark.feature("CORE-14")
async def test_duplicate_id_inside_one_batch():
    server, started, release, calls = _slow_server()
    await _answer(server, _initialize_message())
    batch = asyncio.create_task(_answer(server, [_call(9, 1), _call(9, 2)]))
    await asyncio.wait_for(started.wait(), timeout=PATIENCE)
    release.set()
    responses = await asyncio.wait_for(batch, timeout=PATIENCE)
    assert len(responses) == 2 and len(calls) == 1
    errors_seen = [r for r in responses if "error" in r]
    results = [r for r in responses if "result" in r]
    assert len(errors_seen) == 1 and errors_seen[0]["error"]["code"] == errors.INVALID_REQUEST
    assert len(results) == 1 and results[0]["id"] == 9


# CORE-15 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-15")
def test_error_code_registry():
    assert (errors.PARSE_ERROR, errors.INVALID_REQUEST, errors.METHOD_NOT_FOUND,
            errors.INVALID_PARAMS, errors.INTERNAL_ERROR) == (-32700, -32600, -32601, -32602, -32603)
    assert errors.HEADER_MISMATCH == -32020
    assert errors.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021
    assert errors.UNSUPPORTED_PROTOCOL_VERSION == -32022
    assert errors.URL_ELICITATION_REQUIRED == -32042
    assert errors.REQUEST_TIMEOUT == -32001
    assert errors.USER_REJECTED == -1
    # Timeout and header mismatch must stay distinct (SEP-2243 was renumbered away from -32001).
    assert errors.REQUEST_TIMEOUT != errors.HEADER_MISMATCH
    # The exception classes carry the same codes.
    assert errors.ParseError().code == -32700
    assert errors.InvalidRequestError().code == -32600
    assert errors.MethodNotFoundError().code == -32601
    assert errors.InvalidParamsError().code == -32602
    assert errors.InternalError().code == -32603
    assert errors.RequestTimeoutError().code == -32001
    elicitation = {"mode": "url", "elicitationId": "e1", "url": "https://x.test/", "message": "m"}
    assert errors.URLElicitationRequiredError([elicitation]).code == -32042


@pytest.mark.feature("CORE-15")
def test_error_codes_are_the_ones_used_on_the_wire(make_client):
    client = make_client(Server("core", capabilities={}))
    def code(message: Any) -> int:
        return client.raw(message)["error"]["code"]

    assert client.raw_json("{")["error"]["code"] == errors.PARSE_ERROR
    assert code({"jsonrpc": "1.0", "id": 1, "method": "ping"}) == errors.INVALID_REQUEST
    assert code({"jsonrpc": "2.0", "id": 1, "method": "x/y"}) == errors.METHOD_NOT_FOUND
    assert code({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 1}) == errors.INVALID_PARAMS
    assert code({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) == errors.METHOD_NOT_FOUND


# CORE-16 ----------------------------------------------------------------------------------------
def _schema_method_names(revision: str) -> set[str]:
    """Every method and notification name the published schema of ``revision`` defines."""
    document = json.loads((SCHEMAS / revision / "schema.json").read_text())
    names = set()
    for definition in document.get("$defs", document.get("definitions", {})).values():
        method = definition.get("properties", {}).get("method", {}) if isinstance(definition, dict) else {}
        if isinstance(method.get("const"), str):
            names.add(method["const"])
    return names


@pytest.mark.feature("CORE-16")
@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_method_constants_name_every_method_of_the_schema(revision):
    named = {value for key, value in vars(methods).items() if key.isupper() and isinstance(value, str)}
    schema_names = _schema_method_names(revision)
    assert schema_names, "the schema defines methods"
    # Tasks (SEP-1686) is an extension this SDK does not implement.
    missing = {name for name in schema_names - named
               if not name.startswith(("tasks/", "notifications/tasks/"))}
    assert not missing, f"methods of {revision} without a constant: {sorted(missing)}"


@pytest.mark.feature("CORE-16")
def test_method_constants_of_the_modern_era():
    assert methods.SERVER_DISCOVER == "server/discover"
    assert methods.SUBSCRIPTIONS_LISTEN == "subscriptions/listen"
    assert methods.NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED == "notifications/subscriptions/acknowledged"
    assert methods.NOTIFICATIONS_ELICITATION_COMPLETE == "notifications/elicitation/complete"
    assert methods.INITIALIZE == "initialize" and methods.TOOLS_CALL == "tools/call"


# CORE-17 ----------------------------------------------------------------------------------------
GATED = [
    ("tools/list", {}, "tools"),
    ("tools/call", {"name": "t", "arguments": {}}, "tools"),
    ("prompts/list", {}, "prompts"),
    ("prompts/get", {"name": "p"}, "prompts"),
    ("resources/list", {}, "resources"),
    ("resources/read", {"uri": "file:///x"}, "resources"),
    ("resources/templates/list", {}, "resources"),
    ("resources/subscribe", {"uri": "file:///x"}, "resources.subscribe"),
    ("resources/unsubscribe", {"uri": "file:///x"}, "resources.subscribe"),
    ("logging/setLevel", {"level": "info"}, "logging"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"},
                             "argument": {"name": "a", "value": ""}}, "completions"),
]


@pytest.mark.feature("CORE-17")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method, params, capability", GATED)
def test_undeclared_capability_gives_method_not_found_naming_it(make_client, revision, method, params,
                                                                capability):
    # Everything declared except the one section (or flag) this method needs.
    everything = {"tools": {}, "prompts": {}, "resources": {"subscribe": True}, "logging": {},
                  "completions": {}}
    head, _, flag = capability.partition(".")
    without = {k: v for k, v in everything.items() if k != head}
    if flag:
        without[head] = {}
    client = make_client(Server("core", capabilities=without), revision=revision)
    error = error_of(client.request(method, params, request_id="g"), errors.METHOD_NOT_FOUND, "g")
    assert error["data"]["missingCapability"] == capability
    assert capability in error["message"]

    none_declared = make_client(Server("core", capabilities={}), revision=revision)
    response = none_declared.request(method, params, request_id="n")
    assert response["error"]["code"] == errors.METHOD_NOT_FOUND

    declared = make_client(Server("core", capabilities=everything), revision=revision)
    response = declared.request(method, params, request_id="d")
    assert response.get("error", {}).get("code") != errors.METHOD_NOT_FOUND, response


@pytest.mark.feature("CORE-17")
def test_ungated_methods_work_with_no_capabilities(make_client):
    client = make_client(Server("core", capabilities={}))
    assert client.result("ping") == {}


# CORE-18 ----------------------------------------------------------------------------------------
META = {
    "progressToken": "tok-1",
    "com.example/unknown": {"nested": [1, {"deep": None}], "flag": False},
    "x": "",
    "io.modelcontextprotocol/related-task": {"taskId": "t"},
}


@pytest.mark.feature("CORE-18")
@pytest.mark.parametrize("revision", REVISIONS)
def test_request_meta_reaches_handlers_untouched(make_client, revision):
    seen: dict[str, Any] = {}

    def tool_handler(arguments, server_context):
        seen["tool"] = (server_context.meta, server_context["_meta"], server_context.params["_meta"])
        return "ok"

    def prompt_handler(args, server_context):
        seen["prompt"] = (server_context.meta, server_context["_meta"], server_context.params["_meta"])
        return "ok"

    def custom(params, server_context):
        seen["custom"] = (server_context.meta, server_context["_meta"], params["_meta"])
        return {}

    server = Server("core", tools=[Tool.define(tool_handler, name="t")],
                    prompts=[Prompt.define(prompt_handler, name="p")])
    server.define_custom_method("acme/meta", custom)
    client = make_client(server, revision=revision)
    client.result("tools/call", {"name": "t", "arguments": {}, "_meta": json.loads(json.dumps(META))})
    client.result("prompts/get", {"name": "p", "_meta": json.loads(json.dumps(META))})
    client.raw({"jsonrpc": "2.0", "id": 99, "method": "acme/meta",
                "params": {"_meta": json.loads(json.dumps(META))}})
    assert set(seen) == {"tool", "prompt", "custom"}
    for key, values in seen.items():
        for value in values:
            assert value == META, key


# CORE-19 ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-19")
def test_in_process_api_without_a_transport():
    server = Server("core", tools=[echo_tool()])
    assert server.transport is None
    init = server.handle(_initialize_message(1))
    assert isinstance(init, dict) and init["result"]["protocolVersion"] == "2025-11-25"
    check_server_message(init, "2025-11-25", "initialize")
    assert server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"a": 1}}}
    response = server.handle(call)
    check_server_message(response, "2025-11-25", "tools/call")
    assert response["result"]["content"] == [{"type": "text", "text": '{"a": 1}'}]

    text = server.handle_json(json.dumps({**call, "id": "s"}))
    assert isinstance(text, str)
    assert json.loads(text) == {**response, "id": "s"}
    assert server.handle_json(json.dumps({**call, "id": 3}).encode()) is not None
    assert server.handle_json('{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    assert server.handle_json("[]") is not None


@pytest.mark.feature("CORE-19")
async def test_async_in_process_api():
    server = Server("core")
    response = await server.handle_async(_initialize_message(1))
    check_server_message(response, "2025-11-25", "initialize")
    text = await server.handle_json_async('{"jsonrpc":"2.0","id":2,"method":"ping"}')
    assert json.loads(text) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert await server.handle_json_async('{"jsonrpc":"2.0","method":"notifications/initialized"}') is None


@pytest.mark.feature("CORE-19")
def test_sessions_passed_explicitly_are_independent():
    server = Server("core")
    first, second = ServerSession(server), ServerSession(server)
    answer = async_to_sync(server.handle_async)
    answer(_initialize_message(1), first)
    assert first.initialized and not second.initialized and not server.session.initialized
    validate(answer({"jsonrpc": "2.0", "id": 2, "method": "ping"}, second),
             "2025-11-25", "JSONRPCResultResponse")
