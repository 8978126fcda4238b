"""``subscriptions/listen`` streams fed from every process: two daphne processes on PostgreSQL and
Redis, as in production. A list change or a resource update made through one process reaches the
listen streams held by the other, filtered by what each subscribed to. Needs PostgreSQL
(DATABASE_URL) and Redis (MCP_TEST_REDIS_PORT).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_protocol.envelope import SUBSCRIPTION_ID_KEY

from .http_cluster import call_tool, cluster, new_session, redis_client, require_services
from .listen_support import ListenStream
from .waiting import PATIENCE

REDIS_DB = 15
REVISION = "2026-07-28"
UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/tools/list_changed"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker):
    require_services()
    with cluster(2, redis_db=REDIS_DB, mcp_settings={"LISTEN_KEEPALIVE_INTERVAL": None}) as servers:
        yield servers


@pytest.fixture
def urls(pair, transactional_db):
    return pair[0].url, pair[1].url


def stamped(method: str, subscription_id: Any, **params: Any) -> dict:
    return {"jsonrpc": "2.0", "method": method,
            "params": {**params, "_meta": {SUBSCRIPTION_ID_KEY: subscription_id}}}


@pytest.mark.feature("LSN-04", "NOTIF-01", "HTTP-32")
def test_a_listen_stream_hears_of_changes_made_through_the_other_process_and_nothing_else(urls):
    a, b = urls
    on_a = ListenStream(a, "on-a", {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]})
    # A witness on b subscribed to another URI: its update is sent, and it reaches b's stream.
    on_b = ListenStream(b, 7, {"resourceSubscriptions": ["demo://other"]})
    try:
        assert (on_a.status, on_b.status) == (200, 200)
        assert on_a.next() == stamped(ACKNOWLEDGED, "on-a", notifications={
            "toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]})
        assert on_b.next() == stamped(ACKNOWLEDGED, 7, notifications={"resourceSubscriptions": ["demo://other"]})

        # Changes made by tools called over a handshake-era session on process b.
        client = new_session(b)
        call_tool(client, b, "touch_resource", {"uri": "demo://other"})
        assert on_b.next() == stamped(UPDATED, 7, uri="demo://other")
        call_tool(client, b, "touch_resource", {"uri": "demo://readme"})
        assert on_a.next() == stamped(UPDATED, "on-a", uri="demo://readme")
        assert call_tool(client, b, "define_extra_tool", {"name": "listened_for"}) == "defined listened_for"
        assert on_a.next() == stamped(LIST_CHANGED, "on-a")
        # The update of demo://other reached process a too (its witness on b heard it, so it was
        # sent): the next thing on a's stream is the change sent after it, so it was filtered out.
        call_tool(client, a, "touch_resource", {"uri": "demo://other"})
        assert on_b.next() == stamped(UPDATED, 7, uri="demo://other")  # (made through a this time)
        call_tool(client, b, "touch_resource", {"uri": "demo://readme"})
        assert on_a.next() == stamped(UPDATED, "on-a", uri="demo://readme")
        # The witness never saw what it did not ask for either.
        call_tool(client, b, "touch_resource", {"uri": "demo://other"})
        assert on_b.next() == stamped(UPDATED, 7, uri="demo://other")
    finally:
        on_a.close()
        on_b.close()


def stored() -> tuple:
    """What the processes keep in PostgreSQL and Redis: rows per table, and Redis key names."""
    from mcp_server.models import ResourceSubscription, Session, StreamEvent

    with redis_client(REDIS_DB) as client:
        keys = sorted(client.keys("*"))
    return (Session.objects.count(), ResourceSubscription.objects.count(), StreamEvent.objects.count(),
            keys)


@pytest.mark.feature("LSN-05")
def test_listen_streams_store_nothing_and_a_duplicate_id_is_per_process(urls):
    a, b = urls
    # Each process's first request starts its part (a channel, a heartbeat): done before counting.
    for url in (a, b):
        warm = ListenStream(url, "warm", {})
        assert warm.next()["method"] == ACKNOWLEDGED
        warm.close()
    before = stored()
    first = ListenStream(a, "dup", {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]})
    try:
        assert first.next()["method"] == ACKNOWLEDGED
        # The same id on the same process: the new stream ends with nothing on it.
        again = ListenStream(a, "dup", {"toolsListChanged": True})
        assert again.status == 200 and again.messages.get(timeout=PATIENCE) is None
        # Another process keeps its own listen streams.
        elsewhere = ListenStream(b, "dup", {"toolsListChanged": True})
        assert elsewhere.next()["method"] == ACKNOWLEDGED
        elsewhere.close()
        # Nothing about them was written anywhere: a dropped stream is simply opened again.
        assert stored() == before
    finally:
        first.close()
