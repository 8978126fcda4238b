"""A web process holds no thread while its background calls run or wait for a worker
(docs/performance.md, "Background tool calls"): the request waits as a coroutine, on its stream
(a handshake-era session) or on the messages the worker relays (2026-07-28)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from mcp_server.models import ToolCall

from .celery_support import celery_worker, redis_broker
from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    cluster,
    listening,
    new_session,
    redis_client,
    require_services,
    twin,
)
from .modern_support import post_over_http
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 7, 8
# One client makes every call: its fair share (MAX_BACKGROUND_CALLS_PER_PRINCIPAL) is lifted.
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "MAX_BACKGROUND_CALLS_PER_PRINCIPAL": None}
# More calls in flight than asyncio's default thread pool ever has threads (min(32, cores + 4)),
# and than the process has threads on any machine: a call holding a thread would show in both.
CALLS = 64


def thread_count(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


@pytest.mark.parametrize("delivery", ["stream", "relay"])
def test_waiting_background_calls_hold_no_thread_of_the_web_process(tmp_path, delivery):
    require_services()
    broker = redis_broker(BROKER_DB)
    gate = tmp_path / "gate"
    with cluster(1, redis_db=REDIS_DB, mcp_settings=SETTINGS, env={"CELERY_BROKER_URL": broker},
                 wait=False) as [web], \
            celery_worker(broker_url=broker, redis_url=f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}",
                          mcp_settings_json=json.dumps(SETTINGS)):
        listening([web])
        client = new_session(web.url)
        responses: list = []
        # The gate holds the first call in the (solo) worker; the others wait in the broker.
        arguments = {"steps": 1, "gate": str(gate), "limit": 4 * PATIENCE}

        def call(request_id: str) -> None:
            if delivery == "relay":
                _status, messages = post_over_http(web.url, "tools/call", request_id, name="background_job",
                                                   arguments=arguments)
                responses.append(messages[-1])
                return
            other = twin(client, web.url)
            try:
                params = {"name": "background_job", "arguments": arguments}
                responses.append(other.request("tools/call", params, request_id=request_id).response)
            finally:
                other.close()

        callers = [threading.Thread(target=call, args=(f"background-{n}",)) for n in range(CALLS)]
        for caller in callers:
            caller.start()
        try:
            with redis_client(BROKER_DB) as broker_redis:
                wait_until(lambda: ToolCall.objects.filter(state=ToolCall.State.RUNNING).count() == 1
                           and broker_redis.llen("celery") == CALLS - 1,
                           what=f"one call running and {CALLS - 1} queued")
            assert thread_count(web.process.pid) < CALLS
            # A plain-def tool runs on the web process's thread pool: it is free.
            echoed = client.request("tools/call", {"name": "echo", "arguments": {"message": "still here"}})
            assert echoed.response["result"]["content"][0]["text"] == "still here"
        finally:
            gate.touch()
            for caller in callers:
                caller.join(4 * PATIENCE)
        assert len(responses) == CALLS
        assert all(response and "result" in response for response in responses), responses
