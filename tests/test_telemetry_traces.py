"""Spans of the MCP semantic conventions (MCP_SERVER["TELEMETRY"]), in process, with the
OpenTelemetry SDK's in-memory exporter: names, attributes, errors, parents from ``_meta``, both
eras, capture and redaction, the modes, background calls, and the client's spans. Every message
on the wire is checked against the schema of its revision."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_client import AsyncClient
from mcp_client.errors import ServerError
from mcp_server import Server, ServerContext, Tool, checks, ports, site, telemetry
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import ToolCall
from mcp_server.telemetry import tracing

from .client_support import InProcessTransport
from .harness import InProcessClient
from .http_support import call_asgi, post_headers
from .modern_support import MODERN, envelope, modern_request, post
from .wire import check_client_message, check_server_message

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
HANDSHAKE = "2025-11-25"

# One provider for the module (the global one can be set once per process, and another test
# module may have set it): the tracers of the server and the client are pointed at it.
EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture(autouse=True)
def spans(monkeypatch, short_lived_connections):
    monkeypatch.setattr(tracing, "tracer", lambda: PROVIDER.get_tracer("mcp_server"))
    import mcp_client.tracing

    monkeypatch.setattr(mcp_client.tracing, "tracer", lambda: PROVIDER.get_tracer("mcp_client"))
    site.install_telemetry()
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def finished(name: str | None = None) -> list:
    found = EXPORTER.get_finished_spans()
    return [span for span in found if name is None or span.name == name]


def only(name: str):
    found = finished(name)
    assert len(found) == 1, [span.name for span in finished()]
    return found[0]


async def initialized(server: Server) -> None:
    """The handshake on ``server.session``, from async code."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    check_client_message(message, HANDSHAKE)
    check_server_message(await server.handle_async(message), HANDSHAKE, "initialize")
    await server.handle_async({"jsonrpc": "2.0", "method": "notifications/initialized"})


def build_server() -> tuple[Server, dict]:
    seen: dict[str, Any] = {}
    server = Server("traced", version="1.0")

    @server.tool
    def echo(text: str, server_context: ServerContext) -> str:
        """Say it back."""
        seen["span"] = trace.get_current_span().get_span_context()
        seen["carrier"] = telemetry.trace_carrier()
        return text

    @server.tool
    def broken() -> dict:
        """Fails as a tool result."""
        return {"content": [{"type": "text", "text": "no"}], "isError": True}

    @server.tool(capture=True)
    def login(user: str, password: str) -> dict:
        """Captured, with a secret."""
        return {"content": [{"type": "text", "text": f"hello {user}"}], "token": "t0k3n"}

    @server.prompt
    def greeting() -> str:
        """Hello."""
        return "hello"

    return server, seen


