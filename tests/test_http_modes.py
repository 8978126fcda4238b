"""The options of StreamableHTTPTransport, each on a daphne process configured through MCP_SERVER.

Stateless and JSON-response modes, a server built per request, request and session limits, the
session request validator, Origin pinning and DNS-rebinding protection. One daphne process per
variant, shared by the tests of that variant; the database is the tests' (SQLite or PostgreSQL).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from django.test import Client as DjangoClient

from mcp_server import Server
from mcp_server.http import StreamableHTTPTransport
from mcp_server.models import Session

from .harness import CLIENT_INFO
from .http_support import (
    HOOKS,
    Client,
    call_asgi,
    error_of,
    in_thread,
    messages,
    post_headers,
    running,
    tool_text,
    wait_until,
)
from .wire import check_client_message, check_server_message

MIB = 1024 * 1024
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}}


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """Data the daphne process writes is committed: every test runs on a transactional database."""


def call(name: str, request_id: object = 1, **arguments: object) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


# Stateless (HTTP-18) ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stateless(django_db_setup, django_db_blocker):
    settings = {**HOOKS, "STATELESS": True, "MAX_SESSIONS": 1, "SESSION_IDLE_TIMEOUT": 1}
    with running(django_db_blocker, mcp_settings=settings) as server:
        yield server


@pytest.mark.feature("HTTP-18", "HTTP-23")
def test_stateless_issues_and_needs_no_session(stateless):
    client = Client(stateless.url)
    for _ in range(3):  # initialize as often as you like; max_sessions does not apply
        response = client.post_json(INITIALIZE)
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers
        assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    assert Session.objects.count() == 0
    exchange = client.tool("echo", {"message": "no session"})
    assert exchange.headers["content-type"] == "application/json"
    assert tool_text(exchange) == "no session"
    # A JSON reply is all a stateless server sends: Accept needs only application/json.
    assert client.post_json(call("echo", message="x"), {"accept": "application/json"}).status_code == 200


@pytest.mark.feature("HTTP-18")
def test_stateless_requests_share_no_identity(stateless):
    client = Client(stateless.url)
    first = {**INITIALIZE,
             "params": {**INITIALIZE["params"], "clientInfo": {"name": "first", "version": "1"}}}
    assert client.post_json(first).status_code == 200
    assert json.loads(tool_text(client.tool("whoami"))) == {"client_info": None, "protocol_version": None}


@pytest.mark.feature("HTTP-18", "NOTIF-04", "PROG-03")
def test_stateless_skips_request_notifications_and_refuses_requests_to_the_client(stateless):
    client = Client(stateless.url)
    exchange = client.tool("slow_count", {"count": 2, "delay": 0.01}, progressToken="p")
    assert exchange.events == [] and tool_text(exchange) == "Counted to 2"
    # Nothing is stored for listening streams a stateless server cannot have.
    assert json.loads(tool_text(client.tool("log_every_level"))) == {"session": [], "server": []}
    error = json.loads(tool_text(client.tool("ask_client", {"request": "elicit"})))["error"]
    assert "Stateless mode does not support server-to-client requests" in error["message"]


@pytest.mark.feature("HTTP-18", "HTTP-17")
def test_stateless_has_no_listening_stream_and_delete_does_nothing(stateless):
    client = Client(stateless.url)
    response = client.get()
    assert response.status_code == 405
    assert error_of(response)["code"] == -32600
    response = client.delete()
    assert (response.status_code, response.json()) == (200, {"success": True})
    assert client.tool("echo", {"message": "still here"}).status == 200


@pytest.mark.feature("HTTP-02", "HTTP-01")
def test_a_long_lived_server_is_mounted_once_in_the_projects_router(stateless):
    """Style (a): the default server, built once, at /mcp of the demo's ASGI router."""
    from mcp_server.asgi import BodyLimit, Draining, EndpointFirst
    from project.asgi import application

    http = application.application_mapping["http"]
    assert isinstance(http, Draining)  # the health check, and the drain on SIGTERM
    # /mcp itself straight to the endpoint; the router has it too (under a root_path, say).
    assert isinstance(http.app, EndpointFirst) and http.app.path == "/mcp"
    assert isinstance(http.app.endpoint, BodyLimit)
    route = http.app.router.routes[0]
    assert route.pattern.match("mcp") and not route.pattern.match("mcpx")
    assert isinstance(route.callback, Draining) and route.callback.app is http.app.endpoint
    assert Client(stateless.url).tool("echo", {"message": "mounted"}).status == 200


