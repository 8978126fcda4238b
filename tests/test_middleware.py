"""MCP middleware (docs/middleware.md): the chain around every request and notification, in both
eras, and the built-ins (rate limits, the request log, the per-tool timeout). The two-process
acceptance and the Celery worker are in test_middleware_cluster.py."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_protocol.envelope import parse_envelope
from mcp_protocol.errors import RATE_LIMITED, REQUEST_TIMEOUT
from mcp_server import Server, ServerContext, site
from mcp_server.auth.base import Principal
from mcp_server.checks import check_middleware
from mcp_server.http.rate_buckets import RedisBuckets
from mcp_server.http.redis_client import RedisClients
from mcp_server.middleware import (
    LoggingMiddleware,
    RateLimitMiddleware,
    RateLimits,
    TimeoutMiddleware,
)
from mcp_server.middleware.buckets import CacheBuckets
from mcp_server.modern import requests
from mcp_server.session import ServerSession
from mcp_server.settings import mcp_settings

from . import middleware_support as support
from .modern_support import MODERN, modern_request
from .waiting import wait_until
from .wire import check_client_message, check_server_message

SUPPORT = "tests.middleware_support"
BUILT_IN = "mcp_server.middleware"


def text_of(result: dict) -> str:
    return result["content"][0]["text"]


def tool_server(*middleware) -> Server:
    server = Server("middleware-test", middleware=middleware)

    @server.tool
    def echo(text: str) -> str:
        return text

    @server.tool
    def forbidden() -> str:
        return "ran"

    return server


def call(method: str, params: dict | None = None, request_id: int = 1) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    check_client_message(message, "2025-11-25")
    return message


def answer(server: Server, message: dict, session: ServerSession | None = None) -> dict:
    response = async_to_sync(server.handle_async)(message, session)
    check_server_message(response, "2025-11-25", message["method"])
    return response


def echo(text: str = "hi", request_id: int = 1) -> dict:
    return call("tools/call", {"name": "echo", "arguments": {"text": text}}, request_id)


@pytest.fixture(autouse=True)
def _clear_seen():
    support.seen.clear()


# The chain -------------------------------------------------------------------------------------
def test_middleware_runs_in_order_around_the_handler_with_what_it_needs(make_client):
    server = tool_server(support.recording("outer"), support.recording("inner"))
    client = make_client(server)
    support.seen.clear()
    assert text_of(client.result("tools/call", {"name": "echo", "arguments": {"text": "x"}})) == "x"
    order = (("outer", "in"), ("inner", "in"), ("inner", "out"), ("outer", "out"))
    assert support.seen == [(label, side, "tools/call", "handshake") for label, side in order]


def test_a_modern_request_goes_through_the_chain_as_its_era():
    server = tool_server(support.recording("only"))
    message = modern_request("tools/call", name="echo", arguments={"text": "m"})
    check_client_message(message, MODERN)
    session = requests.new_session(server, parse_envelope(message["params"]), None, listen_supported=False)
    response = async_to_sync(requests.serve)(server, message, session)
    check_server_message(response, MODERN, "tools/call")
    assert text_of(response["result"]) == "m"
    assert support.seen == [("only", "in", "tools/call", "modern"), ("only", "out", "tools/call", "modern")]


def test_middleware_refuses_with_a_json_rpc_error_before_the_handler(make_client):
    server = tool_server(f"{SUPPORT}.Refuse")
    client = make_client(server)
    error = client.request("tools/call", {"name": "forbidden", "arguments": {}})["error"]
    assert error == {"code": -32050, "message": "Forbidden by middleware"}
    assert text_of(client.result("tools/call", {"name": "echo", "arguments": {"text": "ok"}})) == "ok"


def test_middleware_changes_the_params_the_handler_gets(make_client):
    client = make_client(tool_server(support.Shout))
    assert text_of(client.result("tools/call", {"name": "echo", "arguments": {"text": "quiet"}})) == "QUIET"


def test_notifications_go_through_the_chain_and_can_be_refused(make_client):
    server = tool_server(support.recording("seen"), support.Refuse)
    changed = []
    server.roots_list_changed_handler(lambda params: changed.append(params))
    client = make_client(server)  # notifications/initialized, through the chain
    assert ("seen", "in", "notifications/initialized", "handshake") in support.seen
    assert client.notify("notifications/roots/list_changed") is None
    assert ("seen", "out", "notifications/roots/list_changed", "handshake") in support.seen
    assert changed == []  # refused: the hook never ran


def test_no_middleware_means_no_chain():
    assert tool_server().middleware_chain is None
    assert Server(middleware=[RateLimitMiddleware]).middleware_chain is None  # no limit set: not used


# Settings ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mcp_server", "fragment"), [
    ({"MIDDLEWARE": ["tests.middleware_support.Nope"]}, "cannot be imported"),
    ({"MIDDLEWARE": "tests.middleware_support.Shout"}, "must be a list"),
    ({"MIDDLEWARE": [f"{SUPPORT}.not_async"]}, "must return an async callable"),
    ({"MIDDLEWARE": [f"{BUILT_IN}.RateLimitMiddleware"], "RATE_LIMITS": {"PRINCIPAL": "5 a minute"}},
     "RATE_LIMITS']['PRINCIPAL'] must be None or 'number/period'"),
    ({"MIDDLEWARE": [f"{BUILT_IN}.TimeoutMiddleware"], "TOOL_TIMEOUTS": {"echo": -1}},
     "TOOL_TIMEOUTS']['echo'] must be a positive number"),
    ({"RATE_LIMIT_STORE": "memcached"}, "RATE_LIMIT_STORE"),
    ({"RATE_LIMIT_STORE": "redis"}, "needs REDIS_URL"),
])
def test_bad_middleware_settings_fail_the_system_check(mcp_server, fragment):
    # Set without the setting_changed signal, which would build the default server with them.
    with mock.patch.object(settings, "MCP_SERVER", mcp_server):
        mcp_settings.reload()
        try:
            errors = check_middleware()
        finally:
            mcp_settings.reload()
    assert [error.id[:-1] for error in errors] == ["mcp_server.E09"]
    assert fragment in errors[0].msg


def test_the_default_server_is_built_with_the_middleware_and_limits_of_the_settings():
    configured = {**settings.MCP_SERVER, "MIDDLEWARE": [f"{BUILT_IN}.TimeoutMiddleware", f"{SUPPORT}.Shout"],
                  "TOOL_TIMEOUT": 30, "TOOL_TIMEOUTS": {"echo": None, "slow": 2.5},
                  "RATE_LIMIT_STORE": "cache", "RATE_LIMIT_CACHE": "default"}
    with override_settings(MCP_SERVER=configured):
        server = site.get_server()
        assert server.middleware == [TimeoutMiddleware, support.Shout]
        timeouts = server.middleware_chain
        assert isinstance(timeouts, TimeoutMiddleware) and isinstance(timeouts.get_response, support.Shout)
        assert [timeouts.timeout_of(name) for name in ("echo", "slow", "other")] == [None, 2.5, 30]
        buckets = site.build_rate_buckets()
        assert isinstance(buckets, CacheBuckets) and buckets.cache is caches["default"]
    with override_settings(MCP_SERVER={**configured, "RATE_LIMIT_STORE": "auto", "REDIS_URL": "redis://127.0.0.1:1/0"}):
        assert isinstance(site.build_rate_buckets(), RedisBuckets)  # built, not connected
    with override_settings(MCP_SERVER={**configured, "RATE_LIMIT_CACHE": "elsewhere"}), \
            pytest.raises(ImproperlyConfigured, match="'elsewhere' is not an alias of CACHES"):
        site.build_rate_buckets()


def test_a_bad_import_string_is_refused_when_the_server_is_built():
    with pytest.raises(ImproperlyConfigured, match="cannot be imported"):
        Server(middleware=["tests.middleware_support.Nope"])


def test_an_unknown_rate_limits_key_is_refused():
    with override_settings(MCP_SERVER={"RATE_LIMITS": {"USER": "5/m"}}), \
            pytest.raises(ImproperlyConfigured, match="unknown MCP_SERVER\\['RATE_LIMITS'\\] settings: USER"):
        RateLimits.from_settings()


# Rate limits -------------------------------------------------------------------------------------
def limited_server(limits: dict, *outer) -> Server:
    """A server whose rate limits are ``limits``, in buckets of its own, inside ``outer``."""
    buckets = CacheBuckets(caches["default"], prefix=f"test:{id(limits)}:")
    return tool_server(*outer, lambda get_response: RateLimitMiddleware(
        get_response, limits=RateLimits.from_settings(limits), buckets=buckets))


def session_of(server: Server, subject: str, client_id: str = "client-1") -> ServerSession:
    session = ServerSession(server)
    session.act_for(Principal(client_id=client_id, claims={"sub": subject}))
    return session


def assert_rate_limited(response: dict) -> None:
    error = response["error"]
    assert error["code"] == RATE_LIMITED == -32029, error
    assert error["message"].startswith("Too Many Requests: ")
    assert isinstance(error["data"]["retryAfter"], int) and error["data"]["retryAfter"] >= 1


def test_a_tool_bucket_limits_each_principal_apart_and_other_tools_not_at_all():
    server = limited_server({"TOOLS": {"echo": "2/minute"}})
    alice, bob = session_of(server, "alice"), session_of(server, "bob")
    for request_id in (1, 2):
        assert "result" in answer(server, echo(request_id=request_id), alice)
    assert_rate_limited(answer(server, echo(request_id=3), alice))
    assert "result" in answer(server, call("tools/call", {"name": "forbidden", "arguments": {}}, 4), alice)
    assert "result" in answer(server, echo(request_id=5), bob)


def test_a_client_bucket_is_shared_by_the_principals_of_one_oauth_client():
    server = limited_server({"CLIENT_TOOLS": {"*": "2/minute"}})
    assert "result" in answer(server, echo(request_id=1), session_of(server, "alice"))
    assert "result" in answer(server, echo(request_id=2), session_of(server, "bob"))
    assert_rate_limited(answer(server, echo(request_id=3), session_of(server, "carol")))
    assert "result" in answer(server, echo(request_id=4), session_of(server, "carol", client_id="client-2"))


def test_the_principal_bucket_leaves_lifecycle_requests_alone():
    server = limited_server({"PRINCIPAL": "1/hour"})
    alice = session_of(server, "alice")
    assert "result" in answer(server, call("ping"), alice)
    assert "result" in answer(server, call("tools/list", {}, 2), alice)
    assert_rate_limited(answer(server, echo(request_id=3), alice))


def test_redis_buckets_take_from_every_bucket_or_from_none():
    from .http_cluster import REDIS_HOST, REDIS_PORT, require_services

    require_services()

    async def scenario() -> tuple[float, float, float]:
        buckets = RedisBuckets(RedisClients(f"redis://{REDIS_HOST}:{REDIS_PORT}/0"), prefix="mcp-test:rate:")
        clients = buckets.clients.get()
        await clients.execute("DEL", "mcp-test:rate:a", "mcp-test:rate:b")
        first = await buckets.take([("a", 1, 60.0), ("b", 2, 60.0)])
        refused = await buckets.take([("a", 1, 60.0), ("b", 2, 60.0)])  # a is empty: b keeps its token
        other = await buckets.take([("b", 2, 60.0)])
        await clients.execute("DEL", "mcp-test:rate:a", "mcp-test:rate:b")
        return first, refused, other

    first, refused, other = async_to_sync(scenario)()
    assert first == 0 and other == 0
    assert 0 < refused <= 60


# The request log ---------------------------------------------------------------------------------
def test_the_logging_middleware_logs_method_tool_principal_duration_and_outcome(caplog):
    server = tool_server(LoggingMiddleware, support.Refuse)
    alice = session_of(server, "alice")
    with caplog.at_level(logging.INFO, logger="mcp_server.requests"):
        answer(server, echo(), alice)
        answer(server, call("tools/call", {"name": "forbidden", "arguments": {}}, 2), alice)
    ok, refused = [r for r in caplog.records if r.name == "mcp_server.requests"]
    assert (ok.mcp_tool, ok.mcp_outcome, ok.mcp_era) == ("echo", "ok", "handshake")
    assert ok.mcp_method == "tools/call"
    assert ok.mcp_principal.startswith("token:") and ok.mcp_duration_ms >= 0
    assert ok.mcp_request_id == 1  # the dispatcher's log context is current
    assert refused.mcp_outcome == "error -32050"


# The per-tool timeout ----------------------------------------------------------------------------
def test_a_tool_past_its_timeout_is_cancelled_and_the_call_ends_with_an_error():
    server = Server("timeouts", middleware=[lambda get_response: TimeoutMiddleware(
        get_response, default=None, per_tool={"stuck": 0.2, "thread": 0.2})])
    stopped, saw_cancel = [], threading.Event()

    @server.tool
    async def stuck() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.append("cancelled")
            raise
        return "never"

    @server.tool
    def thread(server_context: ServerContext) -> str:
        # A plain tool on a worker thread: it sees cancelled() once the timeout passed.
        while not server_context.cancelled():
            if saw_cancel.wait(0.05):
                break
        saw_cancel.set()
        return "stopped"

    @server.tool
    async def quick() -> str:
        return "fine"

    for request_id, name in ((1, "stuck"), (2, "thread")):
        error = answer(server, call("tools/call", {"name": name, "arguments": {}}, request_id))["error"]
        assert error["code"] == REQUEST_TIMEOUT
        assert error["message"] == f"Tool call timed out: {name} ran longer than its timeout (0.2 s) and " \
            "was stopped"
    assert stopped == ["cancelled"]
    wait_until(saw_cancel.is_set, what="the plain tool to see its call cancelled")
    done = answer(server, call("tools/call", {"name": "quick", "arguments": {}}, 3))
    assert text_of(done["result"]) == "fine"


# Streamable HTTP, in process ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_over_http_a_refusal_before_the_stream_is_a_429_and_a_cancel_passes_through():
    from django.db import connection

    from mcp_server.http import StreamableHTTPTransport

    from .http_support import call_asgi, post_headers

    saved, connection.settings_dict["CONN_MAX_AGE"] = connection.settings_dict.get("CONN_MAX_AGE"), 0
    server = limited_server({"TOOLS": {"echo": "1/hour"}}, support.recording("seen"))
    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    try:
        init = call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "c", "version": "1"}})
        reply = await call_asgi(app, "POST", post_headers(), [json.dumps(init).encode()])
        session = reply.header(b"mcp-session-id").decode()
        headers = post_headers(session, **{"mcp-protocol-version": "2025-11-25"})
        first = await call_asgi(app, "POST", headers, [json.dumps(echo(request_id=2)).encode()])
        assert (first.start["status"], first.header(b"content-type")) == (200, b"text/event-stream")
        refused = await call_asgi(app, "POST", headers, [json.dumps(echo(request_id=3)).encode()])
        assert refused.start["status"] == 429 and refused.header(b"content-type") == b"application/json"
        answer_ = json.loads(refused.body)
        check_server_message(answer_, "2025-11-25", "tools/call")
        assert_rate_limited(answer_)
        assert int(refused.header(b"retry-after")) == answer_["error"]["data"]["retryAfter"]
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
        check_client_message(cancel, "2025-11-25")
        assert (await call_asgi(app, "POST", headers, [json.dumps(cancel).encode()])).start["status"] == 202
        assert ("seen", "out", "notifications/cancelled", "handshake") in support.seen
    finally:
        await transport.close()
        connection.settings_dict["CONN_MAX_AGE"] = saved
