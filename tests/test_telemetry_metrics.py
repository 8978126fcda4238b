"""Metrics (docs/metrics.md): the MCP conventions' histograms on both sides, and the project's own
gauges and counters, read from the OpenTelemetry SDK's in-memory reader.

The global meter provider can be set once per process: :func:`metric_reader` sets it on first use
and every test reads the same cumulative data, so each test tells its own points apart by what
only it records (a server name, a tool name, a count taken before and after).

Every message on the wire goes through the client's schema checks (``CheckedHTTPTransport``).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import subprocess
import sys
import uuid

import httpx
import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from mcp_client import AsyncClient
from mcp_client.errors import ServerError
from mcp_server import Server, ServerContext, StdioTransport
from mcp_server.auth import AuthenticationFailed
from mcp_server.auth.resource_server import ResourceServer
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import Session
from mcp_server.site import observe_operations
from mcp_server.telemetry import metrics

from .client_support import CheckedHTTPTransport
from .harness import CLIENT_INFO
from .http_support import post_headers
from .modern_support import MODERN, modern_headers, modern_request, sse_messages
from .test_tasks import build_server as tasks_server
from .waiting import wait_until
from .wire import check_client_message, check_server_message

pytestmark = pytest.mark.django_db(transaction=True)

BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
REVISION = "2025-11-25"
_reader = None


def metric_reader():
    """The in-memory reader of this process's meter provider (set here, once)."""
    global _reader
    if _reader is None:
        from opentelemetry import metrics as api
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        api.set_meter_provider(provider)
        assert api.get_meter_provider() is provider, "another meter provider was set first in this process"
        _reader = reader
    return _reader


@pytest.fixture
def reader(short_lived_connections):
    observe_operations()  # the observer follows the TELEMETRY setting of this test
    yield metric_reader()
    observe_operations()


def collected(reader) -> dict[str, list]:
    """Every metric collected now, by name: ``(metric, data points)``."""
    found: dict[str, list] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).append((metric, list(metric.data.data_points)))
    return found


def points(reader, name: str, **attributes) -> list:
    """The data points of ``name`` whose attributes include ``attributes``."""
    return [point for _metric, found in collected(reader).get(name, []) for point in found
            if all(point.attributes.get(key) == value for key, value in attributes.items())]


def count_of(reader, name: str, **attributes) -> float:
    """The summed count (histogram) or value (sum) of ``name``'s points with ``attributes``."""
    return sum(getattr(point, "count", None) if hasattr(point, "bucket_counts") else point.value
               for point in points(reader, name, **attributes))


def build_server(name: str) -> Server:
    server = Server(name)

    @server.tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool
    async def broken() -> str:
        """Fails: the client gets isError."""
        raise RuntimeError("broken on purpose")

    @server.tool
    async def wait(server_context: ServerContext) -> str:
        """Waits until the request is cancelled."""
        while not server_context.cancelled():
            await asyncio.sleep(0.01)
        return "stopped"

    @server.tool(background=True)
    async def crunch(n: int, server_context: ServerContext) -> int:
        """Runs in the background."""
        return n * 2

    return server


def client_of(transport: StreamableHTTPTransport) -> AsyncClient:
    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi()))

    return AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory),
                       mode="legacy")


@pytest.fixture
async def served():
    transports: list[StreamableHTTPTransport] = []

    def serve(name: str | None = None, **options) -> StreamableHTTPTransport:
        transports.append(StreamableHTTPTransport(build_server(name or f"metrics-{uuid.uuid4().hex[:8]}"),
                                                  **options))
        return transports[-1]

    yield serve
    for transport in transports:
        await transport.close()