# A server built for each request (HTTP-02, style b) -------------------------------------------------
@pytest.fixture(scope="module")
def per_request(django_db_setup, django_db_blocker):
    with running(django_db_blocker, application="tests.http_apps:application") as server:
        yield server


@pytest.mark.feature("HTTP-02")
def test_a_server_built_for_each_request(per_request):
    admin = Client(per_request.url, headers={"x-tenant": "admin"})
    bob = Client(per_request.url, headers={"x-tenant": "bob"})
    response = admin.post_json(INITIALIZE)
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "tenant-admin"
    tools = {name: {t["name"] for t in c.request("tools/list").response["result"]["tools"]}
             for name, c in (("admin", admin), ("bob", bob))}
    assert tools == {"admin": {"whose", "audit"}, "bob": {"whose"}}
    assert tool_text(bob.tool("whose")) == "the server of bob"
    assert tool_text(admin.tool("whose")) == "the server of admin"
    assert bob.tool("audit").response["error"]["code"] == -32602  # bob's server has no such tool


@pytest.mark.feature("HTTP-02")
async def test_a_stateless_transport_starts_no_background_work():
    """A transport built per request leaves nothing running behind it (no runtime, no channel)."""
    server = Server("per-request")
    transport = StreamableHTTPTransport(server, stateless=True)
    reply = await call_asgi(transport.as_asgi(), "POST", post_headers(), [json.dumps(INITIALIZE).encode()])
    assert reply.start["status"] == 200
    assert transport._runtimes == {}


@pytest.mark.feature("HTTP-02")
@pytest.mark.urls("tests.mcp_view")
@pytest.mark.parametrize("view", ["/view/mcp", "/sync-view/mcp"])
def test_a_django_view_serves_a_server_built_for_its_request_with_handle_request(view):
    """``transport.handle_request(request)`` in an ``async def`` view (its ASGI scope) and in a
    plain ``def`` one (a scope built from its META): status, headers and body."""
    client = DjangoClient(headers={"x-tenant": "admin", "accept": "application/json, text/event-stream",
                                   "mcp-protocol-version": "2025-11-25"})
    check_client_message(INITIALIZE, "2025-11-25")
    opened = client.post(view, INITIALIZE, content_type="application/json")
    assert opened.status_code == 200, opened.content
    assert "mcp-session-id" not in opened.headers  # stateless: nothing to come back to
    answer = reply_of(opened)
    check_server_message(answer, "2025-11-25", "initialize")
    assert answer["result"]["serverInfo"]["name"] == "tenant-admin"
    listed = reply_of(client.post(view, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                  content_type="application/json"))
    check_server_message(listed, "2025-11-25", "tools/list")
    assert {tool["name"] for tool in listed["result"]["tools"]} == {"whose", "audit"}
    called = client.post(view, call("whose", 3), content_type="application/json", headers={"x-tenant": "bob"})
    assert reply_of(called)["result"]["content"][0]["text"] == "the server of bob"
    refused = client.post(view, b"{", content_type="application/json")
    assert refused.status_code == 400 and json.loads(refused.content)["error"]["code"] == -32700


def reply_of(response) -> dict:
    """The one JSON-RPC message of a response, sent as JSON or as one SSE event."""
    if response["content-type"].startswith("application/json"):
        return json.loads(response.content)
    data = [line[5:].strip() for line in response.content.decode().splitlines() if line.startswith("data:")]
    return json.loads([chunk for chunk in data if chunk][-1])


# JSON-response mode (HTTP-19) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def json_mode(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings={**HOOKS, "ENABLE_JSON_RESPONSE": True}) as server:
        yield server


@pytest.mark.feature("HTTP-19", "HTTP-03")
def test_json_mode_answers_each_post_with_one_json_object(json_mode):
    client = Client(json_mode.url, headers={"accept": "application/json"})
    client.initialize()
    assert client.session_id
    exchange = client.tool("echo", {"message": "json"})
    assert exchange.headers["content-type"] == "application/json"
    assert tool_text(exchange) == "json"
    assert client.post_json(call("echo", message="x"), {"accept": "text/event-stream"}).status_code == 406


@pytest.mark.feature("HTTP-19", "NOTIF-04", "PROG-03")
def test_json_mode_drops_progress_and_log_and_refuses_requests_to_the_client(json_mode):
    client = Client(json_mode.url)
    client.initialize(capabilities={"elicitation": {}})
    assert client.request("logging/setLevel", {"level": "debug"}).response["result"] == {}
    exchange = client.tool("slow_count", {"count": 2, "delay": 0.01}, progressToken="p")
    assert exchange.events == [] and tool_text(exchange) == "Counted to 2"
    assert json.loads(tool_text(client.tool("log_every_level")))["session"] == []
    error = json.loads(tool_text(client.tool("ask_client", {"request": "elicit"})))["error"]
    assert "JSON response mode does not support server-to-client requests" in error["message"]


