"""The 2026-07-28 request path over Streamable HTTP, in process (the ASGI application of a
transport called directly). Every message is checked against the 2026-07-28 schema."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from mcp_server import Configuration, Server, ServerContext
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import Session

from .http_support import call_asgi, post_headers
from .modern_support import MODERN, Reply, envelope, modern_headers, modern_request, post
from .waiting import eventually

pytestmark = pytest.mark.asyncio

REGION_SCHEMA = {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "limit": {"type": "integer", "x-mcp-header": "Limit"},
    "query": {"type": "string"}}, "required": ["query"]}


def build_server(**options) -> tuple[Server, dict]:
    state: dict = {"seen": [], "instrumented": [], "release": asyncio.Event()}
    configuration = Configuration(instrumentation_callback=state["instrumented"].append)
    server = Server("modern", version="2.0", instructions="Use echo.", configuration=configuration,
                    **options)

    @server.tool
    async def echo(message: str) -> str:
        """Say it back."""
        return message

    @server.tool
    async def who(server_context: ServerContext) -> str:
        """What the request says about its client."""
        state["seen"].append({
            "is_modern": server_context.is_modern, "client_info": server_context.client_info,
            "capabilities": server_context.client_capabilities,
            "version": server_context.protocol_version})
        return "seen"

    @server.tool
    async def chatty(server_context: ServerContext) -> str:
        """Logs at four levels."""
        for level in ("debug", "info", "warning", "error"):
            await server_context.notify_log_message({"at": level}, level=level)
        return "logged"

    @server.tool
    async def slow(server_context: ServerContext) -> str:
        """Reports progress, then waits for the test."""
        await server_context.report_progress(1, 2, "half")
        await state["release"].wait()
        await server_context.report_progress(2, 2)
        return "done"

    @server.tool
    async def until_cancelled(server_context: ServerContext) -> str:
        """Runs until its request is cancelled."""
        state["started"] = True
        while not server_context.cancelled():
            await asyncio.sleep(0.01)  # the tool's own polling, not a test wait
        server_context.raise_if_cancelled()
        return "never"

    @server.tool
    async def needs_form(server_context: ServerContext) -> str:
        """Needs the form elicitation capability."""
        server_context.require_client_capability("elicitation", "form")
        return "has form"

    @server.tool
    async def asks(server_context: ServerContext) -> str:
        """Asks the client directly, which the modern era does not allow."""
        await server_context.create_sampling_message(
            [{"role": "user", "content": {"type": "text", "text": "2+2"}}], 10)
        return "asked"

    server.define_tool(name="query", description="Runs a query in a region.",
                       input_schema=REGION_SCHEMA)(lambda arguments: arguments["query"])

    @server.resource("test://cached", name="cached")
    def cached() -> dict:
        return {"contents": [{"uri": "test://cached", "text": "x"}], "ttlMs": 5000}

    @server.prompt
    def hello() -> str:
        """Hello."""
        return "hello"

    return server, state


@pytest.fixture
async def served(short_lived_connections):
    server, state = build_server()
    transport = StreamableHTTPTransport(server)
    yield transport.as_asgi(), server, state
    await transport.close()  # its background work ends with the test


@pytest.fixture
async def app_of(short_lived_connections):
    """The ASGI application of a transport over ``server``, closed after the test."""
    transports = []

    def build(server: Server, **options) -> object:
        transports.append(StreamableHTTPTransport(server, **options))
        return transports[-1].as_asgi()

    yield build
    for transport in transports:
        await transport.close()


@pytest.fixture
def short_lived_connections(transactional_db):
    from django.db import connection

    saved = connection.settings_dict.get("CONN_MAX_AGE")
    connection.settings_dict["CONN_MAX_AGE"] = 0
    yield
    connection.settings_dict["CONN_MAX_AGE"] = saved


def call(name: str, request_id=1, meta=None, **arguments) -> dict:
    return modern_request("tools/call", request_id, meta=meta, name=name, arguments=arguments)


def text_of(reply: Reply) -> str:
    return reply.result["content"][0]["text"]


# MOD-01, MOD-02, HTTP-10, HTTP-12 --------------------------------------------------------------
@pytest.mark.feature("MOD-01", "MOD-02", "HTTP-10")
async def test_discover_is_answered_without_a_session_and_keeps_nothing(served):
    app, _, _ = served
    reply = await post(app, modern_request("server/discover", "d1"))
    assert reply.status == 200 and reply.content_type == "application/json"
    assert reply.raw.header(b"mcp-session-id") is None
    result = reply.result
    assert result["supportedVersions"] == [MODERN]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "modern", "version": "2.0"}
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (0, "private", "complete")
    assert result["instructions"] == "Use echo."
    assert await run_in_thread(Session.objects.count) == 0


@pytest.mark.feature("MOD-02", "HTTP-10", "HTTP-12")
async def test_discover_on_the_handshake_path_needs_no_session_and_no_envelope(served):
    app, _, _ = served
    message = {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}}
    # HTTP-12: the MCP-Protocol-Version header of a handshake revision is ignored on discover.
    for headers in (post_headers(), post_headers(**{"mcp-protocol-version": "2024-11-05"}),
                    post_headers(**{"mcp-protocol-version": "1999-01-01"})):
        raw = await call_asgi(app, "POST", headers, [json.dumps(message).encode()])
        reply = Reply(raw, "server/discover")
        assert reply.status == 200 and reply.result["supportedVersions"] == [MODERN]
        assert raw.header(b"mcp-session-id") is None
    assert await run_in_thread(Session.objects.count) == 0
    # Any other method without a session id still needs one.
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}).encode()])
    assert raw.start["status"] == 400 and b"Missing session ID" in raw.body


# MOD-04, MOD-08, MOD-09, CFG-05, EXT-02 ---------------------------------------------------------
@pytest.mark.feature("MOD-08", "MOD-09", "MOD-14", "EXT-02")
async def test_a_modern_call_reads_its_client_from_the_envelope_and_is_stamped(served):
    app, _, state = served
    capabilities = {"extensions": {"io.example/thing": {}}}
    reply = await post(app, call("who", 1, meta=envelope(capabilities)))
    assert reply.status == 200 and reply.result["resultType"] == "complete"
    reply = await post(app, call("who", 2, meta=envelope(client_info=None)))
    assert reply.status == 200
    assert state["seen"] == [
        {"is_modern": True, "client_info": {"name": "modern-test", "version": "1.0"},
         "capabilities": capabilities, "version": MODERN},
        {"is_modern": True, "client_info": None, "capabilities": {}, "version": MODERN},
    ]
    # A handshake-era session on the same endpoint at the same time gets no resultType (MOD-08).
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(init).encode()])
    session_id = raw.header(b"mcp-session-id").decode()
    legacy = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "who", "arguments": {}}}
    raw = await call_asgi(app, "POST", post_headers(session_id, **{"mcp-protocol-version": "2025-11-25"}),
                          [json.dumps(legacy).encode()])
    assert b'"resultType"' not in raw.body and b'"seen"' in raw.body
    assert state["seen"][-1]["is_modern"] is False
    assert state["seen"][-1]["client_info"] == {"name": "old", "version": "1"}


@pytest.mark.feature("CFG-05")
async def test_modern_requests_are_instrumented(served):
    app, _, state = served
    await post(app, call("echo", 7, message="hi"))
    await post(app, modern_request("ping", 8))
    data = [d for d in state["instrumented"] if d["method"] in ("tools/call", "unsupported_method")]
    assert data[0]["tool_name"] == "echo" and data[0]["tool_arguments"] == {"message": "hi"}
    assert data[0]["client"] == {"name": "modern-test", "version": "1.0"} and data[0]["duration"] >= 0
    assert data[1]["method"] == "unsupported_method"


# CACHE-03, CACHE-04 ------------------------------------------------------------------------------
@pytest.mark.feature("CACHE-03", "CACHE-04")
async def test_the_five_cacheable_results_always_carry_cache_hints(served):
    app, _, _ = served
    for method, params in (("tools/list", {}), ("prompts/list", {}), ("resources/list", {}),
                           ("resources/templates/list", {})):
        reply = await post(app, modern_request(method, 1, **params))
        assert (reply.result["ttlMs"], reply.result["cacheScope"]) == (0, "private"), method
        assert reply.result["resultType"] == "complete"
    reply = await post(app, modern_request("resources/read", 2, uri="test://cached"))
    assert (reply.result["ttlMs"], reply.result["cacheScope"]) == (5000, "private")
    reply = await post(app, call("echo", 3, message="x"))
    assert "ttlMs" not in reply.result


@pytest.mark.feature("CACHE-03")
async def test_configured_cache_hints_are_used(app_of):
    server, _ = build_server(ttl_ms=60000, cache_scope="public")
    app = app_of(server)
    reply = await post(app, modern_request("tools/list"))
    assert (reply.result["ttlMs"], reply.result["cacheScope"]) == (60000, "public")
    reply = await post(app, modern_request("server/discover"))
    assert (reply.result["ttlMs"], reply.result["cacheScope"]) == (60000, "public")


# MOD-07, PING-04, HTTP-29 ------------------------------------------------------------------------
@pytest.mark.feature("MOD-07", "PING-04", "HTTP-29")
async def test_removed_and_unknown_methods_get_404_with_method_not_found(served):
    app, _, _ = served
    for number, method in enumerate(("initialize", "ping", "logging/setLevel", "resources/subscribe",
                                     "resources/unsubscribe", "unknown/method")):
        reply = await post(app, modern_request(method, number, uri="test://cached", level="info"))
        assert reply.status == 404, method
        assert reply.error["code"] == -32601 and reply.response["id"] == number


# MOD-05, MOD-06, HTTP-27, HTTP-28, HTTP-29 ------------------------------------------------------
async def assert_served_next(app) -> None:
    reply = await post(app, call("echo", 99, message="still here"))
    assert reply.status == 200 and text_of(reply) == "still here"


@pytest.mark.feature("MOD-05", "HTTP-29")
async def test_a_malformed_envelope_gets_400_with_invalid_params(served):
    app, _, _ = served
    bad = [{}, {"io.modelcontextprotocol/clientCapabilities": {}},
           {"io.modelcontextprotocol/protocolVersion": MODERN},
           {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": []},
           {**envelope(), "io.modelcontextprotocol/clientInfo": "me"}]
    for number, meta in enumerate(bad):
        reply = await post(app, modern_request("server/discover", number, meta=meta))
        assert (reply.status, reply.error["code"], reply.response["id"]) == (400, -32602, number), meta
        await assert_served_next(app)
    message = modern_request("server/discover", 9)
    del message["params"]["_meta"]
    reply = await post(app, message)
    assert (reply.status, reply.error["code"]) == (400, -32602)


@pytest.mark.feature("MOD-06", "HTTP-26", "HTTP-27")
async def test_an_unknown_modern_version_gets_400_with_the_supported_versions(served):
    app, _, _ = served
    message = modern_request("server/discover", 5, meta=envelope(version="2099-01-01"))
    reply = await post(app, message, {"mcp-protocol-version": "2099-01-01"})
    assert (reply.status, reply.error["code"]) == (400, -32022)
    assert reply.error["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    assert reply.response["id"] == 5
    await assert_served_next(app)
    # The header says 2026-07-28 and the envelope another revision: a header mismatch.
    reply = await post(app, modern_request("server/discover", 6, meta=envelope(version="2099-01-01")))
    assert (reply.status, reply.error["code"]) == (400, -32020)


@pytest.mark.feature("HTTP-27", "HTTP-29")
async def test_batches_responses_and_other_verbs_on_the_modern_path(served):
    app, _, _ = served
    batch = [modern_request("tools/list", 1), modern_request("tools/list", 2)]
    reply = await post(app, batch, {"mcp-method": "tools/list"})
    assert (reply.status, reply.error["code"]) == (400, -32600)
    await assert_served_next(app)
    reply = await post(app, None, raw=b"{not json", headers={"mcp-method": "tools/list"})
    assert (reply.status, reply.error["code"]) == (400, -32700)
    await assert_served_next(app)
    reply = await post(app, {"jsonrpc": "2.0", "id": 4, "result": {}})
    assert (reply.status, reply.error["code"]) == (400, -32600)
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    reply = await post(app, note)
    assert reply.status == 202 and not reply.messages
    for verb in ("GET", "DELETE"):
        raw = await call_asgi(app, verb, modern_headers())
        assert raw.start["status"] == 405 and raw.header(b"allow") == b"POST"


@pytest.mark.feature("HTTP-28")
async def test_standard_headers_are_required_and_must_match_the_body(served):
    app, _, _ = served
    message = call("echo", 1, message="hi")
    cases = [{"mcp-method": None}, {"mcp-method": "tools/list"}, {"mcp-method": "TOOLS/CALL"},
             {"mcp-name": None}, {"mcp-name": "who"}, {"mcp-name": "=?base64?d2hv?="},
             {"mcp-name": "=?base64?ZWNobw?="}]
    for headers in cases:
        reply = await post(app, message, headers)
        assert (reply.status, reply.error["code"], reply.response["id"]) == (400, -32020, 1), headers
        await assert_served_next(app)
    for headers in ({"mcp-name": "  echo  "}, {"mcp-name": "=?base64?ZWNobw==?="},
                    {"mcp-method": None, "MCP-METHOD": "tools/call"}):
        reply = await post(app, message, headers)
        assert reply.status == 200 and text_of(reply) == "hi", headers
    resource = modern_request("resources/read", 2, uri="test://cached")
    assert (await post(app, resource, {"mcp-name": "test://other"})).error["code"] == -32020
    assert (await post(app, resource)).status == 200


@pytest.mark.feature("HTTP-28")
async def test_x_mcp_header_arguments_need_matching_param_headers(served):
    app, _, _ = served
    message = call("query", 1, region="us-west1", limit=42, query="select")
    good = [{"mcp-param-region": "us-west1", "mcp-param-limit": "42"},
            {"Mcp-Param-Region": "=?base64?" + base64.b64encode(b"us-west1").decode() + "?=",
             "mcp-param-limit": "42.0"}]
    for headers in good:
        reply = await post(app, message, headers)
        assert reply.status == 200 and text_of(reply) == "select", headers
    bad = [{"mcp-param-region": "us-west1"}, {"mcp-param-limit": "42"},
           {"mcp-param-region": "eu-west1", "mcp-param-limit": "42"},
           {"mcp-param-region": "us-west1", "mcp-param-limit": "41"},
           {"mcp-param-region": "=?base64?dXMtd2VzdDE?=", "mcp-param-limit": "42"},
           {"mcp-param-region": "=?base64?dXMt!!!d2VzdDE=?=", "mcp-param-limit": "42"}]
    for headers in bad:
        reply = await post(app, message, headers)
        assert (reply.status, reply.error["code"]) == (400, -32020), headers
    # An argument absent from the body needs no header (and may not have one).
    only_query = call("query", 2, query="q")
    assert (await post(app, only_query)).status == 200
    assert (await post(app, only_query, {"mcp-param-region": "x"})).error["code"] == -32020


# HTTP-31 ------------------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-31", "MOD-14")
async def test_the_envelope_on_the_handshake_path(served):
    app, _, _ = served
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(init).encode()])
    session_id = raw.header(b"mcp-session-id").decode()
    message = call("echo", 2, message="x")
    # A handshake-era session's request carrying the envelope under the modern header: era violation.
    raw = await call_asgi(app, "POST", {**modern_headers(message), "mcp-session-id": session_id},
                          [json.dumps(message).encode()])
    reply = Reply(raw, "tools/call")
    assert (reply.status, reply.error["code"]) == (400, -32600)
    # The envelope under a handshake header, or none: the header and body disagree.
    for version in ("2025-11-25", None):
        headers = {**modern_headers(message), "mcp-protocol-version": version}
        reply = await post(app, message, headers)
        assert (reply.status, reply.error["code"]) == (400, -32020), version
    # The session goes on as before.
    legacy = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo",
                                                                          "arguments": {"message": "ok"}}}
    raw = await call_asgi(app, "POST", post_headers(session_id, **{"mcp-protocol-version": "2025-11-25"}),
                          [json.dumps(legacy).encode()])
    assert raw.start["status"] == 200 and b'"ok"' in raw.body


# MOD-10, MOD-12 -----------------------------------------------------------------------------------
@pytest.mark.feature("MOD-10", "HTTP-29")
async def test_require_client_capability_gives_32021(served):
    app, _, _ = served
    reply = await post(app, call("needs_form", 1))
    assert (reply.status, reply.error["code"]) == (400, -32021)
    assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    for capabilities in ({"elicitation": {}}, {"elicitation": {"form": {}}}):
        reply = await post(app, call("needs_form", 2, meta=envelope(capabilities)))
        assert text_of(reply) == "has form", capabilities
    reply = await post(app, call("needs_form", 3, meta=envelope({"elicitation": {"url": {}}})))
    assert reply.error["code"] == -32021


@pytest.mark.feature("MOD-12")
async def test_a_modern_handler_cannot_send_requests_to_the_client(served):
    app, _, _ = served
    reply = await post(app, call("asks", 1, meta=envelope({"sampling": {}})))
    assert "SEP-2575" in reply.error["message"] and "session" not in reply.error["message"].lower()
    assert not reply.notifications


# MOD-11, LOG-06 -----------------------------------------------------------------------------------
@pytest.mark.feature("MOD-11", "LOG-06", "HTTP-30")
async def test_log_messages_follow_the_envelope_level_of_each_request(served):
    app, _, _ = served
    reply = await post(app, call("chatty", 1, meta=envelope(log_level="warning")))
    assert reply.content_type == "text/event-stream"
    assert [m["params"]["level"] for m in reply.notifications] == ["warning", "error"]
    assert reply.result["content"][0]["text"] == "logged"
    # No level: no log notifications at all, and a plain JSON response.
    for meta in (envelope(), envelope(log_level="loud")):
        reply = await post(app, call("chatty", 2, meta=meta))
        assert reply.content_type == "application/json" and not reply.notifications
    reply = await post(app, call("chatty", 3, meta=envelope(log_level="debug")))
    assert len(reply.notifications) == 4


# PROG-05, HTTP-30 ---------------------------------------------------------------------------------
def start_request(app, message: dict) -> tuple[asyncio.Future, list[dict], asyncio.Event]:
    """POST ``message`` and leave it running: the task, what the server sent so far, and an
    event that disconnects the client when set."""
    sent: list[dict] = []
    gone = asyncio.Event()
    bodies = [{"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}]

    async def receive() -> dict:
        if bodies:
            return bodies.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(event: dict) -> None:
        sent.append(event)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "scheme": "http", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in modern_headers(message).items()],
             "client": ("127.0.0.1", 5)}
    return asyncio.ensure_future(app(scope, receive, send)), sent, gone


@pytest.mark.feature("PROG-05", "HTTP-30")
async def test_progress_is_streamed_before_the_handler_finishes(served):
    app, _, state = served
    message = call("slow", 1, meta={**envelope(), "progressToken": "p1"})
    task, sent, _gone = start_request(app, message)
    # The first progress frame reaches the client while the tool is still waiting.
    await eventually(lambda: any(b"half" in e.get("body", b"") for e in sent), what="live progress")
    assert not task.done()
    state["release"].set()
    await asyncio.wait_for(task, 60)
    body = b"".join(e.get("body", b"") for e in sent).decode()
    from .modern_support import sse_messages
    from .wire import check_server_message

    frames = sse_messages(body)
    for frame in frames:
        check_server_message(frame, MODERN, "tools/call" if "method" not in frame else None)
    assert [f.get("method") for f in frames] == ["notifications/progress", "notifications/progress", None]
    assert frames[-1]["result"]["content"][0]["text"] == "done"


@pytest.mark.feature("HTTP-30")
async def test_a_disconnect_cancels_a_modern_request(served):
    app, _, state = served
    task, sent, gone = start_request(app, call("until_cancelled", 1))
    await eventually(lambda: state.get("started"), what="the tool started")
    gone.set()
    await asyncio.wait_for(task, 60)
    data = [d for d in state["instrumented"] if d.get("tool_name") == "until_cancelled"]
    assert data and data[0].get("cancelled") is True
    assert not any(e.get("body") for e in sent)  # nothing is written to a client that left


# MOD-04, CACHE-05, MOD-16 -------------------------------------------------------------------------
@pytest.mark.feature("MOD-04")
async def test_only_the_protocol_version_key_makes_a_request_modern(served):
    app, _, state = served
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(init).encode()])
    session_id = raw.header(b"mcp-session-id").decode()
    # _meta with a progress token and trace keys alone: still a handshake-era request.
    meta = {"progressToken": "t", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    legacy = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "who", "arguments": {}, "_meta": meta}}
    raw = await call_asgi(app, "POST", post_headers(session_id, **{"mcp-protocol-version": "2025-11-25"}),
                          [json.dumps(legacy).encode()])
    assert raw.start["status"] == 200 and b'"resultType"' not in raw.body
    assert state["seen"][-1]["is_modern"] is False


@pytest.mark.feature("CACHE-05", "MOD-08")
async def test_a_result_that_says_what_it_is_gets_no_stamp_and_no_cache_hints():
    from mcp_server.modern.results import stamp_response

    server, _ = build_server(ttl_ms=100)
    incomplete = {"resultType": "input_required", "inputRequests": {}}
    response = {"jsonrpc": "2.0", "id": 1, "result": incomplete}
    assert stamp_response(server, "resources/read", response) == {"jsonrpc": "2.0", "id": 1,
                                                                  "result": incomplete}
    kept = {"contents": []}
    stamped = stamp_response(server, "resources/read", {"jsonrpc": "2.0", "id": 2, "result": kept})
    assert stamped["result"] == {"contents": [], "resultType": "complete", "ttlMs": 100,
                                 "cacheScope": "private"}
    assert kept == {"contents": []}  # the handler's own object is left as it was


@pytest.mark.feature("MOD-16")
async def test_roots_sampling_and_logging_are_annotated_deprecated_and_still_work():
    from mcp_server.server import Server as ServerClass

    for api in (ServerContext.list_roots, ServerContext.create_sampling_message,
                ServerContext.notify_log_message, ServerClass.notify_log_message):
        assert "2026-07-28" in api.__deprecated__ and "SEP-2577" in api.__deprecated__
        assert ".. deprecated:: 2026-07-28" in api.__doc__
    server, _ = build_server()
    await server.handle_async({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
    answer = await server.handle_async({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                        "params": {"level": "info"}})
    assert answer["result"] == {}


@pytest.mark.feature("HTTP-30")
async def test_a_client_accepting_json_alone_gets_json_without_notifications(app_of):
    server, _ = build_server()
    app = app_of(server, enable_json_response=True)
    reply = await post(app, call("chatty", 1, meta=envelope(log_level="debug")),
                       {"accept": "application/json"})
    assert reply.status == 200 and reply.content_type == "application/json"
    assert text_of(reply) == "logged" and not reply.notifications


@pytest.mark.feature("RES-12")
async def test_a_resource_update_from_a_modern_handler_goes_to_the_subscribers(served):
    app, server, _ = served
    told: list[str] = []

    class Subscribers:
        """Stands for every transport's subscribers of the URI."""

        def notify_resource_updated(self, uri: str) -> bool:
            told.append(uri)
            return True

        def broadcast(self, message: dict, *, level: str | None = None) -> bool:
            return False

    subscribers = Subscribers()
    server.add_transport(subscribers)

    @server.tool
    async def touch(server_context: ServerContext) -> str:
        """Says test://cached changed."""
        await server_context.notify_resources_updated("test://cached")
        return "touched"

    reply = await post(app, call("touch", 1))
    assert text_of(reply) == "touched" and not reply.notifications
    assert told == ["test://cached"]


