"""An idempotent background tool whose worker dies mid-call runs again on another worker, and its
client, still on the same stream, gets the result with no error and no progress twice."""

from __future__ import annotations

import json
import queue
import threading

import pytest

from mcp_server.models import ToolCall

from .celery_support import celery_worker, redis_broker
from .http_cluster import REDIS_HOST, REDIS_PORT, cluster, listening, new_session, require_services
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 12, 13
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1}


def _record(tool: str) -> ToolCall | None:
    return ToolCall.objects.filter(tool=tool).order_by("-created_at").first()


def test_an_idempotent_call_runs_again_when_its_worker_dies(tmp_path):
    require_services()
    broker = redis_broker(BROKER_DB)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
    gate = tmp_path / "gate"
    worker_options = {"broker_url": broker, "redis_url": redis_url, "mcp_settings_json": json.dumps(SETTINGS)}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=SETTINGS, env={"CELERY_BROKER_URL": broker},
                 wait=False) as (a, _b), celery_worker(name="first", **worker_options) as first:
        listening([a, _b])
        client = new_session(a.url)
        events: queue.Queue = queue.Queue()
        outcome: dict = {}

        def call() -> None:
            outcome["exchange"] = client.request(
                "tools/call", {"name": "idempotent_job", "arguments": {"steps": 3, "gate": str(gate)},
                               "_meta": {"progressToken": "p"}}, url=a.url, on_event=events.put)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        wait_until(lambda: (r := _record("idempotent_job")) is not None and r.progress == 3,
                   what="the first run's progress on record")
        with celery_worker(name="second", **worker_options) as second:
            first.kill()
            wait_until(lambda: _record("idempotent_job").attempts == 2
                       and _record("idempotent_job").state == ToolCall.State.RUNNING,
                       what=f"a second run; first worker's log:\n{first.log}")
            gate.touch()
            caller.join(PATIENCE)
            assert not caller.is_alive(), "the call never ended"
        exchange = outcome["exchange"]
        assert exchange.response is not None and "result" in exchange.response, exchange
        result = json.loads(exchange.response["result"]["content"][0]["text"])
        assert result["pid"] == second.process.pid
        progress = [n["params"]["progress"] for n in exchange.notifications
                    if n["method"] == "notifications/progress"]
        assert progress == [1, 2, 3], "progress sent twice, or lost"
        record = _record("idempotent_job")
        assert (record.state, record.attempts) == (ToolCall.State.COMPLETED, 2)
