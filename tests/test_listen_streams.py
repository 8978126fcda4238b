"""``subscriptions/listen`` streams (SEP-2575, 2026-07-28) through the ASGI application, in process.

Each test drives the transport's ASGI application directly: a listen POST stays open while the
test reads its SSE events, and a disconnect is sent when the test says so. Every message written
is checked against the 2026-07-28 schema. The multi-process delivery is in
test_listen_multiprocess.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any

import pytest

from mcp_protocol.envelope import SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY
from mcp_server import Server, ServerContext
from mcp_server.http import StreamableHTTPTransport
from mcp_server.http.listen_filter import honour
from mcp_server.http.listen_streams import ListenSubscription

from .modern_support import modern_headers
from .waiting import PATIENCE, eventually
from .wire import check_client_message, check_error, check_server_message, validate

REVISION = "2026-07-28"
CLIENT_INFO = {"name": "listen-test", "version": "1"}
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
END = object()
_ids = itertools.count(100)


def envelope(**extra: Any) -> dict:
    return {"io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": {}, **extra}


def listen_request(notifications: Any, request_id: Any = None, *, meta: dict | None = None) -> dict:
    params: dict[str, Any] = {"_meta": envelope() if meta is None else meta}
    if notifications is not None:
        params["notifications"] = notifications
    return {"jsonrpc": "2.0", "id": next(_ids) if request_id is None else request_id,
            "method": "subscriptions/listen", "params": params}


class Exchange:
    """One POST through the ASGI application, read event by event while it is open."""

    def __init__(self, app: Any, message: Any, headers: dict | None = None, *, valid: bool = True):
        if valid:  # (a deliberately bad request is sent as it is)
            check_client_message(message, REVISION)
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.started = asyncio.Event()
        self._body = json.dumps(message).encode()
        self._gone = asyncio.Event()
        self._buffer = b""
        self._broken = False
        self.raw = b""
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
                 "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
                 "headers": [(k.encode(), v.encode()) for k, v in (headers or modern_headers(
                     message if isinstance(message, dict) else None)).items()]}
        self.task = asyncio.create_task(app(scope, self._receive, self._send))

    async def _receive(self) -> dict:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict) -> None:
        if self._broken:
            raise OSError("the client's socket is gone")
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = dict(message["headers"])
            self.started.set()
            return
        chunk = message.get("body", b"")
        self.raw += chunk
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            self.items.put_nowait(_parse_block(block.decode()))
        if not message.get("more_body", False):
            self.items.put_nowait(END)

    def disconnect(self) -> None:
        self._gone.set()

    def break_socket(self) -> None:
        """Every later write fails, as on a connection that died without the server hearing."""
        self._broken = True

    async def next(self) -> Any:
        """The next SSE item: a message (dict), a comment (str), or END."""
        return await asyncio.wait_for(self.items.get(), PATIENCE)

    async def next_message(self) -> dict:
        while True:
            item = await self.next()
            assert item is not END, "the stream ended"
            if isinstance(item, dict):
                check_server_message(item, REVISION)
                return item

    async def json(self) -> dict:
        await asyncio.wait_for(self.task, PATIENCE)
        assert self.headers[b"content-type"] == b"application/json"
        return json.loads(self.raw)

    async def rest(self) -> list[Any]:
        """Every item still written once the response is over (which must come); after a
        disconnect nothing ends the body, the application simply returns."""
        await asyncio.wait_for(self.task, PATIENCE)
        items = []
        while not self.items.empty():
            item = self.items.get_nowait()
            if item is not END:
                items.append(item)
        return items


def _parse_block(block: str) -> Any:
    if block.startswith(":"):
        return block[1:].strip()
    data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
    return json.loads(data)


def make_server(capabilities: dict | None = None) -> Server:
    server = Server("listen-server", capabilities=capabilities or {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True}})

    @server.tool
    async def touch(uri: str, server_context: ServerContext) -> str:
        """Tell whoever listens that ``uri`` changed (from a request's context)."""
        await server_context.notify_resources_updated(uri)
        return "touched"

    return server


@pytest.fixture
async def transport(short_lived_connections):
    transport = StreamableHTTPTransport(make_server(), listen_keepalive_interval=None)
    yield transport
    await transport.close()


@pytest.fixture
def short_lived_connections(transactional_db):
    """Broadcasts are stored for handshake-era GET streams, and resource updates look up the
    sessions subscribed, on worker threads: their connections close after each use."""
    from django.db import connection

    saved = connection.settings_dict.get("CONN_MAX_AGE")
    connection.settings_dict["CONN_MAX_AGE"] = 0
    yield
    connection.settings_dict["CONN_MAX_AGE"] = saved


async def open_listen(transport: StreamableHTTPTransport, notifications: dict,
                      request_id: Any = None) -> tuple[Exchange, dict]:
    exchange = Exchange(transport.as_asgi(), listen_request(notifications, request_id))
    ack = await exchange.next_message()
    return exchange, ack


async def listening(transport: StreamableHTTPTransport, count: int) -> None:
    runtime = transport._runtimes[asyncio.get_running_loop()]
    await eventually(lambda: len(runtime.listens) == count, what=f"{count} listen streams")


def unordered(messages: list[dict]) -> list[str]:
    return sorted(json.dumps(message, sort_keys=True) for message in messages)


# LSN-03, LSN-09 ---------------------------------------------------------------------------------
@pytest.mark.feature("LSN-03", "LSN-09", "HTTP-32")
async def test_the_acknowledgement_comes_first_with_the_honoured_filter_and_the_subscription_id(transport):
    exchange, ack = await open_listen(transport, {"toolsListChanged": True, "resourceSubscriptions": [
        "demo://a", "demo://a", "demo://b"], "somethingNewer": True}, request_id="listen-1")
    assert exchange.status == 200
    assert {k: exchange.headers[k] for k in (b"content-type", b"cache-control", b"connection",
                                             b"x-accel-buffering")} == {
        b"content-type": b"text/event-stream", b"cache-control": b"no-cache",
        b"connection": b"keep-alive", b"x-accel-buffering": b"no"}
    assert ack == {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["demo://a", "demo://b"]},
        "_meta": {SUBSCRIPTION_ID_KEY: "listen-1"}}}
    validate(ack, REVISION, "SubscriptionsAcknowledgedNotification")
    exchange.disconnect()
    assert await exchange.rest() == []


