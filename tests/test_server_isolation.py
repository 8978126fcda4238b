"""Isolation between servers: two MCP servers on one channel layer never see each other's
broadcasts, and a second transport for a server does not take over the first one's.

In process on the in-memory channel layer (each transport's runtime joins its server's group, with
a recording stand-in for a listening stream), then with two daphne processes on one Redis.
"""

from __future__ import annotations

import asyncio
import gc

import pytest
from channels.layers import get_channel_layer

from mcp_server import Server
from mcp_server.http import StreamableHTTPTransport
from mcp_server.http.event_store import GET_STREAM
from mcp_server.http.runtime import runtime_group

from .http_cluster import REDIS_HOST, REDIS_PORT, redis_client, require_services
from .http_harness import DaphneServer
from .http_support import HOOKS, Client, messages, tool_text

TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
REDIS_DB = 11


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """Broadcasts are stored (on worker threads, and by other processes) before they are sent."""


class RecordedStream:
    """Stands in for a listening stream: records what the runtime writes on it."""

    def __init__(self, streams: dict, key: tuple[str, str]) -> None:
        self.methods: list[str] = []
        self.arrived = asyncio.Event()
        self._streams, self._key = streams, key
        streams[key] = self

    def push(self, sequence: int, message: dict, level: str = "") -> None:
        self.methods.append(message["method"])
        self.arrived.set()

    def close(self) -> None:
        self._streams.pop(self._key, None)

    async def wait_for(self, method: str) -> list[str]:
        async with asyncio.timeout(30):
            while method not in self.methods:
                self.arrived.clear()
                await self.arrived.wait()
        return self.methods


async def listening(transport: StreamableHTTPTransport, session_id: str) -> RecordedStream:
    runtime = await transport.ensure_runtime()
    return RecordedStream(runtime.streams, (session_id, GET_STREAM))


def test_each_server_has_its_own_group():
    layer = get_channel_layer()
    groups = {runtime_group("shop"), runtime_group("blog"), runtime_group("shop", "shop-internal"),
              runtime_group("a b"), runtime_group("a_b"), runtime_group("ünïcode server " * 20)}
    assert len(groups) == 6
    for group in groups:
        assert layer.require_valid_group_name(group)
    assert StreamableHTTPTransport(Server("shop")).group == runtime_group("shop")
    assert StreamableHTTPTransport(Server("shop"), group="other").group == runtime_group("shop", "other")


async def test_two_servers_on_one_channel_layer_never_see_each_others_broadcasts():
    shop, blog = Server("shop"), Server("blog")
    shop_transport, blog_transport = StreamableHTTPTransport(shop), StreamableHTTPTransport(blog)
    try:
        shop_stream = await listening(shop_transport, "shop-session")
        blog_stream = await listening(blog_transport, "blog-session")
        assert shop.notify_tools_list_changed() is True
        assert await shop_stream.wait_for(TOOLS_CHANGED) == [TOOLS_CHANGED]
        # The blog's runtime reads its channel in order: had the shop's broadcast reached it, it
        # would come before the blog's own.
        assert blog.notify_prompts_list_changed() is True
        assert await blog_stream.wait_for(PROMPTS_CHANGED) == [PROMPTS_CHANGED]
        # And the other way round: the shop's next broadcast arrives after the blog's, had it leaked.
        assert shop.notify_resources_list_changed() is True
        assert await shop_stream.wait_for(RESOURCES_CHANGED) == [TOOLS_CHANGED, RESOURCES_CHANGED]
    finally:
        await shop_transport.close()
        await blog_transport.close()


async def test_a_second_transport_does_not_take_over_the_first():
    server = Server("shop")
    first = StreamableHTTPTransport(server)
    second = StreamableHTTPTransport(server, enable_json_response=True)
    assert server.transports == [first, second]
    try:
        first_stream = await listening(first, "session-on-first")
        second_stream = await listening(second, "session-on-second")
        assert server.notify_tools_list_changed() is True
        assert server.notify_prompts_list_changed() is True
        # Each stream gets each notification exactly once (the prompts one follows the tools one).
        assert await first_stream.wait_for(PROMPTS_CHANGED) == [TOOLS_CHANGED, PROMPTS_CHANGED]
        assert await second_stream.wait_for(PROMPTS_CHANGED) == [TOOLS_CHANGED, PROMPTS_CHANGED]
    finally:
        await first.close()
        await second.close()


async def test_transports_of_one_server_in_their_own_groups_each_broadcast():
    server = Server("shop")
    first, second = StreamableHTTPTransport(server), StreamableHTTPTransport(server, group="shop-admin")
    try:
        first_stream = await listening(first, "session-on-first")
        second_stream = await listening(second, "session-on-second")
        assert server.notify_tools_list_changed() is True
        assert server.notify_prompts_list_changed() is True
        assert await first_stream.wait_for(PROMPTS_CHANGED) == [TOOLS_CHANGED, PROMPTS_CHANGED]
        assert await second_stream.wait_for(PROMPTS_CHANGED) == [TOOLS_CHANGED, PROMPTS_CHANGED]
    finally:
        await first.close()
        await second.close()


def test_a_transport_nobody_serves_is_forgotten():
    server = Server("shop")
    kept = StreamableHTTPTransport(server)
    StreamableHTTPTransport(server)  # built and dropped
    gc.collect()
    assert server.transports == [kept]
    assert server.transport is kept