def test_handshake_request_span_names_and_attributes():
    server, seen = build_server()
    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    client.result("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    client.result("prompts/get", {"name": "greeting"})
    client.result("tools/list")
    span = only("tools/call echo")
    assert span.kind == SpanKind.SERVER
    attributes = dict(span.attributes)
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["mcp.protocol.version"] == HANDSHAKE
    assert attributes["gen_ai.tool.name"] == "echo"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"] == "2"
    assert "error.type" not in attributes
    assert span.status.status_code == StatusCode.UNSET
    # The span is current while the tool runs.
    assert seen["span"] == span.get_span_context()
    prompt = only("prompts/get greeting")
    assert prompt.attributes["gen_ai.prompt.name"] == "greeting"
    assert "gen_ai.operation.name" not in prompt.attributes
    assert only("tools/list").attributes["mcp.method.name"] == "tools/list"
    initialize = only("initialize")
    assert initialize.attributes["mcp.protocol.version"] == HANDSHAKE
    # Notifications get spans too.
    assert only("notifications/initialized").kind == SpanKind.SERVER


def test_json_rpc_error_and_tool_error():
    server, _ = build_server()
    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    error = client.request("tools/call", {"name": "missing", "arguments": {}})
    assert "error" in error
    code = str(error["error"]["code"])
    span = only("tools/call missing")
    assert span.attributes["error.type"] == code
    assert span.attributes["rpc.response.status_code"] == code
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == error["error"]["message"]
    client.result("tools/call", {"name": "broken", "arguments": {}})
    failed = only("tools/call broken")
    assert failed.attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in failed.attributes
    assert failed.status.status_code == StatusCode.ERROR


async def test_parent_from_meta_and_the_ambient_span_becomes_a_link():
    server, seen = build_server()
    await initialized(server)
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "x"},
                          "_meta": {"traceparent": TRACEPARENT, "tracestate": "rojo=1"}}}
    check_client_message(message, HANDSHAKE)
    with PROVIDER.get_tracer("test").start_as_current_span("GET /mcp", kind=SpanKind.SERVER) as http:
        answer = await server.handle_async(message)
    check_server_message(answer, HANDSHAKE, "tools/call")
    span = only("tools/call echo")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.is_remote
    assert span.context.trace_state.get("rojo") == "1"
    assert [link.context.span_id for link in span.links] == [http.get_span_context().span_id]
    # What a background call would keep: this span's context.
    assert seen["carrier"]["traceparent"] == f"00-{TRACE_ID}-{format(span.context.span_id, '016x')}-01"


async def test_without_meta_the_ambient_span_is_the_parent():
    server, _ = build_server()
    await initialized(server)
    message = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "x"}}}
    with PROVIDER.get_tracer("test").start_as_current_span("POST /mcp") as http:
        await server.handle_async(message)
    span = only("tools/call echo")
    assert span.parent.span_id == http.get_span_context().span_id
    assert span.links == ()


@pytest.mark.django_db(transaction=True)
async def test_http_handshake_era_has_session_client_and_network_attributes():
    server, _ = build_server()
    transport = StreamableHTTPTransport(server, enable_json_response=True)
    app = transport.as_asgi()
    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        check_client_message(initialize, HANDSHAKE)
        reply = await call_asgi(app, "POST", post_headers(), [json.dumps(initialize).encode()])
        check_server_message(json.loads(reply.body), HANDSHAKE, "initialize")
        session_id = reply.header(b"mcp-session-id").decode()
        message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": TRACEPARENT}}}
        check_client_message(message, HANDSHAKE)
        reply = await call_asgi(app, "POST", post_headers(session_id, **{"mcp-protocol-version": HANDSHAKE}),
                                [json.dumps(message).encode()])
        check_server_message(json.loads(reply.body), HANDSHAKE, "tools/call")
    finally:
        await transport.close()
    attributes = dict(only("tools/call echo").attributes)
    assert attributes["mcp.session.id"] == session_id
    assert attributes["client.address"] == "127.0.0.1"
    assert attributes["client.port"] == 50000
    assert attributes["network.transport"] == "tcp"
    assert attributes["network.protocol.name"] == "http"
    assert attributes["network.protocol.version"] == "1.1"
    assert format(only("tools/call echo").context.trace_id, "032x") == TRACE_ID


@pytest.mark.django_db(transaction=True)
async def test_modern_era_span_has_no_session():
    server, _ = build_server()
    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    try:
        message = modern_request("tools/call", 3, meta={**envelope(), "traceparent": TRACEPARENT},
                                 name="echo", arguments={"text": "hi"})
        check_client_message(message, MODERN)
        reply = await post(app, message)  # each message of the reply checked against the schema
        assert reply.result["content"][0]["text"] == "hi"
    finally:
        await transport.close()
    span = only("tools/call echo")
    assert span.attributes["mcp.protocol.version"] == MODERN
    assert "mcp.session.id" not in span.attributes
    assert span.attributes["client.address"] == "127.0.0.1"
    assert format(span.context.trace_id, "032x") == TRACE_ID


