"""The client's listen API: list changes and resource updates reach the same callbacks
(``on_list_changed``, ``on_resource_updated`` after ``subscribe_resource``) whether the connection
speaks the handshake era (the session's GET stream) or the 2026-07-28 lifecycle
(``subscriptions/listen``).

Against our demo under daphne: two processes on PostgreSQL and Redis (a change made through one
reaches a listen stream held by the other), one process killed and started again on its port (the
stream is opened again), and scripted fake servers for a stream that keeps dropping. Every message
in both directions is checked against the schema of its revision.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest

from mcp_client import AsyncClient, Cancellation, CancelledError, Client, ClientError, ListenError
from mcp_protocol.envelope import SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY

from .client_support import (
    WAIT,
    CheckedHTTPTransport,
    FakeHTTPServer,
    Reply,
    eventually,
    every_message_checked,
    our_stdio,
    script_stdio,
)
from .http_cluster import cluster_fixture, require_services
from .http_harness import DaphneServer
from .waiting import wait_until

REDIS_DB = 14
MODERN = "2026-07-28"
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


pair = cluster_fixture(REDIS_DB)


@pytest.fixture
def urls(pair, transactional_db):
    return pair[0].url, pair[1].url


class Heard:
    """What the application's callbacks were told, in order; the same code for either era."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def watch(self, client: Any) -> None:
        client.on_list_changed(lambda kind: self._add(("list_changed", kind)))
        client.on_resource_updated(lambda params: self._add(("updated", params)))
        client.on_subscription_error(self.errors.append)

    def _add(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def has(self, item: Any) -> bool:
        with self._lock:
            return item in self.items


def acknowledged_listens(transport: CheckedHTTPTransport) -> list[str]:
    """The ids of the listen requests the server acknowledged, in order."""
    return [message["params"]["_meta"][SUBSCRIPTION_ID_KEY] for message in transport.wire.received
            if isinstance(message, dict) and message.get("method") == ACKNOWLEDGED]


@pytest.mark.feature("CHTTP-10")
@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_the_same_callbacks_hear_list_changes_and_resource_updates_in_either_era(urls, mode):
    a, _b = urls
    get_streams: list[int] = []

    async def seen(response: httpx.Response) -> None:
        if response.request.method == "GET":
            get_streams.append(response.status_code)

    transport = CheckedHTTPTransport(a, http_client_factory=lambda: httpx.AsyncClient(
        timeout=30, event_hooks={"response": [seen]}))
    client = AsyncClient(transport)
    heard = Heard()
    heard.watch(client)
    await client.connect(mode=mode)
    assert client.is_modern == (mode == "modern")
    assert await client.subscribe_resource("demo://readme") == {}
    if mode == "modern":
        assert client.listening == {"toolsListChanged": True, "promptsListChanged": True,
                                    "resourcesListChanged": True, "resourceSubscriptions": ["demo://readme"]}
        assert not transport.wire.sent_of("resources/subscribe")
    else:
        assert client.listening is None and not transport.wire.sent_of(LISTEN)
        # The session's GET stream is open (a change is then sure to reach it).
        await eventually(lambda: get_streams == [200], what="the GET stream")
    await client.call_tool("touch_resource", {"uri": "demo://readme"})
    await eventually(lambda: heard.has(("updated", {"uri": "demo://readme"})), what="the update")
    await client.call_tool("define_extra_tool", {"name": f"extra_{mode}"})
    await eventually(lambda: heard.has(("list_changed", "tools")), what="the list change")
    # No subscription id reaches the application, and a URI not subscribed to is not heard of.
    await client.call_tool("touch_resource", {"uri": "demo://other"})
    await client.unsubscribe_resource("demo://readme")
    if mode == "modern":
        assert client.listening == {"toolsListChanged": True, "promptsListChanged": True,
                                    "resourcesListChanged": True}
    assert ("updated", {"uri": "demo://other"}) not in heard.items and heard.errors == []
    await asyncio.wait_for(client.close(), WAIT)  # the server never ends a listen stream itself
    assert client.listening is None


@pytest.mark.feature("CHTTP-10")
def test_a_change_made_through_one_process_reaches_a_blocking_listener_on_the_other(urls):
    a, b = urls
    heard = Heard()
    listener_transport = CheckedHTTPTransport(a)
    listener, actor = Client(listener_transport), Client(CheckedHTTPTransport(b))
    try:
        heard.watch(listener)
        listener.connect(mode="modern")
        listener.subscribe_resource("demo://readme")
        assert listener.listening["resourceSubscriptions"] == ["demo://readme"]
        actor.connect(mode="modern")
        assert actor.is_modern and listener.is_modern
        actor.call_tool("touch_resource", {"uri": "demo://readme"})
        wait_until(lambda: heard.has(("updated", {"uri": "demo://readme"})), what="the update from b")
        actor.call_tool("define_extra_tool", {"name": "from_b"})
        wait_until(lambda: heard.has(("list_changed", "tools")), what="the list change from b")
        # The stream opened at connect (list changes), then one naming the URI replaced it; a
        # narrower filter is one more stream, acknowledged before the old one is ended.
        assert len(acknowledged_listens(listener_transport)) == 2
        listener.unsubscribe_resource("demo://readme")
        assert len(acknowledged_listens(listener_transport)) == 3
        assert "resourceSubscriptions" not in listener.listening
    finally:
        listener.shutdown()
        actor.shutdown()
    assert heard.errors == []


@pytest.mark.feature("CHTTP-10")
async def test_a_killed_server_process_is_listened_to_again_once_it_is_back(pair, transactional_db):
    require_services()
    server = DaphneServer(env={"REDIS_URL": _redis_url()})
    transport = CheckedHTTPTransport(server.url)
    client = AsyncClient(transport, listen_max_retries=1000, listen_max_backoff=0.5)
    heard = Heard()
    heard.watch(client)
    try:
        await client.connect(mode="modern")
        first = acknowledged_listens(transport)
        assert len(first) == 1
        server.kill()  # no graceful end: the stream just drops
        port = server.port
        server = await asyncio.to_thread(DaphneServer, env={"REDIS_URL": _redis_url()}, port=port)
        await eventually(lambda: len(acknowledged_listens(transport)) == 2, what="the stream opened again")
        sent = [message["id"] for message in transport.wire.sent_of(LISTEN)]
        assert acknowledged_listens(transport)[-1] == sent[-1] != first[0]
        # A change now reaches the callbacks through the new stream.
        await client.call_tool("define_extra_tool", {"name": "after_restart"})
        await eventually(lambda: heard.has(("list_changed", "tools")), what="the list change")
        assert heard.errors == []
    finally:
        await asyncio.wait_for(client.close(), WAIT)
        server.stop()


def _redis_url() -> str:
    from .http_cluster import REDIS_HOST, REDIS_PORT

    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"


def modern_fake(listen: Any) -> Any:
    """A fake 2026-07-28 server: discover says it has tools with listChanged; ``listen(reply)``
    answers each subscriptions/listen POST."""

    def respond(reply: Reply) -> Any:
        seen = reply.seen
        if seen.rpc_method == "server/discover":
            return reply.result({"resultType": "complete", "supportedVersions": [MODERN],
                                 "capabilities": {"tools": {"listChanged": True}},
                                 "_meta": {SERVER_INFO_KEY: {"name": "fake", "version": "1"}}})
        if seen.rpc_method == LISTEN:
            return listen(reply)
        return NotImplemented

    return respond


def acknowledge(reply: Reply) -> None:
    reply.sse_open()
    reply.event({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
        "notifications": reply.seen.body["params"]["notifications"],
        "_meta": {SUBSCRIPTION_ID_KEY: reply.seen.body["id"]}}})


