"""Background tool calls on a real Celery worker, with one session spread over two daphne
processes on PostgreSQL and Redis (issue acceptance (1)-(6))."""

from __future__ import annotations

import json

import pytest

from .celery_support import celery_worker, redis_broker
from .http_cluster import REDIS_HOST, REDIS_PORT, cluster, new_session, require_services

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 13, 14
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1}


@pytest.fixture
def deployment():
    """Two daphne processes and one worker, all on one Redis database and one broker."""
    require_services()
    broker = redis_broker(BROKER_DB)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
    with cluster(2, redis_db=REDIS_DB, mcp_settings=SETTINGS, env={"CELERY_BROKER_URL": broker}) as servers, \
            celery_worker(broker_url=broker, redis_url=redis_url,
                          mcp_settings_json=json.dumps(SETTINGS)) as worker:
        yield servers, worker


def test_progress_from_the_worker_reaches_the_client(deployment):
    (a, _b), worker = deployment
    client = new_session(a.url)
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 3},
                                             "_meta": {"progressToken": "p"}}, url=a.url)
    assert exchange.response is not None, exchange
    result = json.loads(exchange.response["result"]["content"][0]["text"])
    assert result["pid"] == worker.process.pid
    progress = [n["params"]["progress"] for n in exchange.notifications
                if n["method"] == "notifications/progress"]
    assert progress == [1, 2, 3]