@pytest.mark.feature("HTTP-19", "NOTIF-04")
def test_json_mode_still_delivers_standalone_and_broadcast_notifications_on_get(json_mode):
    client = Client(json_mode.url)
    client.initialize()
    assert client.request("resources/subscribe", {"uri": "demo://readme"}).response["result"] == {}
    listener = client.listen()
    assert tool_text(client.tool("broadcast_list_changed")) == "sent=True"
    assert tool_text(client.tool("resource_updated", {"uri": "demo://readme"})) == "sent=True"
    assert tool_text(client.tool("finish_elicitation", {"elicitation_id": "e-9"})) == "sent=True"
    got = messages(listener, 3)
    assert sorted(m["method"] for m in got) == ["notifications/elicitation/complete",
                                                "notifications/resources/updated",
                                                "notifications/tools/list_changed"]
    listener.close()


@pytest.mark.feature("HTTP-14", "HTTP-19")
def test_json_mode_answers_a_cancelled_request_with_202(json_mode):
    client = Client(json_mode.url)
    client.initialize()
    request_id = uuid.uuid4().hex
    waiting = in_thread(client.request, "tools/call", {"name": "wait_for_cancel", "arguments": {"limit": 60}},
                        request_id=request_id)

    def cancelled():
        # Until the request is known to the server, a cancel is ignored; send it again.
        assert client.notify("notifications/cancelled", {"requestId": request_id}).status_code == 202
        return waiting.done()

    wait_until(cancelled, interval=0.1)
    exchange = waiting.result(1)
    assert (exchange.status, exchange.response) == (202, None)


# Limits: request size, session count and idle time (HTTP-05, HTTP-23) ------------------------------
@pytest.fixture(scope="module")
def limited(django_db_setup, django_db_blocker):
    settings = {"MAX_REQUEST_BYTES": 2048, "MAX_SESSIONS": 3, "SESSION_IDLE_TIMEOUT": 2}
    with running(django_db_blocker, mcp_settings=settings) as server:
        yield server


def padded(size: int) -> bytes:
    text = json.dumps(call("echo", message="x"))
    return (text + " " * (size - len(text))).encode()


@pytest.mark.feature("HTTP-05")
def test_a_body_over_max_request_bytes_gets_413(limited):
    client = Client(limited.url)
    client.initialize()
    assert client.post_raw(padded(2048)).status_code == 200
    response = client.post_raw(padded(2049))
    assert response.status_code == 413
    assert "Payload Too Large" in error_of(response)["message"]

    def chunks():  # no Content-Length: the body is sent chunked
        yield padded(2049)[:1500]
        yield padded(2049)[1500:]

    response = client.http.post(limited.url, content=chunks(), headers=client.headers())
    assert "content-length" not in response.request.headers
    assert response.status_code == 413


@pytest.mark.feature("HTTP-05")
async def test_a_declared_length_over_4_mib_is_refused_without_reading_the_body():
    transport = StreamableHTTPTransport(Server("limits"), stateless=True)
    app = transport.as_asgi()
    assert transport.options.max_request_bytes == 4 * MIB
    reads: list = []
    reply = await call_asgi(app, "POST", post_headers(**{"content-length": str(4 * MIB + 1)}),
                            [b"{" * 1024], reads=reads)
    assert reply.start["status"] == 413 and reads == []
    # Chunked: read until the cap is passed, and no further.
    reads = []
    reply = await call_asgi(app, "POST", post_headers(), [b" " * MIB] * 6, reads=reads)
    assert reply.start["status"] == 413 and len(reads) == 5
    initialize = json.dumps(INITIALIZE).encode()
    exactly = initialize + b" " * (4 * MIB - len(initialize))
    reply = await call_asgi(app, "POST", post_headers(), [exactly[:MIB], exactly[MIB:]])
    assert reply.start["status"] == 200


@pytest.mark.feature("HTTP-23")
def test_max_sessions_refuses_new_sessions_with_503(limited):
    clients = [Client(limited.url) for _ in range(3)]
    for client in clients:
        client.initialize()
    response = Client(limited.url).post_json(INITIALIZE)
    assert response.status_code == 503
    assert "mcp-session-id" not in response.headers
    assert "too many sessions" in error_of(response)["message"]
    # Open sessions go on; an ended one frees its place.
    assert clients[0].request("ping").response["result"] == {}
    assert clients[0].delete().status_code == 200
    Client(limited.url).initialize()