@pytest.mark.feature("CHTTP-10")
async def test_a_stream_that_keeps_dropping_ends_in_a_clear_error():
    with FakeHTTPServer(modern_fake(acknowledge)) as fake:  # acknowledged, then the stream ends
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False),
                             listen_max_retries=2, listen_max_backoff=0.1)
        errors: list[ListenError] = []
        client.on_subscription_error(errors.append)
        client.on_list_changed(lambda kind: None)
        await client.connect(mode="modern")
        await eventually(lambda: errors, what="the listen error")
        assert "could not be kept open" in str(errors[0]) and errors[0].attempts == 3
        assert len(fake.of(LISTEN)) == 3 and client.listening is None
        await client.close()


@pytest.mark.feature("CHTTP-10")
async def test_a_refused_listen_is_not_asked_again_and_subscribing_raises():
    def refuse(reply: Reply) -> None:
        reply.json({"jsonrpc": "2.0", "id": reply.seen.body["id"],
                    "error": {"code": -32602, "message": "Invalid params: no"}}, code=400)

    with FakeHTTPServer(modern_fake(refuse)) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False))
        errors: list[ListenError] = []
        client.on_subscription_error(errors.append)
        client.on_list_changed(lambda kind: None)
        await client.connect(mode="modern")
        await eventually(lambda: errors, what="the listen error")
        assert "Invalid params: no" in str(errors[0]) and len(fake.of(LISTEN)) == 1
        # This server declares no resources.subscribe: subscribing says so, nothing is sent.
        with pytest.raises(ClientError, match=r"no resources\.subscribe"):
            await client.subscribe_resource("demo://readme")
        assert len(fake.of(LISTEN)) == 1
        await client.close()


async def test_over_stdio_nothing_is_listened_to_where_the_server_declares_nothing_to_listen_for():
    transport = our_stdio()
    client = AsyncClient(transport)
    client.on_list_changed(lambda kind: None)
    await client.connect(mode="modern")
    try:
        # Discover over stdio declares no listChanged nor subscribe (MOD-03): no stream is opened.
        assert client.is_modern and client.listening is None
        assert "subscribe" not in client.server_capabilities.get("resources", {})
        with pytest.raises(ClientError, match=r"no resources\.subscribe"):
            await client.subscribe_resource("demo://readme")
        assert LISTEN not in json.dumps(transport.wire.sent)
    finally:
        await client.close()


