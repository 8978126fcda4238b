"""``mcp_client.AsyncClient`` and ``Client``: the API, against our own ``Server`` in this process.

The client talks to the server through :class:`tests.client_support.InProcessTransport` (every
message through ``server.handle_async`` on one session, server notifications and requests coming
back live), or through duck-typed ``send_request`` transports for the custom-transport contract.
Every message the client writes is checked against the schema of the revision in use.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
import uuid
from typing import Any

import pytest

from mcp_client import (
    AsyncClient,
    CallToolResult,
    Cancellation,
    CancelledError,
    Client,
    NotConnectedError,
    PaginationLimitError,
    ServerError,
    ServerRequestError,
    Tool,
    TransportError,
    ValidationError,
    apply_defaults,
)
from mcp_protocol import MCPError
from mcp_server import Server, ServerContext, ServerSession, Text, ToolResponse

from .client_support import LATEST, InProcessTransport, WireCheck, cancel_when, every_message_checked
from .waiting import PATIENCE, eventually

REVISIONS = ["2025-11-25", "2024-11-05"]
CAPABILITIES = {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True}, "logging": {}, "completions": {}}
NAME_FORM = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Name"},
    "colour": {"type": "string", "default": "blue"},
    "age": {"type": "integer", "default": 30},
}, "required": ["name"]}
SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


def core_server(**options: Any) -> Server:
    """Tools, prompts, resources and completion; tools that talk back while they run."""
    server = Server("core", title="Core", version="1.2.3", instructions="Be kind.",
                    capabilities=options.pop("capabilities", CAPABILITIES), **options)
    server.cancelled_seen = []  # what wait_for_cancel saw: (request id, reason)

    @server.tool(title="Echo", annotations={"read_only_hint": True, "idempotent_hint": True})
    def echo(message: str) -> str:
        """Echo a message back."""
        return message

    @server.define_tool(name="add", description="Add two numbers", output_schema=SUM_SCHEMA,
                        input_schema={"properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                      "required": ["a", "b"]})
    def add(args: dict) -> ToolResponse:
        total = args["a"] + args["b"]
        return ToolResponse([Text(str(total))], structured_content={"sum": total})

    @server.define_tool(name="liar", output_schema=SUM_SCHEMA, input_schema={"properties": {
        "shape": {"type": "string"}}})
    def liar(args: dict) -> ToolResponse:
        """Breaks its own output schema, as told."""
        if args.get("shape") == "none":
            return ToolResponse([Text("no structure")])
        if args.get("shape") == "error":
            return ToolResponse([Text("failed")], error=True)
        return ToolResponse([Text("three")], structured_content={"sum": "three"})

    @server.tool
    async def count(to: int, server_context: ServerContext) -> str:
        """Report progress to ``to``."""
        for step in range(1, to + 1):
            await server_context.report_progress(step, total=to, message=f"step {step}")
        return f"counted to {to}"

    @server.tool
    async def ask(what: str, server_context: ServerContext) -> str:
        """Ask the client ("elicit", "sample", "roots" or "ping"); an error comes back as JSON."""
        try:
            if what == "elicit":
                result = await server_context.create_form_elicitation("Who are you?", NAME_FORM)
            elif what == "sample":
                result = await server_context.create_sampling_message(
                    [{"role": "user", "content": {"type": "text", "text": "2 + 2?"}}], 20)
            elif what == "roots":
                result = await server_context.list_roots()
            else:
                result = await server_context.ping()
        except MCPError as exc:
            return json.dumps({"error": {"code": exc.code, "message": exc.message, "data": exc.data}})
        return json.dumps({"result": result})

    @server.tool
    async def wait_for_cancel(server_context: ServerContext) -> str:
        """Wait (at most PATIENCE s) until the request is cancelled."""
        deadline = time.monotonic() + PATIENCE
        while not server_context.cancelled() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if server_context.cancelled():
            server.cancelled_seen.append((server_context.request_id, server_context.cancellation.reason))
        return "done"

    @server.tool
    async def log(server_context: ServerContext) -> str:
        """One log message at info, one at error."""
        await server_context.notify_log_message("an info line", "info", logger="core")
        await server_context.notify_log_message({"problem": "an error"}, "error", logger="core")
        return "logged"

    @server.tool
    def touch(uri: str) -> str:
        """Tell subscribers ``uri`` changed, and every session that the tool list changed."""
        return f"updated={server.notify_resources_updated(uri)} " \
               f"changed={server.notify_tools_list_changed()}"

    @server.prompt(description="Greet someone")
    def greet(name: str, style: str = "plain") -> str:
        return f"Write a {style} greeting for {name}."

    @server.resource("mem://readme", name="readme", title="Read me", mime_type="text/plain")
    def readme() -> str:
        return "hello"

    @server.resource_template("mem://items/{item_id}", name="item", mime_type="application/json")
    def item(item_id: str) -> str:
        return json.dumps({"id": item_id})

    @server.completion_handler
    def complete(params: dict) -> dict:
        styles = ["plain", "pirate", "poetic"]
        values = [s for s in styles if s.startswith(params["argument"]["value"])]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    return server


async def connected(server: Server | None = None, revision: str = LATEST, **options: Any
                    ) -> tuple[AsyncClient, InProcessTransport]:
    transport = InProcessTransport(server or core_server(), send_delay=options.pop("send_delay", 0.0))
    client = AsyncClient(transport, **{k: v for k, v in options.items() if k in ("max_pages",)})
    handlers = options.get("handlers", {})
    for method, handler in handlers.items():
        client.on_server_request(method, handler)
    await client.connect(protocol_version=revision, capabilities=options.get("capabilities"))
    return client, transport


def text_of(result: CallToolResult) -> Any:
    return json.loads(result.text)


# CLI-01, CLI-06: the transport -----------------------------------------------------------------

class RequestResponse:
    """A duck-typed transport of the Ruby shape: ``send_request(request) -> response`` (plain,
    blocking), answered by ``server.handle``; records what the client called."""

    def __init__(self, server: Server):
        self.server = server
        self.wire = WireCheck()
        self.calls: list[str] = []

    def send_request(self, request: dict) -> dict:
        self.calls.append(f"request {request['method']}")
        self.wire.outgoing(request)
        response = self.server.handle(request)
        self.wire.incoming(response)
        return response

    def send_notification(self, notification: dict) -> None:
        self.calls.append(f"notify {notification['method']}")
        self.wire.outgoing(notification)
        self.server.handle(notification)


class WithConnect(RequestResponse):
    def connect(self) -> None:
        self.calls.append("connect()")

    def close(self) -> None:
        self.calls.append("close()")


class WithModeConnect(RequestResponse):
    async def connect(self, mode: str | None = None) -> None:
        self.calls.append(f"connect(mode={mode})")
        self.server.session = ServerSession(self.server)  # server.handle's one session, afresh


@pytest.mark.feature("CLI-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_duck_typed_send_request_transport_is_enough(revision):
    transport = RequestResponse(core_server())
    client = AsyncClient(transport, max_pages=5, input_required_max_rounds=3)
    assert client.max_pages == 5 and client.input_required_max_rounds == 3
    await client.connect(protocol_version=revision)
    assert client.protocol_version == revision
    assert "echo" in [tool.name for tool in await client.tools()]
    assert (await client.call_tool("echo", {"message": "hi"})).text == "hi"
    # connect, send_notification and close are optional: this transport has neither connect nor close.
    await client.close()
    assert transport.calls[:2] == ["request initialize", "notify notifications/initialized"]
    assert transport.wire.revision == revision


@pytest.mark.feature("CLI-01", "CLI-12")
async def test_handlers_are_registered_on_a_custom_transports_own_route():
    class Routed(RequestResponse):
        def __init__(self, server: Server):
            super().__init__(server)
            self.routes: dict[str, Any] = {}

        def on_server_request(self, method: str, handler: Any) -> None:
            self.routes[method] = handler

    transport = Routed(core_server())
    client = AsyncClient(transport)

    def elicit(params: dict) -> dict:
        return {"action": "decline"}

    client.on_elicitation(elicit)
    await client.connect()
    client.on_server_request("acme/thing", elicit)
    assert transport.routes == {"elicitation/create": elicit, "acme/thing": elicit}
    assert transport.wire.sent[0]["params"]["capabilities"] == {"elicitation": {}}
    await client.close()


@pytest.mark.feature("CLI-01", "PAG-08")
@pytest.mark.parametrize("max_pages", [0, -1, 1.5, True, "3"])
def test_max_pages_must_be_a_positive_integer(max_pages):
    with pytest.raises(ValueError, match="max_pages"):
        AsyncClient(RequestResponse(core_server()), max_pages=max_pages)
    with pytest.raises(ValueError, match="max_pages"):
        Client(RequestResponse(core_server()), max_pages=max_pages)


@pytest.mark.feature("CLI-01")
def test_a_transport_of_no_known_shape_is_refused():
    with pytest.raises(TypeError, match="send_request"):
        AsyncClient(object())


@pytest.mark.feature("CLI-06")
async def test_a_connect_without_mode_gets_the_legacy_call_shape():
    transport = WithConnect(core_server())
    client = AsyncClient(transport)
    await client.connect()
    await client.close()
    assert transport.calls[0] == "connect()" and transport.calls[1] == "request initialize"
    assert transport.calls[-1] == "close()"


@pytest.mark.feature("CLI-06")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_explicit_mode_on_a_transport_whose_connect_has_none_raises(mode):
    for transport in (WithConnect(core_server()), RequestResponse(core_server())):
        client = AsyncClient(transport)
        with pytest.raises(ValueError, match="mode"):
            await client.connect(mode=mode)
        assert transport.calls == [] and not client.connected


@pytest.mark.feature("CLI-06", "CLI-03")
async def test_a_connect_that_declares_mode_gets_it():
    transport = WithModeConnect(core_server())
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    assert transport.calls[:2] == ["connect(mode=legacy)", "request initialize"]
    await client.close()
    # Without an explicit mode it is called the legacy way.
    await client.connect()
    assert transport.calls[3] == "connect(mode=None)"


# CLI-03, CLI-05, CLI-07: connecting ---------------------------------------------------------------

@pytest.mark.feature("CLI-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_legacy_mode_always_performs_the_handshake_with_no_probe(revision):
    transport = InProcessTransport(core_server())
    client = AsyncClient(transport)
    result = await client.connect(mode="legacy", protocol_version=revision)
    assert result["protocolVersion"] == revision
    # The handshake and nothing else: no server/discover probe first.
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    initialize = transport.wire.sent[0]["params"]
    assert initialize["clientInfo"] == {"name": "django-mcp-sdk-client", "version": "0.1.0"}
    assert initialize["capabilities"] == {}
    await client.close()


@pytest.mark.feature("CLI-05")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_a_pinned_handshake_version_is_offered_with_no_probe(revision):
    client, transport = await connected(revision=revision)
    assert transport.wire.sent[0]["params"]["protocolVersion"] == revision
    assert transport.wire.methods_sent()[0] == "initialize"
    assert client.protocol_version == revision
    await client.close()


@pytest.mark.feature("CLI-05")
@pytest.mark.parametrize("version", ["2026-07-28", "1999-01-01", "latest"])
async def test_a_version_that_is_no_handshake_revision_raises_before_anything_is_sent(version):
    transport = InProcessTransport(core_server())
    client = AsyncClient(transport)
    with pytest.raises(ValueError, match="handshake"):
        await client.connect(protocol_version=version, mode="legacy")
    assert transport.wire.sent == [] and transport.starts == 0


@pytest.mark.feature("CLI-07", "CLI-08")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_connect_is_idempotent_and_close_starts_over(revision):
    transport = InProcessTransport(core_server())
    client = AsyncClient(transport)
    assert not client.connected
    first = await client.connect(protocol_version=revision)
    assert client.connected
    assert await client.connect() is first  # cached: nothing sent
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    assert client.server_implementation == {"name": "core", "version": "1.2.3", "title": "Core"} \
        if revision == "2025-11-25" else client.server_implementation["name"] == "core"
    assert client.server_capabilities == first["capabilities"]
    assert client.instructions == ("Be kind." if revision != "2024-11-05" else None)
    assert client.server_info is first and client.protocol_version == revision

    await client.close()
    assert not client.connected and client.protocol_version is None and client.server_capabilities == {}
    with pytest.raises(NotConnectedError):
        await client.ping()
    await client.close()  # twice is fine

    await client.connect(protocol_version=revision)
    assert transport.wire.methods_sent().count("initialize") == 2 and transport.starts == 2
    assert await client.ping() == {}
    await client.close()


@pytest.mark.feature("CLI-07")
async def test_a_failed_handshake_leaves_nothing_open_and_can_be_retried():
    calls = {"n": 0}

    class FlakyServer(RequestResponse):
        def send_request(self, request: dict) -> dict:
            calls["n"] += 1
            if calls["n"] == 1:
                return {"jsonrpc": "2.0", "id": request["id"], "result": {"protocolVersion": "nope"}}
            return super().send_request(request)

        def close(self) -> None:
            self.calls.append("close()")

    transport = FlakyServer(core_server())
    client = AsyncClient(transport)
    with pytest.raises(ValidationError, match="initialize result"):
        await client.connect()
    assert not client.connected and transport.calls == ["close()"]
    await client.connect()
    assert client.connected


@pytest.mark.feature("CLI-07")
def test_the_blocking_client_is_a_context_manager(tmp_path):
    client = Client(InProcessTransport(core_server()))
    client.connect(mode="legacy")  # in process, the handshake era; the context manager reuses it
    with client:
        assert client.connected and client.protocol_version == LATEST
        assert client.call_tool("echo", {"message": "sync"}).text == "sync"
    assert not client.connected
    with pytest.raises(RuntimeError, match="shut down"):
        client.ping()


# CLI-10, CLI-11, TOOL-24: tools ----------------------------------------------------------------

@pytest.mark.feature("TOOL-24")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_tool_objects_expose_what_tools_list_said(revision):
    client, _ = await connected(revision=revision)
    tools = {tool.name: tool for tool in await client.tools()}
    echo, add = tools["echo"], tools["add"]
    assert isinstance(echo, Tool)
    assert echo.description == "Echo a message back."
    assert echo.input_schema["properties"] == {"message": {"type": "string"}}
    assert echo.output_schema is None
    assert add.output_schema["properties"] == SUM_SCHEMA["properties"]
    assert add.output_schema["required"] == ["sum"]
    if revision == "2025-11-25":
        assert echo.title == "Echo"
        assert echo.annotations["readOnlyHint"] is True and echo.annotations["idempotentHint"] is True
    assert (echo.title, echo.annotations) == (echo.raw.get("title"), echo.raw.get("annotations"))
    assert echo.raw["name"] == "echo"
    await client.close()


@pytest.mark.feature("CLI-10")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_call_tool_by_name_or_tool_returns_a_typed_result(revision):
    client, transport = await connected(revision=revision)
    result = await client.call_tool("add", {"a": 2, "b": 3})
    assert isinstance(result, CallToolResult)
    assert result.text == "5" and result.structured_content == {"sum": 5} and not result.is_error
    assert result.raw["content"] == [{"type": "text", "text": "5"}]
    assert result.raw["structuredContent"] == {"sum": 5}
    [echo] = [tool for tool in await client.tools() if tool.name == "echo"]
    assert (await client.call_tool(tool=echo, arguments={"message": "by tool"})).text == "by tool"
    calls = transport.wire.sent_of("tools/call")
    assert calls[1]["params"] == {"name": "echo", "arguments": {"message": "by tool"}}
    with pytest.raises(ValueError, match="name= or tool="):
        await client.call_tool()
    failed = await client.call_tool("liar", {"shape": "error"})
    assert failed.is_error and failed.text == "failed"
    await client.close()


@pytest.mark.feature("CLI-11")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_json_rpc_error_raises_server_error_with_code_and_data(revision):
    client, _ = await connected(revision=revision)
    with pytest.raises(ServerError) as raised:
        await client.read_resource("mem://nothing-here")
    assert raised.value.code == -32602 and raised.value.data == {"uri": "mem://nothing-here"}
    assert raised.value.message and str(raised.value).endswith("(code -32602)")
    with pytest.raises(ServerError) as raised:
        await client.get_prompt("no-such-prompt")
    assert raised.value.code == -32602
    await client.close()


class Scripted:
    """A duck-typed transport that answers each method from a table (a result, or a function of
    the request returning the whole response); its answers are deliberately not checked."""

    def __init__(self, answers: dict[str, Any]):
        self.answers = {"initialize": {"protocolVersion": LATEST, "capabilities": {"tools": {}},
                                       "serverInfo": {"name": "scripted", "version": "1"}}, **answers}
        self.wire = WireCheck(check_server=False)
        self.requests: list[dict] = []

    def send_request(self, request: dict) -> dict:
        self.wire.outgoing(request)
        self.requests.append(request)
        answer = self.answers[request["method"]]
        if callable(answer):
            return answer(request)
        return {"jsonrpc": "2.0", "id": request["id"], "result": answer}

    def send_notification(self, notification: dict) -> None:
        self.wire.outgoing(notification)


@pytest.mark.feature("CLI-11")
@pytest.mark.parametrize(("method", "answer", "call"), [
    ("tools/list", {"tools": "nope"}, lambda c: c.list_tools()),
    ("tools/list", {"tools": [{"description": "no name"}]}, lambda c: c.tools()),
    ("tools/call", {"structuredContent": {}}, lambda c: c.call_tool("x")),
    ("prompts/list", {}, lambda c: c.prompts()),
    ("prompts/get", {"messages": "none"}, lambda c: c.get_prompt("p")),
    ("resources/read", [], lambda c: c.read_resource("a://b")),
    ("resources/read", {"contents": {"uri": "a://b"}}, lambda c: c.read_resource("a://b")),
    ("resources/templates/list", {"resourceTemplates": [{"name": "t"}]}, lambda c: c.resource_templates()),
    ("tools/call", lambda request: {"jsonrpc": "2.0", "id": request["id"]}, lambda c: c.call_tool("x")),
])
async def test_results_of_the_wrong_shape_raise_validation_error(method, answer, call):
    client = AsyncClient(Scripted({method: answer}))
    await client.connect()
    with pytest.raises(ValidationError):
        await call(client)


@pytest.mark.feature("CLI-11")
@pytest.mark.parametrize("result", [{"protocolVersion": "2026-07-28", "capabilities": {}},
                                    {"protocolVersion": LATEST}, "ok"])
async def test_an_unusable_initialize_result_raises_validation_error(result):
    client = AsyncClient(Scripted({"initialize": result}))
    with pytest.raises(ValidationError, match="initialize"):
        await client.connect()
    assert not client.connected


@pytest.mark.feature("CLI-10", "CLI-11")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])
async def test_structured_content_is_checked_against_the_output_schema(revision):
    client, _ = await connected(revision=revision)
    # Before tools/list the schema is unknown: nothing to check against.
    assert (await client.call_tool("liar")).structured_content == {"sum": "three"}
    await client.tools()
    with pytest.raises(ValidationError, match="does not match its output schema"):
        await client.call_tool("liar")
    with pytest.raises(ValidationError, match="no structuredContent"):
        await client.call_tool("liar", {"shape": "none"})
    assert (await client.call_tool("liar", {"shape": "error"})).is_error  # errors are not checked
    assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}
    await client.close()


# PROG-04, CAN-07..09, TRACE-03 -----------------------------------------------------------------

@pytest.mark.feature("PROG-04")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_progress_token_wins_over_meta_and_progress_reaches_the_callbacks(revision):
    client, transport = await connected(revision=revision)
    everything: list[dict] = []
    client.on_progress(everything.append)
    mine: list[dict] = []
    meta = {"progressToken": "from-meta", "note": "kept"}
    result = await client.call_tool("count", {"to": 3}, progress_token="tok-1", meta=meta,
                                    on_progress=mine.append)
    assert result.text == "counted to 3"
    assert meta == {"progressToken": "from-meta", "note": "kept"}  # the caller's dict is untouched
    [call] = transport.wire.sent_of("tools/call")
    assert call["params"]["_meta"] == {"progressToken": "tok-1", "note": "kept"}
    assert [(p["progressToken"], p["progress"], p["total"], p["message"]) for p in mine] == [
        ("tok-1", 1, 3, "step 1"), ("tok-1", 2, 3, "step 2"), ("tok-1", 3, 3, "step 3")]
    assert everything == mine
    # An integer token, and a generated one when only the callback is given.
    numbered: list[dict] = []
    await client.call_tool("count", {"to": 1}, progress_token=7, on_progress=numbered.append)
    assert [p["progressToken"] for p in numbered] == [7]
    generated: list[dict] = []
    await client.call_tool("count", {"to": 1}, on_progress=generated.append)
    token = transport.wire.sent_of("tools/call")[-1]["params"]["_meta"]["progressToken"]
    assert [p["progressToken"] for p in generated] == [token]
    # Without a token there is no progress.
    await client.call_tool("count", {"to": 2})
    assert "_meta" not in transport.wire.sent_of("tools/call")[-1]["params"]
    assert len(everything) == 5
    await client.close()


@pytest.mark.feature("CAN-07")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_cancel_from_another_thread_raises_and_tells_the_server(revision):
    server = core_server()
    client, transport = await connected(server, revision=revision)
    token = Cancellation()
    cancel_when(lambda: transport.wire.sent_of("tools/call"), token, reason="user gave up")
    # Raised on the cancel, not on an answer: the tool only returns once it sees the cancel.
    with pytest.raises(CancelledError) as raised:
        await asyncio.wait_for(client.call_tool("wait_for_cancel", cancellation=token), PATIENCE)
    assert raised.value.reason == "user gave up"
    [call] = transport.wire.sent_of("tools/call")
    await eventually(lambda: server.cancelled_seen)
    [cancel] = transport.wire.sent_of("notifications/cancelled")
    assert cancel["params"] == {"requestId": call["id"], "reason": "user gave up"}
    assert server.cancelled_seen == [(call["id"], "user gave up")]
    # An already cancelled token raises at once and sends nothing.
    with pytest.raises(CancelledError):
        await client.ping(cancellation=token)
    assert transport.wire.sent_of("ping") == []
    assert await client.ping() == {}
    await client.close()


@pytest.mark.feature("CAN-07")
async def test_every_request_method_takes_a_cancellation():
    client, transport = await connected()
    cancelled = Cancellation()
    cancelled.cancel()
    calls = [
        client.ping(cancellation=cancelled), client.list_tools(cancellation=cancelled),
        client.tools(cancellation=cancelled),
        client.call_tool("echo", {"message": "x"}, cancellation=cancelled),
        client.list_prompts(cancellation=cancelled), client.prompts(cancellation=cancelled),
        client.get_prompt("greet", {"name": "x"}, cancellation=cancelled),
        client.list_resources(cancellation=cancelled), client.resources(cancellation=cancelled),
        client.list_resource_templates(cancellation=cancelled),
        client.resource_templates(cancellation=cancelled),
        client.read_resource("mem://readme", cancellation=cancelled),
        client.subscribe_resource("mem://readme", cancellation=cancelled),
        client.unsubscribe_resource("mem://readme", cancellation=cancelled),
        client.complete({"type": "ref/prompt", "name": "greet"}, {"name": "style", "value": "p"},
                        cancellation=cancelled),
        client.set_logging_level("info", cancellation=cancelled),
    ]
    for call in calls:
        with pytest.raises(CancelledError):
            await call
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    await client.close()


@pytest.mark.feature("CAN-08")
async def test_the_cancel_waits_until_its_request_was_handed_off():
    server = core_server()
    client, transport = await connected(server)
    handed_off: list[str] = []
    release = asyncio.Event()  # the send of tools/call is held until the caller was released
    send = transport.send

    async def recording_send(message: dict, *, on_sent: Any = None) -> None:
        def sent() -> None:
            handed_off.append(message.get("method"))
            if on_sent is not None:
                on_sent()

        handed_off.append(f"start {message.get('method')}")
        if message.get("method") == "tools/call":
            await release.wait()
        await send(message, on_sent=sent)

    transport.send = recording_send
    token = Cancellation()
    cancel_when(lambda: "start tools/call" in handed_off, token, reason="too slow")
    with pytest.raises(CancelledError):
        await asyncio.wait_for(client.call_tool("wait_for_cancel", cancellation=token), PATIENCE)
    # The caller was released at once, before the request was even handed off...
    assert handed_off == ["start tools/call"]
    release.set()
    await eventually(lambda: len(handed_off) == 4)
    # ...but the cancel went out only after its request.
    assert handed_off == ["start tools/call", "tools/call", "start notifications/cancelled",
                          "notifications/cancelled"]
    await eventually(lambda: server.cancelled_seen)
    assert server.cancelled_seen[0][1] == "too slow"
    await client.close()


class SlowRequests(RequestResponse):
    """``send_request`` of tools/call returns once ``release`` is set; records when requests
    end and notifications arrive."""

    def __init__(self, server: Server, *, report_sent: bool):
        super().__init__(server)
        self.lock = threading.Lock()
        self.release = threading.Event()
        if report_sent:
            self.send_request = self._send_request_reporting  # type: ignore[method-assign]

    def _record(self, entry: str) -> None:
        with self.lock:
            self.calls.append(entry)

    def send_request(self, request: dict) -> dict:
        response = super().send_request(request)
        if request["method"] == "tools/call":
            self.release.wait(PATIENCE)
        self._record(f"end {request['method']}")
        return response

    def _send_request_reporting(self, request: dict, on_sent: Any = None) -> dict:
        if on_sent is not None:
            on_sent()
        return SlowRequests.send_request(self, request)

    def send_notification(self, notification: dict) -> None:
        self._record(f"notify {notification['method']}")
        self.wire.outgoing(notification)


@pytest.mark.feature("CAN-09")
@pytest.mark.parametrize("report_sent", [False, True])
async def test_a_custom_transport_gets_the_cancel_after_the_request_unless_it_reports_sent(report_sent):
    transport = SlowRequests(core_server(), report_sent=report_sent)
    client = AsyncClient(transport)
    await client.connect()
    token = Cancellation()
    cancel_when(lambda: "request tools/call" in transport.calls, token)
    with pytest.raises(CancelledError):
        await asyncio.wait_for(client.call_tool("echo", {"message": "slow"}, cancellation=token), PATIENCE)
    assert "end tools/call" not in transport.calls  # released before send_request returned
    if report_sent:
        await eventually(lambda: "notify notifications/cancelled" in transport.calls)
    else:  # a ping answered after the cancel: the client has had its chance to send it early
        assert await asyncio.wait_for(client.ping(), PATIENCE) == {}
    transport.release.set()
    wanted = ("end tools/call", "notify notifications/cancelled")
    await eventually(lambda: set(wanted) <= set(transport.calls))
    order = [c for c in transport.calls if c in wanted]
    if report_sent:  # on_sent was called: the cancel overlaps the running request
        assert order == ["notify notifications/cancelled", "end tools/call"]
    else:  # no hook: the cancel follows the request's end
        assert order == ["end tools/call", "notify notifications/cancelled"]
    await client.close()


@pytest.mark.feature("TRACE-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_meta_is_merged_into_every_request_without_touching_the_callers_dict(revision):
    client, transport = await connected(revision=revision)
    meta = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "custom": {"k": 1}}
    original = copy.deepcopy(meta)
    calls = {
        "ping": client.ping(meta=meta),
        "tools/list": client.list_tools(meta=meta),
        "tools/call": client.call_tool("echo", {"message": "m"}, meta=meta, progress_token="p"),
        "prompts/list": client.prompts(meta=meta),
        "prompts/get": client.get_prompt("greet", {"name": "Ada"}, meta=meta),
        "resources/list": client.list_resources(meta=meta),
        "resources/templates/list": client.resource_templates(meta=meta),
        "resources/read": client.read_resource("mem://readme", meta=meta),
        "completion/complete": client.complete({"type": "ref/prompt", "name": "greet"},
                                               {"name": "style", "value": "p"}, meta=meta),
    }
    for method, call in calls.items():
        await call
        sent = transport.wire.sent_of(method)[-1]["params"]["_meta"]
        expected = {**original, "progressToken": "p"} if method == "tools/call" else original
        assert sent == expected, method
    assert meta == original
    await client.close()


@pytest.mark.feature("CORE-20")
async def test_request_ids_are_generated_uuids():
    client, transport = await connected()
    await client.ping()
    await client.tools()
    ids = [m["id"] for m in transport.wire.sent if "method" in m and "id" in m]
    assert len(ids) == len(set(ids)) == 3
    for request_id in ids:
        assert isinstance(request_id, str) and str(uuid.UUID(request_id)) == request_id
    await client.close()


# PING-03 ---------------------------------------------------------------------------------------

@pytest.mark.feature("PING-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_ping_returns_an_empty_object(revision):
    client, transport = await connected(revision=revision)
    assert await client.ping() == {}
    assert await client.ping(meta={"k": "v"}) == {}
    assert [m.get("params") for m in transport.wire.sent_of("ping")] == [None, {"_meta": {"k": "v"}}]
    await client.close()


@pytest.mark.feature("PING-03")
@pytest.mark.parametrize(("answer", "error"), [
    (lambda r: {"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32000, "message": "busy", "data": [1]}},
     ServerError),
    (lambda r: {"jsonrpc": "2.0", "id": r["id"]}, ValidationError),
    (lambda r: {"jsonrpc": "2.0", "id": r["id"], "result": "pong"}, ValidationError),
    (lambda r: {"jsonrpc": "2.0", "id": r["id"], "result": None}, ValidationError),
])
async def test_ping_errors_and_bad_results(answer, error):
    client = AsyncClient(Scripted({"ping": answer}))
    await client.connect()
    with pytest.raises(error) as raised:
        await client.ping()
    if error is ServerError:
        assert (raised.value.code, raised.value.message, raised.value.data) == (-32000, "busy", [1])


# PAG-06..08 ------------------------------------------------------------------------------------

def paged_server() -> Server:
    server = core_server(page_size=2, ttl_ms=5000, cache_scope="public")
    for number in range(5):
        server.define_tool(lambda args: "x", name=f"extra_{number}", description="filler")
    return server


@pytest.mark.feature("PAG-06")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_one_page_is_one_request_with_its_cursor_and_hints(revision):
    client, transport = await connected(paged_server(), revision=revision)
    first = await client.list_tools()
    assert len(first.tools) == 2 and first.items is first.tools and first.next_cursor
    assert (first.ttl_ms, first.cache_scope) == (5000, "public")
    assert transport.wire.sent_of("tools/list") == [transport.wire.sent[-1]]
    assert "params" not in transport.wire.sent[-1]
    second = await client.list_tools(first.next_cursor)
    assert transport.wire.sent[-1]["params"] == {"cursor": first.next_cursor}
    assert [t.name for t in second.tools] != [t.name for t in first.tools]
    page = first
    pages = 1
    while page.next_cursor is not None:
        page = await client.list_tools(page.next_cursor)
        pages += 1
    assert page.next_cursor is None and pages == 7  # 13 tools, 2 a page
    for lister, key in ((client.list_prompts, "prompts"), (client.list_resources, "resources"),
                        (client.list_resource_templates, "resource_templates")):
        result = await lister()
        assert isinstance(getattr(result, key), list) and result.next_cursor is None
    await client.close()


@pytest.mark.feature("PAG-07")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_the_whole_collection_follows_the_cursors(revision):
    server = paged_server()
    client, transport = await connected(server, revision=revision)
    tools = await client.tools()
    assert [t.name for t in tools] == list(server.tools)
    assert len(transport.wire.sent_of("tools/list")) == 7  # 13 tools, 2 a page
    assert [p.name for p in await client.prompts()] == ["greet"]
    assert [r.uri for r in await client.resources()] == ["mem://readme"]
    assert [t.uri_template for t in await client.resource_templates()] == ["mem://items/{item_id}"]
    await client.close()


@pytest.mark.feature("PAG-08")
async def test_a_repeated_cursor_stops_the_collection():
    def page(request: dict) -> dict:
        cursor = (request.get("params") or {}).get("cursor")
        following = {None: "a", "a": "b", "b": "a"}[cursor]
        tools = [{"name": f"after-{cursor}", "inputSchema": {"type": "object"}}]
        return {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": tools, "nextCursor": following}}

    transport = Scripted({"tools/list": page})
    client = AsyncClient(transport)
    await client.connect()
    assert [t.name for t in await client.tools()] == ["after-None", "after-a", "after-b"]
    assert len([r for r in transport.requests if r["method"] == "tools/list"]) == 3


@pytest.mark.feature("PAG-08")
@pytest.mark.parametrize("max_pages", [1, 3])
async def test_more_fresh_cursors_than_max_pages_raise(max_pages):
    def page(request: dict) -> dict:
        cursor = int((request.get("params") or {}).get("cursor", "0"))
        return {"jsonrpc": "2.0", "id": request["id"], "result": {"prompts": [{"name": f"p{cursor}"}],
                                                                   "nextCursor": str(cursor + 1)}}

    transport = Scripted({"prompts/list": page})
    client = AsyncClient(transport, max_pages=max_pages)
    await client.connect()
    with pytest.raises(PaginationLimitError, match=f"after {max_pages} pages"):
        await client.prompts()
    assert len([r for r in transport.requests if r["method"] == "prompts/list"]) == max_pages
    # One page of it is still fine.
    assert (await client.list_prompts()).next_cursor == "1"


# PRM-08/09, RES-13/14, CMP-07 ------------------------------------------------------------------

@pytest.mark.feature("PRM-08", "PRM-09")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_prompts(revision):
    client, transport = await connected(revision=revision)
    page = await client.list_prompts()
    [greet] = page.prompts
    assert greet.name == "greet" and greet.description == "Greet someone"
    assert [a["name"] for a in greet.arguments] == ["name", "style"]
    assert [p.name for p in await client.prompts()] == ["greet"]
    result = await client.get_prompt("greet", {"name": "Ada", "style": 3}, meta={"m": 1})
    assert result["messages"] == [{"role": "user", "content": {"type": "text",
                                                               "text": "Write a 3 greeting for Ada."}}]
    # Argument values go out as strings, as the schema requires.
    assert transport.wire.sent_of("prompts/get")[0]["params"] == {
        "name": "greet", "arguments": {"name": "Ada", "style": "3"}, "_meta": {"m": 1}}
    token = Cancellation()
    token.cancel()
    with pytest.raises(CancelledError):
        await client.get_prompt("greet", {"name": "x"}, cancellation=token)
    await client.close()


@pytest.mark.feature("RES-13", "RES-14")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_resources_and_templates(revision):
    client, _ = await connected(revision=revision)
    [readme] = (await client.list_resources()).resources
    assert (readme.uri, readme.name, readme.mime_type) == ("mem://readme", "readme", "text/plain")
    assert readme.title == readme.raw.get("title")
    assert [r.uri for r in await client.resources()] == ["mem://readme"]
    [template] = (await client.list_resource_templates()).resource_templates
    assert (template.uri_template, template.name) == ("mem://items/{item_id}", "item")
    assert [t.name for t in await client.resource_templates()] == ["item"]
    assert await client.read_resource("mem://readme") == [
        {"uri": "mem://readme", "mimeType": "text/plain", "text": "hello"}]
    [item] = await client.read_resource("mem://items/42", meta={"m": 1})
    assert json.loads(item["text"]) == {"id": "42"}
    await client.close()


@pytest.mark.feature("RES-13")
async def test_read_resource_without_contents_is_an_empty_list():
    client = AsyncClient(Scripted({"resources/read": {}}))
    await client.connect()
    assert await client.read_resource("a://b") == []


@pytest.mark.feature("CMP-07")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_complete(revision):
    client, transport = await connected(revision=revision)
    completion = await client.complete({"type": "ref/prompt", "name": "greet"},
                                       {"name": "style", "value": "p"}, meta={"m": 1})
    assert completion == {"values": ["plain", "pirate", "poetic"], "total": 3, "hasMore": False}
    if revision == "2025-11-25":  # context arrived with 2025-06-18
        completion = await client.complete({"type": "ref/prompt", "name": "greet"},
                                           {"name": "style", "value": "po"},
                                           context={"arguments": {"name": "Ada"}})
        assert completion["values"] == ["poetic"]
        assert transport.wire.sent_of("completion/complete")[-1]["params"]["context"] == {
            "arguments": {"name": "Ada"}}
    await client.close()


@pytest.mark.feature("CMP-07")
async def test_complete_without_a_completion_gives_no_values():
    client = AsyncClient(Scripted({"completion/complete": {}}))
    await client.connect()
    assert await client.complete({"type": "ref/prompt", "name": "p"}, {"name": "a", "value": ""}) == {
        "values": [], "hasMore": False}


# CLI-12, CLI-13, ELI-09, SMP-04, SMP-05, ROOT-05: requests from the server -----------------------

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "tiny",
           "stopReason": "endTurn"}


@pytest.mark.feature("CLI-12", "ELI-09", "SMP-05", "ROOT-05")
@pytest.mark.parametrize("style", ["async", "plain"])
async def test_handlers_answer_live_server_requests(style):
    seen: list[tuple[str, dict]] = []

    def elicit(params: dict) -> dict:
        seen.append(("elicit", params))
        return {"action": "accept", "content": apply_defaults(params["requestedSchema"], {"name": "Ada"})}

    def sample(params: dict) -> dict:
        seen.append(("sample", params))
        return SAMPLED

    def roots(params: dict) -> dict:
        seen.append(("roots", params))
        return {"roots": [{"uri": "file:///work", "name": "work"}]}

    handlers = {"elicitation/create": elicit, "sampling/createMessage": sample, "roots/list": roots}
    if style == "async":
        def asynchronous(function: Any) -> Any:
            async def run(params: dict) -> dict:
                await asyncio.sleep(0)
                return function(params)
            return run
        handlers = {method: asynchronous(handler) for method, handler in handlers.items()}
    transport = InProcessTransport(core_server())
    client = AsyncClient(transport)
    client.on_elicitation(handlers["elicitation/create"])
    client.on_sampling(handlers["sampling/createMessage"])
    client.on_roots(handlers["roots/list"])
    await client.connect(mode="legacy")
    # The handlers declared their capabilities.
    assert transport.wire.sent[0]["params"]["capabilities"] == {
        "elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
    elicited = text_of(await client.call_tool("ask", {"what": "elicit"}))
    assert elicited == {"result": {"action": "accept",
                                   "content": {"name": "Ada", "colour": "blue", "age": 30}}}
    assert text_of(await client.call_tool("ask", {"what": "sample"})) == {"result": SAMPLED}
    assert text_of(await client.call_tool("ask", {"what": "roots"})) == {
        "result": {"roots": [{"uri": "file:///work", "name": "work"}]}}
    # A ping from the server needs no handler.
    assert text_of(await client.call_tool("ask", {"what": "ping"})) == {"result": {}}
    assert [kind for kind, _ in seen] == ["elicit", "sample", "roots"]
    assert seen[0][1]["message"] == "Who are you?" and seen[1][1]["maxTokens"] == 20
    await client.notify_roots_list_changed()
    assert transport.wire.methods_sent()[-1] == "notifications/roots/list_changed"
    await client.close()


@pytest.mark.feature("CLI-12", "SMP-04", "SMP-05")
async def test_handler_errors_become_error_responses():
    def reject(params: dict) -> dict:
        raise ServerRequestError("the user said no", code=-1, data={"why": "no"})

    def crash(params: dict) -> dict:
        raise RuntimeError("secret details")

    client, transport = await connected(capabilities={"elicitation": {}, "roots": {}},
                                        handlers={"sampling/createMessage": reject, "roots/list": crash})
    # Sampling rejected by the user: the server's handler sees code -1 (SMP-04).
    assert text_of(await client.call_tool("ask", {"what": "sample"})) == {
        "error": {"code": -1, "message": "the user said no", "data": {"why": "no"}}}
    # Any other exception: -32603, with nothing of the exception on the wire.
    error = text_of(await client.call_tool("ask", {"what": "roots"}))["error"]
    assert error["code"] == -32603 and "secret" not in json.dumps(error)
    # A declared capability without a handler: -32601.
    assert text_of(await client.call_tool("ask", {"what": "elicit"}))["error"]["code"] == -32601
    responses = [m for m in transport.wire.sent if "method" not in m]
    assert [r["error"]["code"] for r in responses] == [-1, -32603, -32601]
    await client.close()


@pytest.mark.feature("CLI-13")
async def test_a_handler_for_any_method():
    answered: list[dict] = []

    class Pushy(Scripted):
        """Before answering tools/call it sends the client a request of its own method."""

        def __init__(self) -> None:
            super().__init__({})
            self.deliver: Any = None

        async def start(self, deliver: Any, fail: Any) -> None:
            self.deliver = deliver

        async def send(self, message: dict, **kwargs: Any) -> None:
            self.wire.outgoing(message)
            if "method" not in message:
                answered.append(message)
            elif message["method"] == "initialize":
                await self.deliver({"jsonrpc": "2.0", "id": message["id"],
                                    "result": self.answers["initialize"]})
            elif message["method"] == "tools/call":
                await self.deliver({"jsonrpc": "2.0", "id": "s-1", "method": "acme/status",
                                    "params": {"ask": "status"}})
                await self.deliver({"jsonrpc": "2.0", "id": "s-2", "method": "acme/other"})
                await eventually(lambda: len(answered) == 2)
                await self.deliver({"jsonrpc": "2.0", "id": message["id"],
                                    "result": {"content": [{"type": "text", "text": "ok"}]}})

        async def close(self) -> None:
            pass

    transport = Pushy()
    client = AsyncClient(transport)
    client.on_server_request("acme/status", lambda params: {"status": "green", "asked": params["ask"]})
    await client.connect()
    assert (await client.call_tool("x")).text == "ok"
    assert sorted(answered, key=lambda m: m["id"]) == [
        {"jsonrpc": "2.0", "id": "s-1", "result": {"status": "green", "asked": "status"}},
        {"jsonrpc": "2.0", "id": "s-2", "error": {"code": -32601, "message": "Method not found",
                                                   "data": "acme/other"}}]


# Notification callbacks -------------------------------------------------------------------------

# No feature ID: callbacks for notifications, resources/subscribe and logging/setLevel from the
# client are where this client does better than the Ruby one (FEATURES.md, Appendix A, item 25).
@pytest.mark.parametrize("revision", REVISIONS)
async def test_notification_callbacks_subscriptions_and_log_level(revision):
    client, transport = await connected(revision=revision)
    updated: list[dict] = []
    changed: list[str] = []
    logs: list[dict] = []
    everything: list[dict] = []
    client.on_resource_updated(updated.append)
    client.on_list_changed(changed.append)
    client.on_log_message(logs.append)
    client.on_notification("*", everything.append)

    async def failing(params: dict) -> None:
        raise RuntimeError("a broken callback does not break the client")

    client.on_log_message(failing)
    assert await client.subscribe_resource("mem://readme") == {}
    assert await client.set_logging_level("warning") == {}
    assert (await client.call_tool("touch", {"uri": "mem://readme"})).text == "updated=True changed=True"
    await client.call_tool("log")
    assert await client.unsubscribe_resource("mem://readme") == {}
    assert (await client.call_tool("touch", {"uri": "mem://readme"})).text == "updated=False changed=True"
    await client.ping()
    # Broadcasts are delivered by tasks of their own.
    await eventually(lambda: len(everything) == 4 and len(changed) == 2 and updated and logs)
    assert updated == [{"uri": "mem://readme"}]
    assert changed == ["tools", "tools"]
    assert logs == [{"level": "error", "logger": "core", "data": {"problem": "an error"}}]
    assert [m["method"] for m in everything] == [
        "notifications/resources/updated", "notifications/tools/list_changed", "notifications/message",
        "notifications/tools/list_changed"]
    assert transport.wire.sent_of("logging/setLevel")[0]["params"] == {"level": "warning"}
    await client.close()


@pytest.mark.feature("CLI-12")
def test_the_blocking_client_answers_with_plain_functions_and_callbacks():
    transport = InProcessTransport(core_server())
    client = Client(transport)
    progress: list[float] = []
    client.on_elicitation(lambda params: {"action": "decline"})
    client.on_progress(lambda params: progress.append(params["progress"]))
    client.connect(mode="legacy")
    with client:
        elicited = json.loads(client.call_tool("ask", {"what": "elicit"}).text)
        assert elicited == {"result": {"action": "decline"}}
        assert client.call_tool("count", {"to": 2}, progress_token="t").text == "counted to 2"
        assert progress == [1, 2]
        assert client.tools()[0].name == "echo"
        token = Cancellation()
        threading.Timer(0.1, token.cancel).start()
        with pytest.raises(CancelledError):
            client.call_tool("wait_for_cancel", cancellation=token)


def test_a_callback_that_calls_its_own_blocking_client_gets_an_error_not_a_hang():
    client = Client(InProcessTransport(core_server()))
    seen: list[str] = []

    def callback(params: dict) -> None:
        try:
            client.ping()
        except RuntimeError as exc:
            seen.append(str(exc))

    client.on_progress(callback)
    client.connect(mode="legacy")
    with client:
        assert client.call_tool("count", {"to": 1}, progress_token="t").text == "counted to 1"
        assert client.ping() == {}  # from this thread it is fine
    assert len(seen) == 1 and "cannot make a blocking call on its own client" in seen[0]


@pytest.mark.feature("ELI-09")
def test_apply_defaults_fills_only_what_is_missing():
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
        "verified": {"type": "boolean", "default": True}, "nickname": {"type": "string"}}}
    given = {"name": "Ada", "verified": False}
    assert apply_defaults(schema, given) == {"name": "Ada", "age": 30, "verified": False}
    assert given == {"name": "Ada", "verified": False}  # not mutated
    assert apply_defaults(schema) == {"name": "John Doe", "age": 30, "verified": True}
    assert apply_defaults({}, {"x": 1}) == {"x": 1}


async def test_a_request_before_connect_raises_not_connected():
    client = AsyncClient(InProcessTransport(core_server()))
    for call in (client.ping(), client.tools(), client.call_tool("echo"), client.read_resource("a://b")):
        with pytest.raises(NotConnectedError):
            await call


async def test_a_silent_server_is_a_transport_error_after_the_read_timeout():
    server = core_server()

    @server.tool
    async def hang() -> str:
        await asyncio.sleep(PATIENCE)
        return "late"

    transport = InProcessTransport(server, read_timeout=0.3)
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    started = time.monotonic()
    with pytest.raises(TransportError, match="read_timeout"):
        await client.call_tool("hang")
    assert time.monotonic() - started >= 0.25  # not before its time
    assert await client.ping() == {}
    await client.close()