@pytest.mark.feature("HTTP-28")
async def test_x_mcp_header_annotations_are_checked_when_the_tool_is_defined():
    from mcp_server import Tool

    def define(schema: dict) -> object:
        return Tool.define(lambda arguments: "", name="t", input_schema=schema)

    nested = {"type": "object", "properties": {"outer": {"type": "object", "properties": {
        "inner": {"type": "string", "x-mcp-header": "Inner"}}}}}
    assert define(nested).input_schema.header_paths == {"inner": ("outer", "inner")}
    bad = [
        {"properties": {"a": {"type": "string", "x-mcp-header": ""}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}},
        {"properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "A"},
                        "b": {"type": "string", "x-mcp-header": "a"}}},
        {"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}},
        {"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}},
        {"$defs": {"d": {"type": "string", "x-mcp-header": "D"}},
         "properties": {"a": {"$ref": "#/$defs/d"}}},
    ]
    for schema in bad:
        with pytest.raises(ValueError, match="x-mcp-header"):
            define({"type": "object", **schema})
    # A property merely named x-mcp-header is no annotation.
    assert define({"type": "object", "properties": {"x-mcp-header": {"type": "string"}}}) \
        .input_schema.header_paths == {}


@pytest.mark.feature("MOD-02", "MOD-14")
async def test_a_modern_request_runs_no_database_query(served, monkeypatch):
    """Every query any thread runs on behalf of the modern requests is counted (a context
    variable set around them travels into the tasks and worker threads they start)."""
    import contextvars

    from django.db.backends import utils

    app, _, _ = served
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(init).encode()])
    assert raw.start["status"] == 200  # the transport is up, and its session store was used
    counting = contextvars.ContextVar("counting", default=False)
    queries: list[str] = []
    original = utils.CursorWrapper._execute_with_wrappers

    def counted(self, sql, params, many, executor):
        if counting.get():
            queries.append(sql)
        return original(self, sql, params, many, executor)

    monkeypatch.setattr(utils.CursorWrapper, "_execute_with_wrappers", counted)
    # The probe works: a handshake-era request is counted.
    token = counting.set(True)
    try:
        legacy = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        session_id = raw.header(b"mcp-session-id").decode()
        await call_asgi(app, "POST", post_headers(session_id, **{"mcp-protocol-version": "2025-11-25"}),
                        [json.dumps(legacy).encode()])
        probe = len(queries)
        for number in range(5):
            assert (await post(app, call("echo", number, message="x"))).status == 200
            assert (await post(app, modern_request("tools/list", 10 + number))).status == 200
            assert (await post(app, modern_request("server/discover", 20 + number))).status == 200
    finally:
        counting.reset(token)
    assert probe > 0 and queries[probe:] == []


