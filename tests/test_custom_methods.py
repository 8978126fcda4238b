"""Custom JSON-RPC methods on the server (``define_custom_method``), handshake era, in process and
(a notification) over Streamable HTTP.

Custom methods are not MCP methods, so the requests that call them are sent with ``check=False``.
MCP's schemas type every ``result`` as an object, while JSON-RPC 2.0 (which custom methods follow)
allows any value: a scalar result's envelope is checked with the result set aside.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from mcp_protocol import CancelledError, MCPError
from mcp_server import Configuration, MethodAlreadyDefinedError, Server, ServerContext
from mcp_server.handlers import BUILTIN_METHODS, EXTENSION_METHODS
from mcp_server.http import StreamableHTTPTransport

from .test_modern_http import short_lived_connections  # noqa: F401
from .waiting import eventually
from .wire import check_client_message, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
_ids = itertools.count(1000)


def custom(client, method: str, params: Any = None, request_id: Any = None) -> dict:
    """Call a custom method; the answer is checked, with a non-object result set aside."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id or next(_ids), "method": method}
    if params is not None:
        message["params"] = params
    response = client.server.handle(message)
    assert response is not None
    shape = response
    if "result" in response and not isinstance(response["result"], dict):
        shape = {**response, "result": {}}
    check_server_message(shape, client.revision)
    return response


@pytest.mark.feature("CUST-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_custom_method_answers_with_the_handler_value(make_client, revision):
    server = Server("custom")
    server.define_custom_method("add", lambda params: params["a"] + params["b"])
    client = make_client(server, revision)
    assert custom(client, "add", {"a": 5, "b": 3}, request_id=1) == {
        "jsonrpc": "2.0", "id": 1, "result": 8
    }


@pytest.mark.feature("CUST-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("value", [8, 2.5, "text", True, False, None, [1, "two"], {"k": {"n": [1]}}, {}])
def test_any_json_value_can_be_the_result(make_client, revision, value):
    server = Server("custom")
    server.define_custom_method("value", lambda params: value)
    response = custom(make_client(server, revision), "value")
    assert "result" in response and response["result"] == value
    # And it survives the trip through JSON text.
    text = server.handle_json(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "value"}))
    assert json.loads(text) == {"jsonrpc": "2.0", "id": 2, "result": value}