# A 2026-07-28 stdio server that serves listen streams (ours answers -32601 there, LSN-08): each
# stream gets its acknowledgement, a list change, an update of each URI subscribed to, and a list
# change of a subscription that is not the client's; the tool "drop" ends the last stream from the
# server's side (notifications/cancelled, as on stdio).
LISTENING_STDIO = r"""
import json, sys

def send(message):
    print(json.dumps(message), flush=True)

def stamped(method, sid, **params):
    return {"jsonrpc": "2.0", "method": method,
            "params": {**params, "_meta": {"io.modelcontextprotocol/subscriptionId": sid}}}

last = None
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "server/discover":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "listening", "version": "1"}}}})
    elif method == "subscriptions/listen":
        last = message["id"]
        wanted = message["params"]["notifications"]
        send(stamped("notifications/subscriptions/acknowledged", last, notifications=wanted))
        send(stamped("notifications/tools/list_changed", "someone-else"))
        send(stamped("notifications/tools/list_changed", last))
        for uri in wanted.get("resourceSubscriptions", []):
            send(stamped("notifications/resources/updated", last, uri=uri))
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": last}})
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"resultType": "complete", "content": []}})
"""


async def test_over_stdio_streams_are_told_apart_by_subscription_id_and_ended_with_a_cancel():
    transport = script_stdio(LISTENING_STDIO)
    client = AsyncClient(transport, listen_max_backoff=0.1)
    heard = Heard()
    heard.watch(client)
    try:
        await client.connect(mode="modern")
        first = transport.wire.sent_of(LISTEN)[0]
        assert first["params"]["notifications"] == {"toolsListChanged": True}
        assert client.listening == {"toolsListChanged": True}
        await client.subscribe_resource("file:///a")
        second = transport.wire.sent_of(LISTEN)[1]
        assert second["params"]["notifications"] == {"toolsListChanged": True,
                                                     "resourceSubscriptions": ["file:///a"]}
        await eventually(lambda: heard.has(("updated", {"uri": "file:///a"})), what="the update")
        # The replaced stream was cancelled by its id: one channel carries every stream on stdio.
        assert [m["params"] for m in transport.wire.sent_of("notifications/cancelled")] == \
            [{"requestId": first["id"]}]
        # The server ends the stream: it is opened again, with the same filter.
        await client.call_tool("drop", {})
        await eventually(lambda: len(transport.wire.sent_of(LISTEN)) == 3, what="the stream opened again")
        assert transport.wire.sent_of(LISTEN)[2]["params"] == second["params"]
        await eventually(lambda: heard.items.count(("updated", {"uri": "file:///a"})) == 2, what="the update")
        # One list change per stream of ours; none of the subscription that is not ours.
        assert heard.items.count(("list_changed", "tools")) == 3 and heard.errors == []
    finally:
        await asyncio.wait_for(client.close(), WAIT)


async def test_subscriptions_made_at_once_all_hold_and_what_cannot_be_honoured_is_refused():
    transport = script_stdio(LISTENING_STDIO)
    client = AsyncClient(transport)
    try:
        await client.connect(mode="modern")
        assert client.listening is None and not transport.wire.sent_of(LISTEN)  # nothing wanted yet
        uris = [f"file:///{name}" for name in "abc"]
        assert await asyncio.gather(*(client.subscribe_resource(uri) for uri in uris)) == [{}, {}, {}]
        # Each replaced the one before it (an acknowledgement each time), the last names them all.
        assert client.listening == {"resourceSubscriptions": uris}
        with pytest.raises(ValueError, match="meta= cannot be sent"):
            await client.subscribe_resource("file:///d", meta={"k": "v"})
        token = Cancellation()
        token.cancel("changed my mind")
        with pytest.raises(CancelledError):
            await client.subscribe_resource("file:///e", cancellation=token)
        await client.unsubscribe_resource("file:///b")
        assert client.listening == {"resourceSubscriptions": ["file:///a", "file:///c"]}
        # Every stream but the one in use was ended, by its id.
        opened = [message["id"] for message in transport.wire.sent_of(LISTEN)]
        ended = [m["params"]["requestId"] for m in transport.wire.sent_of("notifications/cancelled")]
        assert sorted(ended) == sorted(opened[:-1])
    finally:
        await asyncio.wait_for(client.close(), WAIT)


@pytest.mark.parametrize(("option", "value"), [("listen_max_retries", -1), ("listen_max_retries", 1.5),
                                               ("listen_max_backoff", 0), ("listen_max_backoff", True)])
def test_listen_limits_must_make_sense(option, value):
    with pytest.raises(ValueError, match=option):
        AsyncClient(CheckedHTTPTransport("http://127.0.0.1:9/mcp"), **{option: value})
    with pytest.raises(ValueError, match=option):
        Client(CheckedHTTPTransport("http://127.0.0.1:9/mcp"), **{option: value})