@pytest.mark.feature("HTTP-26")
async def test_subscriptions_listen_is_handed_to_the_listen_streams_after_the_checks(served, monkeypatch):
    """The modern path checks the headers and envelope, then hands the request over to
    ``mcp_server.http.listen_streams.serve_listen`` (stood in for here), which writes the response."""
    import sys
    import types

    app, _, _ = served
    handed: list[tuple] = []

    async def serve_listen(consumer, request, message, envelope) -> None:
        handed.append((message["id"], envelope.protocol_version, envelope.client_info))
        await consumer.reply(200, b"", [(b"content-type", b"text/event-stream")])

    stand_in = types.ModuleType("mcp_server.http.listen_streams")
    stand_in.serve_listen = serve_listen
    monkeypatch.setitem(sys.modules, "mcp_server.http.listen_streams", stand_in)
    listen = modern_request("subscriptions/listen", 4, notifications={"toolsListChanged": True})
    reply = await post(app, listen)
    assert reply.status == 200 and handed == [(4, MODERN, {"name": "modern-test", "version": "1.0"})]
    # A bad envelope or header never reaches it.
    bad = modern_request("subscriptions/listen", 5, meta={"io.modelcontextprotocol/protocolVersion": MODERN})
    assert (await post(app, bad)).error["code"] == -32602
    assert (await post(app, listen, {"mcp-method": "tools/list"})).error["code"] == -32020
    assert len(handed) == 1