def test_capture_is_opt_in_and_redacted():
    server, _ = build_server()
    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    client.result("tools/call", {"name": "login", "arguments": {"user": "ann", "password": "hunter2"}})
    client.result("tools/call", {"name": "echo", "arguments": {"text": "secret-ish"}})
    captured = only("tools/call login").attributes
    assert json.loads(captured["gen_ai.tool.call.arguments"]) == {"user": "ann", "password": "[REDACTED]"}
    result = json.loads(captured["gen_ai.tool.call.result"])
    assert result["token"] == "[REDACTED]"
    assert "hunter2" not in json.dumps(dict(captured))
    plain = only("tools/call echo").attributes
    assert "gen_ai.tool.call.arguments" not in plain
    assert "gen_ai.tool.call.result" not in plain


def test_capture_goes_through_the_redaction_policy():
    server, _ = build_server()
    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    with override_settings(MCP_SERVER={"REDACTION_POLICY": "tests.test_telemetry_traces.hide_all"}):
        site.install_telemetry()
        client.result("tools/call", {"name": "login", "arguments": {"user": "ann", "password": "x"}})
    site.install_telemetry()
    attributes = only("tools/call login").attributes
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"hidden": "login"}


def hide_all(name: str, value: Any) -> Any:
    return {"hidden": name}


def test_capture_must_be_a_boolean():
    with pytest.raises(ValueError, match="capture must be True or False"):
        Tool.define(lambda arguments: "x", name="bad", capture="yes")


def test_propagation_only_makes_no_span_and_carries_the_callers_context():
    server, seen = build_server()
    with override_settings(MCP_SERVER={"TELEMETRY": "propagation_only"}):
        site.install_telemetry()
        client = InProcessClient(server, HANDSHAKE)
        client.initialize()
        client.result("tools/call", {"name": "echo", "arguments": {"text": "x"},
                                     "_meta": {"traceparent": TRACEPARENT}})
    site.install_telemetry()
    assert finished() == []
    assert format(seen["span"].trace_id, "032x") == TRACE_ID
    assert seen["carrier"] == {"traceparent": TRACEPARENT}


