"""``subscriptions/listen`` streams fed from every process: two daphne processes on PostgreSQL and
Redis, as in production. A list change or a resource update made through one process reaches the
listen streams held by the other, filtered by what each subscribed to. Needs PostgreSQL
(DATABASE_URL) and Redis (MCP_TEST_REDIS_PORT).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_protocol.envelope import SUBSCRIPTION_ID_KEY

from .http_cluster import call_tool, cluster, new_session, redis_client, require_services
from .http_support import log_in
from .listen_support import ListenStream
from .modern_support import modern_headers, modern_request
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

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


# The key of a place a principal's listen stream holds (MAX_LISTEN_SUBSCRIPTIONS_PER_PRINCIPAL).
PLACE = ":listen-slot:"


def stored() -> tuple:
    """What the processes keep in PostgreSQL and Redis: rows per table, and Redis key names (but
    for the principals' places, see :func:`places`)."""
    from mcp_server.models import ResourceSubscription, Session, StreamEvent

    with redis_client(REDIS_DB) as client:
        keys = sorted(key for key in client.keys("*") if PLACE not in key)
    return (Session.objects.count(), ResourceSubscription.objects.count(), StreamEvent.objects.count(),
            keys)


def places() -> dict[str, int]:
    """The places principals' listen streams hold, each with the seconds it has left to live."""
    with redis_client(REDIS_DB) as client:
        return {key: client.ttl(key) for key in client.keys(f"*{PLACE}*")}


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
        # Nothing about them was written anywhere: a dropped stream is simply opened again. Only
        # their principal's place is held (a key of the shared state that lapses unless renewed).
        assert stored() == before
        held = places()
        assert held and all(ttl > 0 for ttl in held.values()), held
    finally:
        first.close()


def listen_status(url: str, request_id: str) -> tuple[int, httpx.Headers, dict | None]:
    """Open a listen stream and drop it at once: its status, headers and (when refused) error."""
    request = modern_request("subscriptions/listen", request_id, notifications={"toolsListChanged": True})
    check_client_message(request, REVISION)
    headers = {k: v for k, v in modern_headers(request).items() if k != "host"}
    with httpx.Client(timeout=httpx.Timeout(PATIENCE, read=PATIENCE)) as http, \
            http.stream("POST", url, headers=headers, content=json.dumps(request)) as response:
        error = None
        if response.status_code != 200:
            response.read()
            body = response.json()
            check_server_message(body, REVISION)
            error = body["error"]
        return response.status_code, response.headers, error


def test_listen_streams_per_principal_are_limited_over_every_process(transactional_db):
    require_services()
    settings = {"LISTEN_KEEPALIVE_INTERVAL": None, "MAX_LISTEN_SUBSCRIPTIONS_PER_PRINCIPAL": 2}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as (a, b):
        first = ListenStream(a.url, "first", {"toolsListChanged": True})
        second = ListenStream(b.url, "second", {"toolsListChanged": True})
        others: list[ListenStream] = []
        try:
            assert first.next()["method"] == ACKNOWLEDGED and second.next()["method"] == ACKNOWLEDGED
            # One client (this address) holds both of its places, on two processes: a third is
            # refused on either, with the fair-share answer.
            for url in (a.url, b.url):
                status, headers, error = listen_status(url, "third")
                assert status == 429, (status, error)
                assert int(headers["retry-after"]) >= 1
                assert error["code"] == -32600 and "2 listen streams" in error["message"], error
            # Another principal (a logged-in user, from the same address) has places of its own.
            login = log_in("listener")
            others.append(ListenStream(a.url, "theirs", {"toolsListChanged": True}, headers=login["headers"]))
            assert others[-1].next()["method"] == ACKNOWLEDGED
            # A stream that ends frees its place, whichever process held it.
            first.close()
            wait_until(lambda: listen_status(b.url, "again")[0] == 200, interval=0.2,
                       what="the closed stream's place to be free")
        finally:
            for stream in (first, second, *others):
                stream.close()