# The conventions' histograms ------------------------------------------------------------------
async def test_operation_and_session_durations_on_both_sides(reader, served):
    transport = served()
    client = client_of(transport)
    await client.connect()
    assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0]["text"] == "5"
    assert (await client.call_tool("broken", {})).is_error
    with pytest.raises(ServerError):
        await client.call_tool("no_such_tool", {})
    session_id = client.transport.session_id
    await client.close()

    found = collected(reader)
    for name in (metrics.OPERATION_DURATION, metrics.SESSION_DURATION, "mcp.client.operation.duration",
                 "mcp.client.session.duration"):
        metric, _points = found[name][0]
        assert metric.unit == "s", name
        assert all(list(point.explicit_bounds) == BUCKETS for _m, pts in found[name] for point in pts), name

    added = points(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "add"})
    assert len(added) == 1 and added[0].count == 1
    assert dict(added[0].attributes) == {
        "mcp.method.name": "tools/call", "mcp.protocol.version": REVISION,
        "gen_ai.tool.name": "add", "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp", "network.protocol.name": "http"}
    broken = points(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "broken"})
    assert broken[0].attributes["error.type"] == "tool_error"
    # A name the server does not have is no attribute (a client cannot add series), its code is.
    unknown = points(reader, metrics.OPERATION_DURATION, **{"error.type": "-32602"})
    assert unknown and all("gen_ai.tool.name" not in point.attributes for point in unknown)
    assert all(point.attributes["rpc.response.status_code"] == "-32602" for point in unknown)
    for _metric, found_points in found[metrics.OPERATION_DURATION]:
        for point in found_points:
            assert "mcp.session.id" not in point.attributes
            assert session_id not in json.dumps(dict(point.attributes))

    client_call = points(reader, "mcp.client.operation.duration", **{"gen_ai.tool.name": "add"})
    assert client_call[0].attributes["server.address"] == "127.0.0.1"
    assert client_call[0].attributes["mcp.protocol.version"] == REVISION
    assert points(reader, "mcp.client.operation.duration", **{"error.type": "-32602"})
    assert points(reader, "mcp.client.session.duration", **{"server.port": 80})
    assert points(reader, metrics.SESSION_DURATION, **{"mcp.protocol.version": REVISION})


async def test_a_client_with_telemetry_off_records_no_metrics(reader, served):
    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi()))

    transport = served()
    def client_counts() -> tuple[float, float]:
        return (count_of(reader, "mcp.client.operation.duration"),
                count_of(reader, "mcp.client.session.duration"))

    before = client_counts()
    client = AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory),
                         mode="legacy", telemetry=False)
    await client.connect()
    assert (await client.call_tool("add", {"a": 1, "b": 1})).content[0]["text"] == "2"
    await client.close()
    assert client_counts() == before
    assert count_of(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "add"}) >= 1  # the server's


async def test_a_session_ended_by_delete_is_recorded_once(reader, served):
    transport = served()
    before = count_of(reader, metrics.SESSION_DURATION)
    client = client_of(transport)
    await client.connect()
    await client.close()
    assert count_of(reader, metrics.SESSION_DURATION) == before + 1


async def test_a_reaped_session_is_recorded(reader, served):
    transport = served(session_idle_timeout=60)
    client = client_of(transport)
    await client.connect()
    session_id = client.transport.session_id
    before = count_of(reader, metrics.SESSION_DURATION)
    # Idle for an hour: its activity written an hour ago, its shared-state entry lapsed.
    await transport.sessions.flush_activity()
    await run_in_thread(lambda: Session.objects.filter(pk=session_id).update(
        last_activity=timezone.now() - datetime.timedelta(hours=1)))
    await transport.sessions.state.delete(f"session:{session_id}")
    assert session_id in await transport.reap()
    assert count_of(reader, metrics.SESSION_DURATION) == before + 1
    client.transport.session_id = None  # nothing left to DELETE
    await client.close()