def test_native_without_an_sdk_makes_no_span_but_carries_the_callers_context(monkeypatch):
    """With no SDK configured (the API's proxy tracer and a no-op provider) a span would go
    nowhere: none is started, yet the client's context from ``_meta`` is current in the tool."""
    started = []

    class Unconfigured(trace.ProxyTracer):
        def start_span(self, *args, **kwargs):
            started.append(args)
            return super().start_span(*args, **kwargs)

    unconfigured = Unconfigured("mcp_server")
    monkeypatch.setattr(tracing, "tracer", lambda: unconfigured)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    server, seen = build_server()
    server.roots_list_changed_handler(
        lambda params: seen.update(roots=trace.get_current_span().get_span_context()))
    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    client.result("tools/call", {"name": "echo", "arguments": {"text": "x"},
                                 "_meta": {"traceparent": TRACEPARENT}})
    assert format(seen["span"].trace_id, "032x") == TRACE_ID
    assert seen["carrier"] == {"traceparent": TRACEPARENT}
    assert not trace.get_current_span().get_span_context().is_valid  # detached when it finished
    asyncio.run(server.handle_async({"jsonrpc": "2.0", "method": "notifications/roots/list_changed",
                                     "params": {"_meta": {"traceparent": TRACEPARENT}}}))
    assert format(seen["roots"].trace_id, "032x") == TRACE_ID
    assert not trace.get_current_span().get_span_context().is_valid
    assert started == []
    assert finished() == []
    # Once an SDK's provider is the process's, the same tracer records again.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: PROVIDER)
    client.result("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert len(started) == 1


def test_off_observes_nothing():
    server, seen = build_server()
    with override_settings(MCP_SERVER={"TELEMETRY": "off"}):
        site.install_telemetry()
        assert not any(isinstance(o, tracing.SpanObserver | tracing.PropagationObserver)
                       for o in ports.observers())
        client = InProcessClient(server, HANDSHAKE)
        client.initialize()
        client.result("tools/call", {"name": "echo", "arguments": {"text": "x"},
                                     "_meta": {"traceparent": TRACEPARENT}})
        assert telemetry.trace_carrier() is None
    site.install_telemetry()
    assert finished() == []
    assert seen["carrier"] is None


def test_system_check_refuses_an_unknown_mode():
    with override_settings(MCP_SERVER={"TELEMETRY": "verbose"}):
        errors = checks.check_telemetry()
        assert [error.id for error in errors] == ["mcp_server.E050"]
        site.install_telemetry()  # an invalid value installs nothing, and the check says why
        assert not any(isinstance(o, tracing.SpanObserver) for o in ports.observers())
    site.install_telemetry()
    assert checks.check_telemetry() == []
    call_command("check")  # the default is valid


@pytest.mark.django_db(transaction=True)
def test_background_call_keeps_the_span_context():
    server = Server("background")

    @server.tool(background=True)
    def long_job(n: int) -> str:
        """Runs in the background (in process: no broker here)."""
        return str(n * 2)

    client = InProcessClient(server, HANDSHAKE)
    client.initialize()
    result = client.result("tools/call", {"name": "long_job", "arguments": {"n": 2},
                                          "_meta": {"traceparent": TRACEPARENT}})
    assert result["content"][0]["text"] == "4"
    span = only("tools/call long_job")
    call = ToolCall.objects.get(tool="long_job")
    assert call.trace_context["traceparent"] == \
        f"00-{TRACE_ID}-{format(span.context.span_id, '016x')}-01"


def test_worker_span_is_linked_to_and_continues_the_queued_context():
    queued = f"00-{TRACE_ID}-{PARENT_ID}-01"
    call = SimpleNamespace(tool="long_job", request_id=5, session_id="s1", protocol_version=HANDSHAKE,
                           arguments={"n": 1, "api_key": "k"}, trace_context={"traceparent": queued})
    tool = SimpleNamespace(capture=True)
    with telemetry.background_span(call, tool) as record:
        inside = trace.get_current_span().get_span_context()
        record({"jsonrpc": "2.0", "id": 5, "result": {"content": [], "isError": True}})
    span = only("tools/call long_job")
    assert span.kind == SpanKind.CONSUMER
    assert span.get_span_context() == inside
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert [format(link.context.span_id, "016x") for link in span.links] == [PARENT_ID]
    assert span.attributes["mcp.session.id"] == "s1"
    assert span.attributes["jsonrpc.request.id"] == "5"
    assert span.attributes["error.type"] == "tool_error"
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"n": 1, "api_key": "[REDACTED]"}


async def test_client_spans_and_injection_into_meta():
    server, _ = build_server()
    transport = InProcessTransport(server)
    client = AsyncClient(transport, mode="legacy")
    await client.connect(protocol_version=HANDSHAKE)
    try:
        with PROVIDER.get_tracer("test").start_as_current_span("work") as work:
            await client.call_tool("echo", {"text": "hi"}, meta={"progressToken": "p1"})
            with pytest.raises(ServerError):
                await client.call_tool("missing", {})
        await client.call_tool("broken", {})
    finally:
        await client.close()
    client_span = next(s for s in finished("tools/call echo") if s.kind == SpanKind.CLIENT)
    server_span = next(s for s in finished("tools/call echo") if s.kind == SpanKind.SERVER)
    assert client_span.parent.span_id == work.get_span_context().span_id
    assert client_span.attributes["gen_ai.tool.name"] == "echo"
    assert client_span.attributes["mcp.protocol.version"] == HANDSHAKE
    # The server's span is the child of the client's, through _meta.
    assert server_span.parent.span_id == client_span.context.span_id
    assert server_span.context.trace_id == work.get_span_context().trace_id
    missing = next(s for s in finished("tools/call missing") if s.kind == SpanKind.CLIENT)
    assert missing.attributes["error.type"] == missing.attributes["rpc.response.status_code"]
    assert missing.status.status_code == StatusCode.ERROR
    broken = next(s for s in finished("tools/call broken") if s.kind == SpanKind.CLIENT)
    assert broken.attributes["error.type"] == "tool_error"