# LSN-02 ---------------------------------------------------------------------------------------
@pytest.mark.feature("LSN-02")
async def test_only_what_the_server_declared_is_honoured(short_lived_connections):
    server = make_server({"tools": {"listChanged": True}, "resources": {}})
    transport = StreamableHTTPTransport(server, listen_keepalive_interval=None)
    try:
        exchange, ack = await open_listen(transport, {
            "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
            "resourceSubscriptions": ["demo://a"]})
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        server.notify_prompts_list_changed()
        server.notify_resources_updated("demo://a")
        server.notify_tools_list_changed()
        assert (await exchange.next_message())["method"] == "notifications/tools/list_changed"
        exchange.disconnect()
        assert await exchange.rest() == []
    finally:
        await transport.close()
    # Flags set to false are not subscriptions either.
    assert honour({"toolsListChanged": False}, {"tools": {"listChanged": True}}).wire == {}


# LSN-04, NOTIF-01 -------------------------------------------------------------------------------
@pytest.mark.feature("LSN-04", "NOTIF-01")
async def test_each_stream_gets_only_what_it_subscribed_to_with_its_subscription_id(transport):
    server = transport.server
    tools, _ = await open_listen(transport, {"toolsListChanged": True}, request_id=1)
    resources, _ = await open_listen(transport, {"resourcesListChanged": True,
                                                 "resourceSubscriptions": ["demo://a"]}, request_id=2)
    everything, _ = await open_listen(transport, {
        "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
        "resourceSubscriptions": ["demo://a", "demo://b"]}, request_id="all")
    nothing, _ = await open_listen(transport, {}, request_id=3)
    await listening(transport, 4)

    server.notify_log_message("not for listen streams", "error")
    server.notify_resources_updated("demo://b")
    server.notify_prompts_list_changed()
    server.notify_resources_updated("demo://a")
    server.notify_resources_list_changed()
    server.notify_tools_list_changed()

    def expect(subscription_id: Any, *entries: tuple[str, dict]) -> list[dict]:
        return [{"jsonrpc": "2.0", "method": method,
                 "params": {**params, "_meta": {SUBSCRIPTION_ID_KEY: subscription_id}}}
                for method, params in entries]

    updated_a = ("notifications/resources/updated", {"uri": "demo://a"})
    updated_b = ("notifications/resources/updated", {"uri": "demo://b"})
    tools_changed = ("notifications/tools/list_changed", {})
    resources_changed = ("notifications/resources/list_changed", {})
    prompts_changed = ("notifications/prompts/list_changed", {})
    # (Each notification is sent from a task of its own: their order is not promised.)
    assert [await tools.next_message()] == expect(1, tools_changed)
    received = [await resources.next_message() for _ in range(2)]
    assert unordered(received) == unordered(expect(2, updated_a, resources_changed))
    received = [await everything.next_message() for _ in range(5)]
    assert unordered(received) == unordered(expect(
        "all", updated_b, prompts_changed, updated_a, resources_changed, tools_changed))
    for exchange in (tools, resources, everything, nothing):
        exchange.disconnect()
        assert await exchange.rest() == []  # nothing else came
    await listening(transport, 0)