@pytest.mark.feature("HTTP-23", "HTTP-11")
def test_idle_sessions_expire_and_activity_keeps_a_session(limited):
    idle, busy, listening = Client(limited.url), Client(limited.url), Client(limited.url)
    before_last_use = time.monotonic()
    for client in (idle, busy, listening):
        client.initialize()

    # The background reaper removes the idle session with no request asking for it, while a
    # request, or opening the listening stream, is activity that keeps the other two.
    def reaped_while_the_others_are_used() -> bool:
        assert busy.request("ping").response["result"] == {}
        listening.listen().close()
        return not Session.objects.filter(pk=idle.session_id).exists()

    wait_until(reaped_while_the_others_are_used, interval=0.2)
    assert time.monotonic() - before_last_use >= 2 - 0.2  # not before its time
    response = idle.post_json({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert response.status_code == 404
    assert error_of(response) == {"code": -32600, "message": "Session not found"}
    assert busy.request("ping").response["result"] == {}
    assert listening.request("ping").response["result"] == {}


@pytest.mark.feature("HTTP-23")
def test_at_the_cap_expired_sessions_are_reclaimed_first(limited):
    for _ in range(3):
        Client(limited.url).initialize()
    assert Client(limited.url).post_json(INITIALIZE).status_code == 503
    late = Client(limited.url)
    wait_until(lambda: late.post_json(INITIALIZE).status_code == 200, interval=0.5)


# Validator, Origin pinning, allowed hosts and origins, internal failures ----------------------------
@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return tmp_path_factory.mktemp("reports") / "reports.jsonl"


@pytest.fixture(scope="module")
def guarded(django_db_setup, django_db_blocker, reports):
    settings = {
        "SESSION_REQUEST_VALIDATOR": "tests.http_hooks.validate",
        "EXCEPTION_REPORTER": "tests.http_hooks.report",
        "ALLOWED_HOSTS": ["only.example:9000", "mcp.example.com"],
        "ALLOWED_ORIGINS": ["https://app.example", "https://other.example"],
        "SERVER_TO_CLIENT_REQUEST_TIMEOUT": 0.5,
    }
    with running(django_db_blocker, mcp_settings=settings, env={"MCP_TEST_REPORTS": str(reports)}) as server:
        yield server


@pytest.mark.feature("HTTP-20", "CAN-06")
def test_the_session_request_validator_guards_every_verb(guarded):
    deny = {"x-test-validator": "deny"}
    opener = Client(guarded.url, headers=deny)
    opener.initialize()  # initialize is not validated: there is no session yet
    client = Client(guarded.url)
    client.session_id, client.revision = opener.session_id, opener.revision
    replies = [
        client.post_json({"jsonrpc": "2.0", "id": 1, "method": "ping"}, deny),
        client.post_json({"jsonrpc": "2.0", "method": "notifications/initialized"}, deny),
        client.post_json({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 1}}, deny),
        client.post_json({"jsonrpc": "2.0", "id": "s2c-1", "result": {}}, deny),
        client.get(deny),
        client.http.delete(guarded.url, headers=client.headers(deny)),
    ]
    for response in replies:
        assert response.status_code == 403, response.text
        assert error_of(response) == {
            "code": -32600, "message": "Forbidden: the session request validator refused this request"}
    assert client.request("ping").response["result"] == {}
    assert client.delete().status_code == 200


@pytest.mark.feature("HTTP-34")
def test_an_internal_failure_gets_500_and_is_reported(guarded, reports):
    client = Client(guarded.url)
    client.initialize()
    response = client.post_json({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                {"x-test-validator": "explode"})
    assert response.status_code == 500
    assert error_of(response) == {"code": -32603, "message": "Internal server error"}
    assert "exploded" not in response.text
    reported = wait_until(lambda: reports.exists() and reports.read_text().splitlines())
    assert json.loads(reported[-1]) == {"error": "RuntimeError: the validator exploded",
                                        "context": {"request": "POST /mcp"}}
    assert client.request("ping").response["result"] == {}


@pytest.mark.feature("HTTP-21")
def test_the_origin_that_opened_a_session_is_pinned(guarded):
    client = Client(guarded.url, headers={"origin": "https://app.example"})
    client.initialize()
    assert client.request("ping").response["result"] == {}
    response = client.post_json({"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                {"origin": "https://other.example"})
    assert response.status_code == 403
    assert "Origin differs" in error_of(response)["message"]
    assert client.get({"origin": "https://other.example"}).status_code == 403
    # Without an Origin (a non-browser client) the pin does not apply.
    headers = client.headers()
    del headers["origin"]
    ping = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert client.http.post(guarded.url, headers=headers, content=ping).status_code == 200
    # A session opened without an Origin has no pin.
    plain = Client(guarded.url)
    plain.initialize()
    assert plain.post_json({"jsonrpc": "2.0", "id": 4, "method": "ping"},
                           {"origin": "https://other.example"}).status_code == 200


@pytest.mark.feature("HTTP-24")
def test_the_server_to_client_timeout_setting(guarded):
    client = Client(guarded.url)
    client.initialize(capabilities={"elicitation": {}})
    started = time.monotonic()
    error = json.loads(tool_text(client.tool("ask_client", {"request": "elicit"})))["error"]
    assert error["code"] == -32001 and "0.5 s" in error["message"]  # the setting, not the default
    assert time.monotonic() - started >= 0.45  # and not before its time


def status_with(server, **headers: str) -> int:
    return Client(server.url, headers=headers).post_json(INITIALIZE).status_code


@pytest.mark.feature("HTTP-22")
def test_allowed_hosts_and_origins_options(guarded):
    assert status_with(guarded, host="only.example:9000") == 200
    assert status_with(guarded, host="only.example:9001") == 403
    assert status_with(guarded, host="mcp.example.com:8443") == 200
    assert status_with(guarded, host=f"127.0.0.1:{guarded.port}") == 200
    assert status_with(guarded, host="evil.example") == 403
    assert status_with(guarded, origin="https://app.example") == 200
    assert status_with(guarded, origin="https://evil.example") == 403


@pytest.fixture(scope="module")
def django_hosts(django_db_setup, django_db_blocker):
    env = {"DJANGO_ALLOWED_HOSTS": "mcp.example.com,.corp.example"}
    with running(django_db_blocker, env=env) as server:
        yield server


@pytest.mark.feature("HTTP-22")
def test_dns_rebinding_protection_defaults_to_djangos_allowed_hosts(django_hosts):
    port = django_hosts.port
    for host in ("mcp.example.com", "MCP.example.com:8000", "api.corp.example:8000",
                 f"localhost:{port}", "127.0.0.1", f"[::1]:{port}"):
        assert status_with(django_hosts, host=host) == 200, host
    for host in ("evil.example", "mcp.example.com.evil.example", "corp.example.evil"):
        response = Client(django_hosts.url, headers={"host": host}).post_json(INITIALIZE)
        assert response.status_code == 403, host
        assert error_of(response)["message"] == "Invalid Host header"


@pytest.mark.feature("HTTP-22")
def test_an_origin_must_be_the_same_origin(django_hosts):
    same = [("mcp.example.com", "http://mcp.example.com"), ("mcp.example.com", "http://mcp.example.com:80"),
            ("mcp.example.com:80", "http://mcp.example.com"), ("mcp.example.com", "HTTP://MCP.Example.COM"),
            (f"127.0.0.1:{django_hosts.port}", f"http://127.0.0.1:{django_hosts.port}")]
    for host, origin in same:
        assert status_with(django_hosts, host=host, origin=origin) == 200, (host, origin)
    other = [("mcp.example.com", "http://evil.example"), ("mcp.example.com", "https://mcp.example.com"),
             ("mcp.example.com", "http://mcp.example.com:8080"), ("mcp.example.com", "null"),
             (f"127.0.0.1:{django_hosts.port}", f"http://localhost:{django_hosts.port}")]
    for host, origin in other:
        response = Client(django_hosts.url, headers={"host": host, "origin": origin}).post_json(INITIALIZE)
        assert response.status_code == 403, (host, origin)
        assert error_of(response)["message"] == "Invalid Origin header"


@pytest.fixture(scope="module")
def unprotected(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings={"DNS_REBINDING_PROTECTION": False}) as server:
        yield server


@pytest.mark.feature("HTTP-22")
def test_dns_rebinding_protection_can_be_turned_off(unprotected):
    assert status_with(unprotected, host="evil.example", origin="http://attacker.example") == 200


@pytest.mark.feature("HTTP-05", "HTTP-22", "HTTP-23")
def test_transport_defaults():
    from django.conf import settings

    transport = StreamableHTTPTransport(Server("defaults"))
    options = transport.options
    assert (options.stateless, options.enable_json_response, options.dns_rebinding_protection) == (
        False, False, True)
    assert (options.session_idle_timeout, options.max_sessions, options.max_request_bytes) == (
        1800, 10_000, 4 * MIB)
    assert (options.max_json_depth, options.server_to_client_request_timeout) == (64, 600)
    assert transport.allowed_hosts == list(settings.ALLOWED_HOSTS) and options.allowed_origins == []
    assert options.session_request_validator is None