async def test_a_cancelled_request_is_recorded_as_cancelled(reader):
    server = build_server(f"cancel-{uuid.uuid4().hex[:8]}")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": REVISION, "capabilities": {}, "clientInfo": CLIENT_INFO}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wait", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
    ]
    for message in messages:
        check_client_message(message, REVISION)
    check_server_message(await server.handle_async(messages[0]), REVISION)
    await server.handle_async(messages[1])
    before = count_of(reader, metrics.OPERATION_DURATION, **{"error.type": "cancelled"})
    call = asyncio.ensure_future(server.handle_async(messages[2]))
    async with asyncio.timeout(10):  # the call is in flight before its cancel arrives
        while 2 not in server.session.in_flight:
            await asyncio.sleep(0.01)
    await server.handle_async(messages[3])
    assert await asyncio.wait_for(call, 10) is None  # a cancelled request gets no response
    assert count_of(reader, metrics.OPERATION_DURATION, **{
        "error.type": "cancelled", "gen_ai.tool.name": "wait"}) == before + 1


async def test_no_meter_provider_configured_skips_the_measurement(reader, monkeypatch):
    """While the process's meter provider is the API's proxy or a no-op one, a request's duration
    is not measured (its attributes are not even made); with an SDK's provider it is again."""
    from opentelemetry import metrics as api

    server = build_server(f"unconfigured-{uuid.uuid4().hex[:8]}")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": REVISION, "capabilities": {}, "clientInfo": CLIENT_INFO}}
    check_server_message(await server.handle_async(initialize), REVISION)
    await server.handle_async({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    before = count_of(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "add"})
    configured = api.get_meter_provider()
    for unconfigured in (api.NoOpMeterProvider(), api._internal._ProxyMeterProvider()):
        monkeypatch.setattr(api, "get_meter_provider", lambda unconfigured=unconfigured: unconfigured)
        check_server_message(await server.handle_async(call), REVISION, "tools/call")
    assert count_of(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "add"}) == before
    monkeypatch.setattr(api, "get_meter_provider", lambda: configured)
    check_server_message(await server.handle_async(call), REVISION, "tools/call")
    assert count_of(reader, metrics.OPERATION_DURATION, **{"gen_ai.tool.name": "add"}) == before + 1


def test_a_stdio_session_is_recorded_with_a_pipe(reader):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": REVISION, "capabilities": {}, "clientInfo": CLIENT_INFO}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    ]
    for message in messages:
        check_client_message(message, REVISION)
    before = count_of(reader, metrics.SESSION_DURATION, **{"network.transport": "pipe"})
    calls = count_of(reader, metrics.OPERATION_DURATION,
                     **{"network.transport": "pipe", "gen_ai.tool.name": "add"})
    stdout = io.BytesIO()
    StdioTransport(build_server("stdio-metrics"), stdin=io.BytesIO(
        b"".join(json.dumps(message).encode() + b"\n" for message in messages)), stdout=stdout).open()
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, REVISION)
    assert answers[-1]["result"]["content"][0]["text"] == "3"
    assert count_of(reader, metrics.SESSION_DURATION, **{"network.transport": "pipe",
                                                          "mcp.protocol.version": REVISION}) == before + 1
    assert count_of(reader, metrics.OPERATION_DURATION,
                    **{"network.transport": "pipe", "gen_ai.tool.name": "add"}) == calls + 1


# Gauges -----------------------------------------------------------------------------------------
class OpenStream:
    """A streaming request through the ASGI application (a GET stream, a listen POST), open until
    :meth:`close`."""

    def __init__(self, app, headers: dict, revision: str, *, method: str = "GET", body: bytes = b""):
        self.revision = revision
        self.received = b""
        self.started = asyncio.Event()
        self.gone = asyncio.Event()
        self.body = body
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
                 "headers": [(key.encode(), value.encode()) for key, value in headers.items()],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
        self.task = asyncio.ensure_future(app(scope, self.receive, self.send))
        self.sent_request = False

    async def receive(self) -> dict:
        if not self.sent_request:
            self.sent_request = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
            self.started.set()
        elif message["type"] == "http.response.body":
            self.received += message.get("body", b"")

    async def close(self) -> None:
        """Disconnect; what the stream carried is checked against its revision's schema."""
        self.gone.set()
        await asyncio.wait_for(self.task, 10)
        for sent in sse_messages(self.received.decode()):
            check_server_message(sent, self.revision)