@pytest.mark.feature("RES-12")
async def test_a_modern_request_context_reaches_the_listen_streams_subscribed_to_the_uri(transport):
    app = transport.as_asgi()
    mine, _ = await open_listen(transport, {"resourceSubscriptions": ["demo://mine"]})
    other, _ = await open_listen(transport, {"resourceSubscriptions": ["demo://other"],
                                             "toolsListChanged": True})
    await listening(transport, 2)
    # A modern tools/call: the session its context sees carries the envelope.
    from mcp_protocol.envelope import parse_envelope
    from mcp_server.session import ServerSession

    session = ServerSession(transport.server)
    session.envelope = parse_envelope({"_meta": envelope()})
    answer = await transport.server.handle_async({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "touch", "arguments": {"uri": "demo://mine"}, "_meta": envelope()}}, session)
    assert answer["result"]["content"][0]["text"] == "touched", answer
    message = await mine.next_message()
    assert message["method"] == "notifications/resources/updated"
    assert message["params"]["uri"] == "demo://mine"
    transport.server.notify_tools_list_changed()
    # The other stream's next message is the list change: the update never reached it.
    assert (await other.next_message())["method"] == "notifications/tools/list_changed"
    for exchange in (mine, other):
        exchange.disconnect()
        await exchange.rest()
    del app


