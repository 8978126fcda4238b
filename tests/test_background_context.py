"""What a background tool's ServerContext does in a Celery worker besides progress: an ``async``
tool runs there, its resource updates reach the session's GET stream on another process, and its
log messages pass the level the session set."""

from __future__ import annotations

import json

import pytest

from .celery_support import celery_worker, redis_broker
from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    cluster,
    events_until,
    listening,
    new_session,
    open_stream,
    require_services,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 4, 5


def test_an_async_background_tool_notifies_subscribers_and_logs_at_the_sessions_level():
    require_services()
    broker = redis_broker(BROKER_DB)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
    with cluster(2, redis_db=REDIS_DB, env={"CELERY_BROKER_URL": broker}, wait=False) as (a, b), \
            celery_worker(broker_url=broker, redis_url=redis_url) as worker:
        listening([a, b])
        client = new_session(a.url)
        assert "result" in client.request("logging/setLevel", {"level": "info"}, url=a.url).response
        subscribed = client.request("resources/subscribe", {"uri": "demo://readme"}, url=a.url)
        assert subscribed.response["result"] == {}
        stream = open_stream(client, b.url)
        try:
            exchange = client.request("tools/call", {"name": "background_touch",
                                                     "arguments": {"uri": "demo://readme"}}, url=a.url)
            assert json.loads(exchange.response["result"]["content"][0]["text"])["pid"] == worker.process.pid
            logged = [n["params"]["data"] for n in exchange.notifications
                      if n["method"] == "notifications/message"]
            assert logged == ["touched (warning)"], worker.log  # debug is below the session's info
            updates = events_until(stream, "notifications/resources/updated")
            assert updates[-1].message["params"] == {"uri": "demo://readme"}
        finally:
            stream.close()
