"""A background call that no worker takes: a web process with a real Redis broker and no Celery
worker running. After ``BACKGROUND_CALL_QUEUE_TIMEOUT`` the call fails with an error that says no
worker took it and names the broker, however it was delivered (a handshake-era SSE stream, a
2026-07-28 relayed request, a task), and its record says so. And a call whose worker died after
taking it but before taking its request over ends with the dead worker's error. Every message is
checked against the schema of its revision."""

from __future__ import annotations

import pytest
from django.utils import timezone

from mcp_server.background.launch import WORKER_STOPPED
from mcp_server.models import ToolCall

from .celery_support import redis_broker
from .http_cluster import REDIS_HOST, REDIS_PORT, cluster, new_session, redis_client, require_services
from .http_support import in_thread
from .modern_support import envelope, post_over_http
from .waiting import PATIENCE, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_DB, BROKER_DB = 14, 15
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "BACKGROUND_CALL_QUEUE_TIMEOUT": 2}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
UNTAKEN = (f"No worker took this background call within 2 s; is a Celery worker running for the broker "
           f"redis://{REDIS_HOST}:{REDIS_PORT}/{BROKER_DB}? "
           "(MCP_SERVER['BACKGROUND_CALL_QUEUE_TIMEOUT'] bounds the wait)")


@pytest.fixture(scope="module")
def url(django_db_setup, django_db_blocker):
    """One daphne process whose settings name a Redis broker that no worker reads."""
    require_services()
    broker = redis_broker(BROKER_DB)
    with django_db_blocker.unblock(), \
            cluster(1, redis_db=REDIS_DB, mcp_settings=SETTINGS, env={"CELERY_BROKER_URL": broker}) as (web,):
        yield web.url


def queued_on_the_broker() -> int:
    """Tasks waiting in the broker's queue: each call was queued, and nobody took it."""
    with redis_client(BROKER_DB) as broker:
        return broker.llen("celery")


def the_record(delivery: str) -> ToolCall:
    [call] = ToolCall.objects.filter(delivery=delivery)
    assert (call.state, call.error, call.started_at, call.worker) == ("failed", UNTAKEN, None, "")
    assert call.response["error"] == {"code": -32603, "message": UNTAKEN}
    return call


def test_a_call_on_a_handshake_sse_stream_gets_the_error_on_its_stream(url):
    client = new_session(url)
    # On a thread: without the bound, keepalives would hold the stream open for ever.
    exchange = in_thread(client.request, "tools/call",
                         {"name": "background_job", "arguments": {"steps": 1}}).result(PATIENCE)
    assert exchange.headers["content-type"].startswith("text/event-stream")
    assert exchange.response["error"] == {"code": -32603, "message": UNTAKEN}
    assert the_record("stream").request_id == exchange.response["id"]
    assert queued_on_the_broker() >= 1
    # The request's id is free again: the same id may be sent once more (and fails the same way).
    again = in_thread(client.request, "tools/call", {"name": "background_job", "arguments": {"steps": 1}},
                      request_id=exchange.response["id"]).result(PATIENCE)
    assert again.response["error"]["message"] == UNTAKEN


def test_a_relayed_2026_call_gets_a_json_rpc_error(url):
    status, messages = post_over_http(url, "tools/call", 7, name="background_job", arguments={"steps": 1})
    assert status == 200
    assert messages[-1] == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": UNTAKEN}}
    the_record("relay")


def test_a_task_no_worker_takes_ends_failed(url):
    status, messages = post_over_http(url, "tools/call", 8, envelope(TASKS), name="task_job", arguments={})
    created = messages[-1]["result"]
    assert (status, created["resultType"], created["status"]) == (200, "task", "working")

    def task_status() -> dict | None:
        _status, answer = post_over_http(url, "tasks/get", 9, envelope(TASKS), taskId=created["taskId"])
        task = answer[-1]["result"]
        return task if task["status"] != "working" else None

    task = wait_until(task_status, what="the task to end")
    assert task["status"] == "failed" and task["error"] == {"code": -32603, "message": UNTAKEN}
    assert task["statusMessage"] == UNTAKEN
    assert the_record("task").id == created["taskId"]


def test_a_call_whose_worker_died_before_taking_its_request_over_ends_with_an_error():
    """A worker marks the call running, then takes its request over from the web process; one
    killed in between leaves the web process holding the request, alive, while the call's runner
    is dead. The web process finds the dead runner itself (here the record is moved as such a
    worker leaves it: no worker runs)."""
    require_services()
    settings = {"PROCESS_HEARTBEAT_INTERVAL": 1, "BACKGROUND_CALL_QUEUE_TIMEOUT": None}
    with cluster(1, redis_db=12, mcp_settings=settings,
                 env={"CELERY_BROKER_URL": redis_broker(13)}) as (web,):
        client = new_session(web.url)
        exchange = in_thread(client.request, "tools/call",
                             {"name": "background_job", "arguments": {"steps": 1}})
        wait_until(lambda: ToolCall.objects.filter(delivery="stream", state="queued").exists(),
                   what="the call queued")
        ToolCall.objects.filter(delivery="stream").update(
            state=ToolCall.State.RUNNING, runner="specific.worker-that-died", worker="gone",
            started_at=timezone.now(), idempotent=False)
        response = exchange.result(PATIENCE).response
        assert response["error"] == {"code": -32603, "message": WORKER_STOPPED}
        [call] = ToolCall.objects.filter(delivery="stream")
        assert (call.state, call.error) == ("failed", WORKER_STOPPED)
        assert call.response["error"] == response["error"]