def gauge(reader, name: str) -> float:
    return sum(point.value for point in points(reader, name))


async def test_open_streams_and_live_sessions_go_up_and_down(reader, served):
    transport = served()
    client = client_of(transport)
    await client.connect()
    await client.list_tools()
    base = {name: gauge(reader, name) for name in (metrics.GET_STREAMS, metrics.SESSIONS)}
    stream = OpenStream(transport.as_asgi(), {
        "host": "127.0.0.1", "accept": "text/event-stream", "mcp-session-id": client.transport.session_id,
        "mcp-protocol-version": REVISION}, REVISION)
    await asyncio.wait_for(stream.started.wait(), 10)
    assert gauge(reader, metrics.GET_STREAMS) == base[metrics.GET_STREAMS] + 1
    assert gauge(reader, metrics.SESSIONS) == base[metrics.SESSIONS] + 1
    await stream.close()
    assert gauge(reader, metrics.GET_STREAMS) == base[metrics.GET_STREAMS]
    assert gauge(reader, metrics.SESSIONS) == base[metrics.SESSIONS]
    await client.close()


async def test_open_listen_streams_go_up_and_down(reader, served):
    transport = served()
    base = gauge(reader, metrics.LISTEN_STREAMS)
    request = modern_request("subscriptions/listen", "listen-1", notifications={"toolsListChanged": True})
    check_client_message(request, MODERN)
    stream = OpenStream(transport.as_asgi(), modern_headers(request), MODERN, method="POST",
                        body=json.dumps(request).encode())
    await asyncio.wait_for(stream.started.wait(), 10)
    assert gauge(reader, metrics.LISTEN_STREAMS) == base + 1
    await stream.close()
    assert gauge(reader, metrics.LISTEN_STREAMS) == base


# Counters ---------------------------------------------------------------------------------------
async def test_a_session_refused_at_the_principal_limit_is_counted(reader, served):
    transport = served(max_sessions_per_principal=1)
    before = count_of(reader, metrics.REFUSALS, **{"mcp.limit": "sessions_per_principal"})
    sessions_before = count_of(reader, metrics.SESSION_DURATION)
    first = client_of(transport)
    await first.connect()
    second = client_of(transport)
    with pytest.raises(Exception, match="sessions are open for this client"):
        await second.connect()
    assert count_of(reader, metrics.REFUSALS, **{"mcp.limit": "sessions_per_principal",
                                                 "http.response.status_code": 429}) == before + 1
    # The refused session was never one: no duration for it.
    assert count_of(reader, metrics.SESSION_DURATION) == sessions_before
    await first.close()


class RejectingAuthentication:
    """Refuses a bearer token ``bad``; anything else is no credential."""

    def authenticate(self, request):
        if request.header("authorization") == "Bearer bad":
            raise AuthenticationFailed("invalid_token")
        return None

    def authenticate_header(self, request):
        return "Bearer"


async def test_authentication_failures_are_counted_by_reason(reader, served):
    transport = served(resource_server=ResourceServer([RejectingAuthentication()], required=True))
    app = transport.as_asgi()
    before = {reason: count_of(reader, metrics.AUTH_FAILURES, **{"error.type": reason})
              for reason in ("invalid_token", "missing_credential")}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": REVISION, "capabilities": {}, "clientInfo": CLIENT_INFO}}
    check_client_message(initialize, REVISION)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        for headers in ({}, {"authorization": "Bearer bad"}):
            answer = await http.post("http://127.0.0.1/mcp", json=initialize, headers=post_headers(**headers))
            assert answer.status_code == 401, answer.text
            check_server_message(answer.json(), REVISION)
    for reason in before:
        assert count_of(reader, metrics.AUTH_FAILURES, **{"error.type": reason}) == before[reason] + 1