# Two daphne processes, two servers, one Redis channel layer ---------------------------------------
def test_two_servers_on_one_redis_never_see_each_others_broadcasts(django_db_blocker):
    require_services()
    with redis_client(REDIS_DB) as redis:
        redis.flushdb()
    env = {"REDIS_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"}
    with django_db_blocker.unblock():
        shop = DaphneServer(mcp_settings={**HOOKS, "NAME": "shop"}, env=env, wait=False)
        blog = DaphneServer(mcp_settings={**HOOKS, "NAME": "blog"}, env=env, wait=False)
    try:
        shop.wait_until_listening()
        blog.wait_until_listening()
        shop_client, blog_client = Client(shop.url), Client(blog.url)
        shop_client.initialize()
        blog_client.initialize()
        shop_listener, blog_listener = shop_client.listen(), blog_client.listen()
        assert shop_listener.status == 200 and blog_listener.status == 200
        assert tool_text(shop_client.tool("broadcast_list_changed", {"kind": "tools"})) == "sent=True"
        assert [m["method"] for m in messages(shop_listener, 1, timeout=30)] == [TOOLS_CHANGED]
        assert tool_text(blog_client.tool("broadcast_list_changed", {"kind": "prompts"})) == "sent=True"
        # In order on the blog's stream: the shop's broadcast, had it leaked, would come first.
        assert [m["method"] for m in messages(blog_listener, 1, timeout=30)] == [PROMPTS_CHANGED]
        assert tool_text(shop_client.tool("broadcast_list_changed", {"kind": "resources"})) == "sent=True"
        assert [m["method"] for m in messages(shop_listener, 1, timeout=30)] == [RESOURCES_CHANGED]
        shop_listener.close()
        blog_listener.close()
    finally:
        shop.stop()
        blog.stop()


@pytest.mark.parametrize("store", ["database", "redis"])
async def test_a_resumed_stream_replays_the_broadcasts_of_its_own_server_only(store):
    from django.utils import timezone

    from mcp_server.http.event_store import DatabaseEventStore, RedisEventStore
    from mcp_server.models import Session

    if store == "redis":
        require_services()
        with redis_client(REDIS_DB) as redis:
            redis.flushdb()
    stores = {"database": DatabaseEventStore, "redis": lambda: RedisEventStore(
        f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}", retention=3600)}
    shop = StreamableHTTPTransport(Server("shop"), event_store=stores[store]())
    blog = StreamableHTTPTransport(Server("blog"), event_store=stores[store]())
    for session_id in ("shop-session", "blog-session"):
        await Session.objects.acreate(id=session_id, protocol_version="2025-11-25",
                                      last_activity=timezone.now())
    try:
        await shop.broadcast_async({"jsonrpc": "2.0", "method": TOOLS_CHANGED})
        await blog.broadcast_async({"jsonrpc": "2.0", "method": PROMPTS_CHANGED})

        async def replayed(transport: StreamableHTTPTransport, session_id: str) -> list[str]:
            events = await transport.events.replay(session_id, GET_STREAM, 0,
                                                   broadcasts=transport.broadcast_stream)
            return [message["method"] for _sequence, message, _level in events]

        assert await replayed(shop, "shop-session") == [TOOLS_CHANGED]
        assert await replayed(blog, "blog-session") == [PROMPTS_CHANGED]
    finally:
        await shop.close()
        await blog.close()


# Two servers on one database ----------------------------------------------------------------------
async def test_servers_sharing_a_database_see_only_their_own_sessions_and_subscriptions():
    import datetime

    from asgiref.sync import sync_to_async
    from django.utils import timezone

    from mcp_server.http.resource_subscriptions import SubscriptionStore
    from mcp_server.http.session_store import SessionRecord, SessionStore
    from mcp_server.http.shared_state import LocalState
    from mcp_server.models import Session

    state = LocalState()  # one shared state too, as two servers on one Redis would have
    shop = SessionStore(state, 60, runtime_group("shop"))
    blog = SessionStore(state, 60, runtime_group("blog"))
    shop_record = SessionRecord.new(protocol_version="2025-11-25", principal="address:1")
    blog_record = SessionRecord.new(protocol_version="2025-11-25", principal="address:1")
    # (the principal's sessions, the server's sessions), counted with the insert
    assert await shop.create(shop_record, count_principal=True, count_sessions=True) == (1, 1)
    # The principal's sessions and all sessions are counted per server.
    assert await blog.create(blog_record, count_principal=True, count_sessions=True) == (1, 1)
    assert (await shop.load(shop_record.id)).id == shop_record.id
    # A session of the other server is unknown here, from the shared state and from the database.
    assert await shop.load(blog_record.id) is None
    await state.delete(SessionStore._key(blog_record.id))
    assert await shop.load(blog_record.id) is None
    assert (await blog.load(blog_record.id)).id == blog_record.id
    assert await shop.count() == 1

    uri = "file:///shared.txt"
    shop_subscriptions, blog_subscriptions = (SubscriptionStore(None, runtime_group("shop")),
                                              SubscriptionStore(None, runtime_group("blog")))
    await shop_subscriptions.add(shop_record.id, uri)
    await blog_subscriptions.add(blog_record.id, uri)
    assert await shop_subscriptions.sessions_for(uri) == [shop_record.id]
    assert await blog_subscriptions.sessions_for(uri) == [blog_record.id]

    # Each server reaps its own idle sessions only (the other may keep its sessions longer).
    await shop.flush_activity()
    await blog.flush_activity()  # written now, so that what follows stays the last word
    long_ago = timezone.now() - datetime.timedelta(hours=1)
    await sync_to_async(Session.objects.update)(last_activity=long_ago)
    for record in (shop_record, blog_record):
        await state.delete(SessionStore._key(record.id))
    assert await shop.reap() == [shop_record.id]
    remaining = await sync_to_async(lambda: list(Session.objects.values_list("pk", flat=True)))()
    assert remaining == [blog_record.id]