async def test_client_keeps_the_callers_trace_keys(monkeypatch):
    server, _ = build_server()
    transport = InProcessTransport(server)
    sent: list[dict] = []
    original = transport.send

    async def recording(message: dict, **kwargs: Any) -> None:
        sent.append(message)
        await original(message, **kwargs)

    monkeypatch.setattr(transport, "send", recording)
    client = AsyncClient(transport, mode="legacy")
    await client.connect(protocol_version=HANDSHAKE)
    try:
        await client.call_tool("echo", {"text": "a"}, meta={"progressToken": "p1"})
        await client.call_tool("echo", {"text": "b"}, meta={"traceparent": TRACEPARENT})
    finally:
        await client.close()
    calls = [m for m in sent if m.get("method") == "tools/call"]
    first, second = (m["params"]["_meta"] for m in calls)
    assert first["progressToken"] == "p1"
    client_span = next(s for s in finished("tools/call echo") if s.kind == SpanKind.CLIENT)
    assert first["traceparent"].split("-")[2] == format(client_span.context.span_id, "016x")
    assert second["traceparent"] == TRACEPARENT  # the caller's own is not replaced


async def test_client_telemetry_off_sends_no_trace_keys(monkeypatch):
    server, _ = build_server()
    transport = InProcessTransport(server)
    client = AsyncClient(transport, mode="legacy", telemetry=False)
    assert client._tracing is None
    await client.connect(protocol_version=HANDSHAKE)
    try:
        await client.call_tool("echo", {"text": "a"})
    finally:
        await client.close()
    assert [s for s in finished() if s.kind == SpanKind.CLIENT] == []
    with pytest.raises(ValueError, match="telemetry must be"):
        AsyncClient(transport, telemetry="on")


def test_no_scope_no_network_attributes():
    assert tracing.network_attributes(None) == {}


async def test_cancelled_request_span_says_cancelled():
    server = Server("cancel")
    started = asyncio.Event()

    @server.tool
    async def wait_forever(server_context: ServerContext) -> str:
        """Waits until cancelled."""
        started.set()
        while not server_context.cancelled():
            await asyncio.sleep(0.01)  # the tool's own polling, not a test wait
        server_context.raise_if_cancelled()
        return "never"

    await initialized(server)
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
               "params": {"name": "wait_forever", "arguments": {}}}
    check_client_message(message, HANDSHAKE)
    running = asyncio.ensure_future(server.handle_async(message))
    await started.wait()
    server.session.cancel_request(9, "test")
    assert await running is None
    span = only("tools/call wait_forever")
    assert span.attributes["error.type"] == "cancelled"


@pytest.mark.django_db(transaction=True)
async def test_tasks_requests_get_spans_and_the_task_keeps_the_context():
    from mcp_server import Capabilities
    from mcp_server.extensions.tasks import Tasks

    tasks = "io.modelcontextprotocol/tasks"
    capabilities = Capabilities().support_tools().support_extensions(Tasks.capability())
    server = Server("tasks", capabilities=capabilities)

    @server.tool(background=True, task_only=True)
    async def report() -> str:
        """A task."""
        return "done"

    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    meta = {**envelope({"extensions": {tasks: {}}}), "traceparent": TRACEPARENT}
    try:
        message = modern_request("tools/call", 1, meta=meta, name="report", arguments={})
        check_client_message(message, MODERN)
        created = (await post(app, message)).result
        task_id = created["task"]["taskId"] if "task" in created else created["taskId"]
        get = modern_request("tasks/get", 2, meta=meta, taskId=task_id)
        check_client_message(get, MODERN)
        await post(app, get)
    finally:
        await transport.close()
    span = only("tasks/get")
    assert span.attributes["mcp.method.name"] == "tasks/get"
    assert format(span.context.trace_id, "032x") == TRACE_ID
    call = await run_in_thread(ToolCall.objects.get, tool="report")
    queued = only("tools/call report")
    assert call.trace_context["traceparent"].split("-")[2] == format(queued.context.span_id, "016x")