async def test_background_calls_queue_wait_and_run_time(reader, served):
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALLS": "local", "REDIS_URL": ""},
                           CELERY_BROKER_URL=""):
        transport = served()
        client = client_of(transport)
        await client.connect()
        assert (await client.call_tool("crunch", {"n": 21})).content[0]["text"] == "42"
        await client.close()
    waits = points(reader, metrics.QUEUE_WAIT, **{"gen_ai.tool.name": "crunch"})
    runs = points(reader, metrics.RUN_TIME, **{"gen_ai.tool.name": "crunch",
                                                 "mcp.background_call.state": "completed"})
    assert waits and waits[0].count >= 1 and list(waits[0].explicit_bounds) == BUCKETS
    assert runs and runs[0].count >= 1


async def test_task_status_changes_are_counted(reader):
    transport = StreamableHTTPTransport(tasks_server())
    before = count_of(reader, metrics.TASK_CHANGES, **{"mcp.task.status": "completed"})

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi()))

    client = AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory))
    await client.connect(mode="modern")
    assert (await client.call_tool("wait_a_little")).text == "waited"  # driven as a task
    await client.close()
    await transport.close()
    assert count_of(reader, metrics.TASK_CHANGES, **{"mcp.task.status": "completed"}) == before + 1


# Off ---------------------------------------------------------------------------------------------
async def test_off_records_nothing(reader, served):
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "TELEMETRY": "off"}):
        assert not metrics.enabled()
        transport = served()
        client = client_of(transport)
        before = count_of(reader, metrics.OPERATION_DURATION)
        await client.connect()
        await client.call_tool("add", {"a": 1, "b": 1})
        await client.close()
        assert count_of(reader, metrics.OPERATION_DURATION) == before


OFF_CHILD = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import tests.settings as test_settings
test_settings.MCP_SERVER = {**test_settings.MCP_SERVER, "TELEMETRY": "off"}
import django
django.setup()
from mcp_server import Server
from mcp_server.site import install
from mcp_server.telemetry import metrics
install()
server = Server("off")

def ok() -> str:
    \"\"\"OK.\"\"\"
    return "ok"

server.tool(ok)
server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
reply = server.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "ok", "arguments": {}}})
assert reply["result"]["content"][0]["text"] == "ok", reply
metrics.refused("sessions", 503)
metrics.auth_failed("invalid_token")
metrics.task_changed("completed")
metrics.background_call_ran("ok", "completed", 0.1)
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""


def test_off_imports_no_opentelemetry():
    """With TELEMETRY off, serving and every recording call leave OpenTelemetry unimported."""
    done = subprocess.run([sys.executable, "-c", OFF_CHILD], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


CLIENT_CHILD = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
from mcp_client import metrics
assert not metrics.api_installed()
started = metrics.now()
metrics.operation(started, "tools/list", None, None, "2025-11-25", {"result": {}})
metrics.session(started, None, "2025-11-25")
print(started, sorted(name for name in sys.modules if name.startswith("opentelemetry.")))
"""


def test_client_without_the_api_imports_and_records_nothing():
    done = subprocess.run([sys.executable, "-c", CLIENT_CHILD], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None []", done.stdout


def test_the_gauges_count_only_live_runtimes(reader):
    """A runtime that is gone (its loop ended) leaves the gauges: they hold it weakly."""
    class Runtime:
        streams = {("s1", "get"): object(), ("s2", "get"): object()}
        listens: dict = {}
        in_flight = {("s2", "r1"): object(), ("s3", "r2"): object(), ("call", "c1"): object()}

    before = {name: gauge(reader, name) for name in (metrics.GET_STREAMS, metrics.SESSIONS)}
    runtime = Runtime()
    metrics.watch_runtime(runtime)
    assert gauge(reader, metrics.GET_STREAMS) == before[metrics.GET_STREAMS] + 2
    assert gauge(reader, metrics.SESSIONS) == before[metrics.SESSIONS] + 3
    del runtime
    wait_until(lambda: gauge(reader, metrics.GET_STREAMS) == before[metrics.GET_STREAMS])