@pytest.mark.feature("CUST-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_decorator_form_and_async_handlers(make_client, revision):
    server = Server("custom")

    @server.define_custom_method("shop/total")
    async def total(params):
        return {"total": sum(params["prices"])}

    @server.define_custom_method("shop/count")
    def count(params):
        return len(params.get("items", []))

    assert total.__name__ == "total"  # the decorator hands the function back
    client = make_client(server, revision)
    assert custom(client, "shop/total", {"prices": [1, 2.5]})["result"] == {"total": 3.5}
    assert custom(client, "shop/count", {"items": ["a", "b"]})["result"] == 2
    assert custom(client, "shop/count")["result"] == 0  # no params: the handler gets {}


@pytest.mark.feature("CUST-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_custom_notification_runs_and_gets_no_response(make_client, revision):
    received = []
    server = Server("custom")

    def on_ping(params):
        received.append(params)
        return "ignored"

    server.define_custom_method("app/ping", on_ping)
    client = make_client(server, revision)
    assert server.handle({"jsonrpc": "2.0", "method": "app/ping", "params": {"n": 1}}) is None
    assert server.handle_json('{"jsonrpc":"2.0","method":"app/ping","params":{"n":2}}') is None
    assert received == [{"n": 1}, {"n": 2}]
    # In a batch, only the request is answered.
    answer = client.raw([{"jsonrpc": "2.0", "method": "app/ping", "params": {"n": 3}},
                         {"jsonrpc": "2.0", "id": 7, "method": "ping"}])
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert received[-1] == {"n": 3}


@pytest.mark.feature("CUST-03")
# The Tasks extension's tasks/* are in EXTENSION_METHODS once the app is ready (site.install).
@pytest.mark.parametrize("method", sorted({*BUILTIN_METHODS, *EXTENSION_METHODS}))
def test_builtin_methods_cannot_be_redefined(method):
    server = Server("custom")
    with pytest.raises(MethodAlreadyDefinedError, match=method):
        server.define_custom_method(method, lambda params: {})
    with pytest.raises(MethodAlreadyDefinedError):
        server.define_custom_method(method)
    assert server.custom_methods == {}


@pytest.mark.feature("CUST-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_custom_method_cannot_be_defined_twice(make_client, revision):
    server = Server("custom")
    server.define_custom_method("add", lambda params: "first")
    with pytest.raises(MethodAlreadyDefinedError) as raised:
        server.define_custom_method("add", lambda params: "second")
    assert raised.value.method_name == "add"
    client = make_client(server, revision)
    assert custom(client, "add")["result"] == "first"
    # The built-in keeps answering as before.
    assert client.result("ping") == {}


@pytest.mark.feature("CUST-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_handler_gets_the_context_only_when_it_asks(make_client, revision):
    seen: dict[str, Any] = {}
    server = Server("custom", server_context={"tenant": "acme"})

    @server.define_custom_method("with_context")
    def with_context(params, server_context):
        seen["ctx"] = server_context
        return {"tenant": server_context["tenant"], "cancelled": server_context.cancelled()}

    @server.define_custom_method("with_kwargs")
    async def with_kwargs(params, **kwargs):
        seen["kwargs"] = kwargs
        return "ok"

    @server.define_custom_method("without")
    def without(params):
        seen["without"] = params
        return "ok"

    client = make_client(server, revision)
    answer = custom(client, "with_context", {"_meta": {"progressToken": "p"}}, request_id=5)
    assert answer["result"] == {"tenant": "acme", "cancelled": False}
    context = seen["ctx"]
    assert isinstance(context, ServerContext)
    assert (context.method, context.request_id) == ("with_context", 5)
    assert context["_meta"] == {"progressToken": "p"}
    assert context.client_info == {"name": "test-client", "version": "1.0.0"}
    assert custom(client, "with_kwargs")["result"] == "ok"
    assert isinstance(seen["kwargs"]["server_context"], ServerContext)
    assert custom(client, "without", {"x": 1})["result"] == "ok"
    assert seen["without"] == {"x": 1}


@pytest.mark.feature("CUST-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_cancelled_custom_request_gets_no_response(make_client, revision):
    server = Server("custom")

    @server.define_custom_method("stop")
    def stop(params, server_context):
        raise CancelledError(server_context.request_id, "user stopped")

    client = make_client(server, revision)
    assert server.handle({"jsonrpc": "2.0", "id": 3, "method": "stop"}) is None
    assert client.result("ping") == {}  # the id is free again and the session still works


class Observed:
    """Everything the hooks of one server saw."""

    def __init__(self) -> None:
        self.reports: list[tuple[BaseException, dict]] = []
        self.instrumented: list[dict] = []
        self.around: list[dict] = []

    def configuration(self) -> Configuration:
        def around(data, call_next):
            before = dict(data)
            try:
                return call_next()
            finally:
                self.around.append({"before": before, "after": dict(data)})

        return Configuration(
            exception_reporter=lambda exc, context: self.reports.append((exc, context)),
            instrumentation_callback=self.instrumented.append,
            around_request=around,
        )


@pytest.mark.feature("CUST-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_custom_methods_go_through_around_request_and_instrumentation(make_client, revision):
    observed = Observed()
    server = Server("custom", configuration=observed.configuration())
    server.define_custom_method("add", lambda params: params["a"] + params["b"])
    client = make_client(server, revision)
    observed.around.clear()
    observed.instrumented.clear()
    assert custom(client, "add", {"a": 1, "b": 2})["result"] == 3
    assert observed.around == [{
        "before": {"method": "add"},
        "after": {"method": "add", "client": {"name": "test-client", "version": "1.0.0"}},
    }]
    [data] = observed.instrumented
    assert data["method"] == "add" and isinstance(data["duration"], float) and data["duration"] >= 0
    assert "error" not in data
    assert observed.reports == []


@pytest.mark.feature("CUST-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_custom_method_failures_are_reported_once_and_not_leaked(make_client, revision):
    observed = Observed()
    server = Server("custom", configuration=observed.configuration())

    @server.define_custom_method("explode")
    def explode(params):
        raise RuntimeError("token=abc123")

    client = make_client(server, revision)
    observed.instrumented.clear()
    response = custom(client, "explode", {"x": 1}, request_id=9)
    assert response == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "Internal error"}}
    [(exc, context)] = observed.reports
    assert isinstance(exc, RuntimeError)
    assert context == {"request": {"jsonrpc": "2.0", "id": 9, "method": "explode", "params": {"x": 1}}}
    assert observed.instrumented[0]["method"] == "explode"
    assert observed.instrumented[0]["error"] == "internal_error"


@pytest.mark.feature("CUST-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_typed_errors_from_custom_methods_pass_through(make_client, revision):
    observed = Observed()
    server = Server("custom", configuration=observed.configuration())

    @server.define_custom_method("refuse")
    def refuse(params):
        raise MCPError("Not allowed", code=-32051, data={"why": "policy"})

    response = custom(make_client(server, revision), "refuse")
    assert response["error"] == {"code": -32051, "message": "Not allowed", "data": {"why": "policy"}}
    assert observed.reports == []


@pytest.mark.feature("CUST-05", "CUST-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_failing_custom_notification_is_reported_with_its_name(make_client, revision):
    observed = Observed()
    server = Server("custom", configuration=observed.configuration())

    @server.define_custom_method("app/event")
    def event(params):
        raise ValueError("bad event")

    make_client(server, revision)
    assert server.handle({"jsonrpc": "2.0", "method": "app/event", "params": {}}) is None
    [(exc, context)] = observed.reports
    assert isinstance(exc, ValueError)
    assert context == {"notification": "app/event"}


@pytest.mark.feature("CUST-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_unknown_method_is_instrumented_as_unsupported(make_client, revision):
    observed = Observed()
    server = Server("custom", configuration=observed.configuration())
    client = make_client(server, revision)
    observed.instrumented.clear()
    response = client.request("no/such/method", {}, check=False)
    assert response["error"]["code"] == -32601
    assert [data["method"] for data in observed.instrumented] == ["unsupported_method"]
    assert isinstance(observed.instrumented[0]["duration"], float)


@pytest.mark.feature("CUST-02")
async def test_a_custom_notification_over_streamable_http_gets_202_and_no_body(short_lived_connections):  # noqa: F811
    received: list[dict] = []
    server = Server("custom")
    server.define_custom_method("app/ping", received.append)
    transport = StreamableHTTPTransport(server)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    check_client_message(initialize, "2025-11-25")
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi()),
                                     base_url="http://127.0.0.1") as http:
            opened = await http.post("/mcp", json=initialize, headers=headers)
            assert opened.status_code == 200, opened.text
            headers.update({"mcp-session-id": opened.headers["mcp-session-id"],
                            "mcp-protocol-version": "2025-11-25"})
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            check_client_message(initialized, "2025-11-25")
            assert (await http.post("/mcp", json=initialized, headers=headers)).status_code == 202
            ping = {"jsonrpc": "2.0", "method": "app/ping", "params": {"n": 1}}
            answer = await http.post("/mcp", json=ping, headers=headers)
            assert (answer.status_code, answer.content) == (202, b"")
            await eventually(lambda: received == [{"n": 1}], what="the notification handled")
    finally:
        await transport.close()