def test_stdio_spans_say_pipe():
    from .test_stdio import client_line, serve_lines

    server, _ = build_server()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": TRACEPARENT}}}
    _transport, answers, _stderr = serve_lines(server, client_line(initialize) + client_line(call))
    assert answers[-1]["result"]["content"][0]["text"] == "hi"
    span = only("tools/call echo")
    assert span.attributes["network.transport"] == "pipe"
    assert "client.address" not in span.attributes
    assert format(span.context.trace_id, "032x") == TRACE_ID


def test_worker_in_propagation_only_makes_the_queued_context_current_without_a_span():
    call = SimpleNamespace(tool="long_job", request_id=5, session_id="", protocol_version="",
                           arguments={}, trace_context={"traceparent": TRACEPARENT})
    with override_settings(MCP_SERVER={"TELEMETRY": "propagation_only"}):
        with telemetry.background_span(call, None) as record:
            inside = trace.get_current_span().get_span_context()
            record(None)
        assert format(inside.trace_id, "032x") == TRACE_ID
        assert format(inside.span_id, "016x") == PARENT_ID
        assert not trace.get_current_span().get_span_context().is_valid  # detached after
    with override_settings(MCP_SERVER={"TELEMETRY": "off"}), telemetry.background_span(call, None):
        assert not trace.get_current_span().get_span_context().is_valid
    site.install_telemetry()
    assert finished() == []


@pytest.mark.django_db(transaction=True)
def test_propagation_only_background_call_keeps_the_callers_context():
    server = Server("background")

    @server.tool(background=True)
    def long_job(n: int) -> str:
        """Runs in the background (in process: no broker here)."""
        return str(n)

    with override_settings(MCP_SERVER={"TELEMETRY": "propagation_only"}):
        site.install_telemetry()
        client = InProcessClient(server, HANDSHAKE)
        client.initialize()
        client.result("tools/call", {"name": "long_job", "arguments": {"n": 1},
                                     "_meta": {"traceparent": TRACEPARENT, "tracestate": "rojo=1"}})
    site.install_telemetry()
    assert finished() == []
    assert ToolCall.objects.get(tool="long_job").trace_context == {"traceparent": TRACEPARENT,
                                                                   "tracestate": "rojo=1"}


@pytest.mark.django_db(transaction=True)
async def test_an_audit_row_has_the_trace_of_the_requests_span_when_its_client_sent_none():
    from django.conf import settings

    from mcp_server import audit
    from mcp_server.models import AuditRecord

    server, _ = build_server()
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "TELEMETRY": "native", "AUDIT": True,
                                       "AUDIT_FLUSH_INTERVAL": 3600}):
        transport = StreamableHTTPTransport(server)
        app = transport.as_asgi()
        try:
            message = modern_request("tools/call", 4, meta=envelope(), name="echo", arguments={"text": "hi"})
            check_client_message(message, MODERN)
            assert (await post(app, message)).result["content"][0]["text"] == "hi"
        finally:
            await transport.close()
        await run_in_thread(audit.flush)
    span = only("tools/call echo")
    assert not span.parent  # a trace of its own: the client sent no traceparent
    row = await run_in_thread(AuditRecord.objects.get, request_id=4)
    assert row.trace_id == format(span.context.trace_id, "032x")
