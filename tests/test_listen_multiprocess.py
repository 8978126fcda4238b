"""``subscriptions/listen`` streams fed from every process: two daphne processes on PostgreSQL and
Redis, as in production. A list change or a resource update made through one process reaches the
listen streams held by the other, filtered by what each subscribed to. Needs PostgreSQL
(DATABASE_URL) and Redis (MCP_TEST_REDIS_PORT).
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import httpx
import pytest

from mcp_protocol.envelope import SUBSCRIPTION_ID_KEY

from .http_cluster import call_tool, cluster, new_session, redis_client, require_services
from .http_harness import drop_connection, iter_events
from .modern_support import envelope, modern_headers, modern_request
from .waiting import PATIENCE
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


class ListenStream:
    """A ``subscriptions/listen`` POST read on a thread; every message is checked against the
    2026-07-28 schema. ``messages`` is a queue of them (None at the stream's end)."""

    def __init__(self, url: str, request_id: Any, notifications: dict):
        self.request = modern_request("subscriptions/listen", request_id,
                                      meta=envelope(client_info={"name": "listener", "version": "1"}),
                                      notifications=notifications)
        check_client_message(self.request, REVISION)
        self.messages: queue.Queue[dict | None] = queue.Queue()
        self.status: int | None = None
        self.opened = threading.Event()
        self._http = httpx.Client(timeout=httpx.Timeout(PATIENCE, read=None))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()
        assert self.opened.wait(PATIENCE), "the listen stream did not open"

    def _read(self, url: str) -> None:
        headers = {k: v for k, v in modern_headers(self.request).items() if k != "host"}
        try:
            body = json.dumps(self.request)
            with self._http.stream("POST", url, headers=headers, content=body) as response:
                self._response = response
                self.status = response.status_code
                self.opened.set()
                for event in iter_events(response):
                    if event.message is not None:
                        check_server_message(event.message, REVISION)
                        self.messages.put(event.message)
        except (httpx.HTTPError, RuntimeError):
            pass
        finally:
            self.opened.set()
            self.messages.put(None)

    def next(self) -> dict:
        try:
            message = self.messages.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"nothing on the listen stream within {PATIENCE}s") from None
        assert message is not None, "the listen stream ended"
        return message

    def close(self) -> None:
        """Drop the connection, as a client that goes away does."""
        drop_connection(self._response, self._http, self._thread)


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