# LSN-01 ---------------------------------------------------------------------------------------
@pytest.mark.feature("LSN-01")
@pytest.mark.parametrize("message, status, code", [
    # A notification (no id).
    ({"jsonrpc": "2.0", "method": "subscriptions/listen",
      "params": {"_meta": envelope(), "notifications": {}}}, 400, -32600),
    # No envelope.
    ({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {"notifications": {}}},
     400, -32600),
    # No filter, a filter of the wrong type, a flag or URI list of the wrong type.
    (listen_request(None, 5), 400, -32602),
    (listen_request([], 5), 400, -32602),
    (listen_request({"toolsListChanged": "yes"}, 5), 400, -32602),
    (listen_request({"resourceSubscriptions": "demo://a"}, 5), 400, -32602),
    (listen_request({"resourceSubscriptions": [1]}, 5), 400, -32602),
    # A malformed envelope, an unsupported revision.
    (listen_request({}, 5, meta={"io.modelcontextprotocol/protocolVersion": REVISION}), 400, -32602),
    (listen_request({}, 5, meta=envelope(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})),
     400, -32022),
])
async def test_a_bad_listen_request_gets_400_and_its_code(transport, message, status, code):
    # The header names the body's revision, as a client does (else it is a header mismatch).
    version = ((message["params"].get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
               or REVISION)
    exchange = Exchange(transport.as_asgi(), message,
                        modern_headers(message, **{"mcp-protocol-version": version}), valid=False)
    reply = await exchange.json()
    assert exchange.status == status
    assert reply["error"]["code"] == code
    assert reply["id"] == message.get("id")
    check_error(reply, REVISION)


# LSN-05 ---------------------------------------------------------------------------------------
@pytest.mark.feature("LSN-05")
async def test_past_the_cap_a_listen_gets_503_and_a_duplicate_id_closes_the_new_stream(
        short_lived_connections):
    transport = StreamableHTTPTransport(make_server(), max_listen_subscriptions=2,
                                        listen_keepalive_interval=None)
    try:
        first, _ = await open_listen(transport, {"toolsListChanged": True}, request_id="same")
        duplicate = Exchange(transport.as_asgi(), listen_request({"toolsListChanged": True}, "same"))
        assert await duplicate.rest() == [] and duplicate.status == 200
        second, _ = await open_listen(transport, {}, request_id=2)
        refused = Exchange(transport.as_asgi(), listen_request({}, 3))
        reply = await refused.json()
        assert refused.status == 503 and reply["error"]["code"] == -32603 and reply["id"] == 3
        check_error(reply, REVISION)
        # The first stream still works: the duplicate took nothing from it.
        transport.server.notify_tools_list_changed()
        assert (await first.next_message())["params"]["_meta"] == {SUBSCRIPTION_ID_KEY: "same"}
        # A stream that ends frees its place.
        second.disconnect()
        await second.rest()
        third, _ = await open_listen(transport, {}, request_id=3)
        for exchange in (first, third):
            exchange.disconnect()
            await exchange.rest()
    finally:
        await transport.close()
    with pytest.raises(ValueError, match="max_listen_subscriptions"):
        StreamableHTTPTransport(make_server(), max_listen_subscriptions=0)
    with pytest.raises(ValueError, match="listen_keepalive_interval"):
        StreamableHTTPTransport(make_server(), listen_keepalive_interval=-1)
    unlimited = StreamableHTTPTransport(make_server(), max_listen_subscriptions=None)
    assert unlimited.options.max_listen_subscriptions is None


# LSN-06 ---------------------------------------------------------------------------------------
@pytest.mark.feature("LSN-06")
async def test_keepalives_come_at_the_interval_and_a_failed_write_frees_the_place(short_lived_connections):
    transport = StreamableHTTPTransport(make_server(), max_listen_subscriptions=1,
                                        listen_keepalive_interval=0.05)
    try:
        exchange, _ack = await open_listen(transport, {"toolsListChanged": True})
        assert [await exchange.next(), await exchange.next()] == ["ping", "ping"]
        assert exchange.raw.endswith(b": ping\n\n")
        # The client is gone without a word (its socket fails the next write): the keepalive
        # notices, and the place is free for another stream.
        exchange.break_socket()
        await listening(transport, 0)
        await exchange.rest()
        again, _ = await open_listen(transport, {})
        again.disconnect()
        await again.rest()
    finally:
        await transport.close()
    assert StreamableHTTPTransport(make_server()).options.listen_keepalive_interval == 15


@pytest.mark.feature("LSN-06")
async def test_without_keepalives_a_quiet_stream_writes_nothing(transport):
    exchange, _ = await open_listen(transport, {"toolsListChanged": True})
    # The next thing written is the list change itself, however long the test took to send it.
    transport.server.notify_tools_list_changed()
    assert (await exchange.next())["method"] == "notifications/tools/list_changed"
    exchange.disconnect()
    assert await exchange.rest() == []


async def test_a_stream_whose_client_stopped_reading_ends_rather_than_growing():
    written = []
    MAX_QUEUED_NOTIFICATIONS = 40  # the transport's max_queued_stream_events

    class Stalled:
        closed = False

        async def event(self, data: str, **_kwargs: Any) -> bool:
            written.append(data)
            await asyncio.Event().wait()  # the client never reads
            return True

    subscription = ListenSubscription(1, honour({"toolsListChanged": True}, {"tools": {"listChanged": True}}),
                                      Stalled(), None, max_queued=MAX_QUEUED_NOTIFICATIONS)
    running = asyncio.create_task(subscription.run())
    await eventually(lambda: written, what="the acknowledgement written")
    for _ in range(MAX_QUEUED_NOTIFICATIONS + 5):
        subscription.offer({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert subscription._queue.qsize() == MAX_QUEUED_NOTIFICATIONS + 1  # and the end
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running


# LSN-07 ---------------------------------------------------------------------------------------
@pytest.mark.feature("LSN-07", "HTTP-35")
async def test_closing_the_transport_answers_every_open_listen(short_lived_connections):
    transport = StreamableHTTPTransport(make_server(), listen_keepalive_interval=None)
    first, _ = await open_listen(transport, {"toolsListChanged": True}, request_id=11)
    second, _ = await open_listen(transport, {}, request_id="b")
    await asyncio.wait_for(transport.close(), PATIENCE)
    for exchange, request_id in ((first, 11), (second, "b")):
        [response] = await exchange.rest()
        assert exchange.raw.endswith(b"\n\n") and exchange.items.empty()
        server_info = {"name": "listen-server", "version": "0.1.0"}
        assert response == {"jsonrpc": "2.0", "id": request_id, "result": {
            "resultType": "complete",
            "_meta": {SUBSCRIPTION_ID_KEY: request_id, SERVER_INFO_KEY: server_info}}}
        validate(response, REVISION, "SubscriptionsListenResultResponse")
        assert exchange.raw.endswith(b"\n\n")


@pytest.mark.feature("LSN-07")
async def test_an_abrupt_disconnect_sends_nothing(transport):
    exchange, _ = await open_listen(transport, {"toolsListChanged": True})
    exchange.disconnect()
    assert await exchange.rest() == []
    assert b'"result"' not in exchange.raw


@pytest.mark.feature("HTTP-32", "NOTIF-01")
async def test_a_stateless_transport_serves_listen_streams_and_stores_nothing(short_lived_connections):
    from mcp_server.invoke import run_in_thread
    from mcp_server.models import StreamEvent

    transport = StreamableHTTPTransport(make_server(), stateless=True, listen_keepalive_interval=None)
    server = transport.server
    try:
        exchange, ack = await open_listen(transport, {"toolsListChanged": True,
                                                      "resourceSubscriptions": ["demo://a"]})
        assert ack["params"]["notifications"]["toolsListChanged"] is True
        # A log message has no place on a listen stream: nothing is sent, and False says so.
        assert server.notify_log_message("nowhere to go", "error") is False
        assert server.notify_resources_updated("demo://a") is True
        assert server.notify_tools_list_changed() is True
        received = [await exchange.next_message() for _ in range(2)]
        assert sorted(message["method"] for message in received) == [
            "notifications/resources/updated", "notifications/tools/list_changed"]
        assert await run_in_thread(StreamEvent.objects.count) == 0
        exchange.disconnect()
        assert await exchange.rest() == []
    finally:
        await transport.close()


@pytest.mark.feature("LSN-01")
async def test_a_listen_naming_more_resources_than_a_session_may_subscribe_to_gets_400(
        short_lived_connections):
    transport = StreamableHTTPTransport(make_server(), max_subscriptions_per_session=2,
                                        listen_keepalive_interval=None)
    try:
        refused = Exchange(transport.as_asgi(), listen_request(
            {"resourceSubscriptions": ["demo://a", "demo://b", "demo://c"]}, 9))
        reply = await refused.json()
        assert refused.status == 400 and reply["error"]["code"] == -32602
        assert reply["error"]["data"] == {"limit": 2}
        check_error(reply, REVISION)
        # The same URI twice counts once.
        exchange, ack = await open_listen(transport, {"resourceSubscriptions": ["demo://a", "demo://b",
                                                                                "demo://a"]})
        assert ack["params"]["notifications"]["resourceSubscriptions"] == ["demo://a", "demo://b"]
        exchange.disconnect()
        await exchange.rest()
    finally:
        await transport.close()
