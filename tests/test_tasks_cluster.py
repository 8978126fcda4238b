"""The Tasks extension (SEP-2663) on two daphne processes, a Celery worker, PostgreSQL and Redis
(issue 16's acceptance (1)-(6)): a task is the call's record, so either process answers for it.

Every request is a 2026-07-28 one declaring the extension, checked against the revision's schema
with the extension's definitions (tests/schemas/tasks-extension.json).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from mcp_client import AsyncClient
from mcp_server.background.launch import WORKER_STOPPED
from mcp_server.models import ToolCall

from .celery_support import CeleryWorker, processes_and_worker, redis_broker, worker_beside
from .client_support import CheckedHTTPTransport
from .http_cluster import cluster, require_services
from .listen_support import ListenStream
from .modern_support import envelope, post_over_http
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
REDIS_DB, BROKER_DB = 11, 12
# DRF tokens identify the callers of (6); a request without one is anonymous.
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "LISTEN_KEEPALIVE_INTERVAL": None,
            "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
State = ToolCall.State


def worker_on(redis_db: int, env: dict) -> contextlib.AbstractContextManager[CeleryWorker]:
    return worker_beside(redis_db, env, SETTINGS)


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    """Two daphne processes and one worker, sharing one Redis database and one broker."""
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


_ids = iter(range(1, 1_000_000))


def ask(url: str, method: str, token: str | None = None, **params: Any) -> dict:
    """One modern request declaring the extension; its response (checked against the schema)."""
    headers = {"authorization": f"Token {token}"} if token else None
    status, messages = post_over_http(url, method, next(_ids), envelope(CAPABILITIES),
                                      extra_headers=headers, **params)
    assert status in (200, 400), (status, messages)
    return messages[-1]


def start(url: str, token: str | None = None, **arguments: Any) -> dict:
    """``task_job`` called as a task: its ``CreateTaskResult``."""
    result = ask(url, "tools/call", token, name="task_job", arguments=arguments)["result"]
    assert result["resultType"] == "task" and result["status"] == "working", result
    return result


def task(url: str, task_id: str, token: str | None = None) -> dict:
    return ask(url, "tasks/get", token, taskId=task_id)["result"]


def until_status(url: str, task_id: str, *statuses: str) -> dict:
    return wait_until(lambda: (lambda t: t if t["status"] in statuses else None)(task(url, task_id)),
                      what=f"task {task_id} to be {' or '.join(statuses)}")


def running(task_id: str) -> ToolCall:
    return wait_until(lambda: ToolCall.objects.filter(id=task_id, state=State.RUNNING).first(),
                      what="the worker to start the task")


# (1) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-02", "TASK-04", "TASK-12")
def test_a_task_created_on_one_process_is_polled_to_completion_on_the_other(deployment, gate):
    (a, b), worker = deployment
    created = start(a.url, gate=str(gate))
    assert len(created["taskId"]) >= 32 and created["pollIntervalMs"] > 0
    running(created["taskId"])
    assert task(b.url, created["taskId"])["status"] == "working"

    gate.touch()
    done = until_status(b.url, created["taskId"], "completed", "failed")
    assert done["status"] == "completed", done
    outcome = json.loads(done["result"]["content"][0]["text"])
    assert outcome == {"pid": worker.process.pid, "colour": None}, worker.log
    assert ToolCall.objects.get(id=created["taskId"]).task


# (2) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-05", "TASK-12")
def test_a_task_asking_for_input_is_answered_with_tasks_update_on_the_other_process(deployment):
    (a, b), worker = deployment
    created = start(a.url, ask=True)
    asking = until_status(b.url, created["taskId"], "input_required", "failed", "completed")
    assert asking["status"] == "input_required", asking
    assert list(asking["inputRequests"]) == ["colour"]
    assert asking["inputRequests"]["colour"]["method"] == "elicitation/create"

    ack = ask(b.url, "tasks/update", taskId=created["taskId"],
              inputResponses={"colour": {"action": "accept", "content": {"colour": "teal"}}})
    assert ack["result"] == {"resultType": "complete"}
    done = until_status(a.url, created["taskId"], "completed", "failed")
    assert done["status"] == "completed", done
    assert json.loads(done["result"]["content"][0]["text"]) == {"pid": worker.process.pid, "colour": "teal"}


# (3) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-06", "TASK-12")
def test_tasks_cancel_on_the_other_process_stops_the_tool_in_the_worker(deployment, gate, tmp_path):
    (a, b), worker = deployment
    marker = tmp_path / "cancel-seen"
    created = start(a.url, gate=str(gate), marker=str(marker), limit=600.0)
    running(created["taskId"])

    assert ask(b.url, "tasks/cancel", taskId=created["taskId"])["result"] == {"resultType": "complete"}
    # The worker's tool saw the cancel (it wrote the marker) while its gate stayed shut.
    # (Its content, not only the file: the tool creates it, then writes it.)
    wait_until(lambda: marker.exists() and marker.read_text(), what="the worker's tool to see the cancel")
    assert marker.read_text() == str(worker.process.pid)
    assert until_status(a.url, created["taskId"], "cancelled", "completed", "failed")["status"] == "cancelled"
    # A finished task is acked as it is.
    assert ask(a.url, "tasks/cancel", taskId=created["taskId"])["result"] == {"resultType": "complete"}


# (4) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-07")
def test_notifications_tasks_reach_a_listen_stream_on_the_other_process(deployment, gate):
    (a, b), _worker = deployment
    created = start(a.url, gate=str(gate))
    task_id = created["taskId"]
    listen = ListenStream(b.url, "watch", {"taskIds": [task_id, "no-such-task"]},
                          capabilities=CAPABILITIES)
    try:
        assert listen.status == 200
        acknowledged = listen.next()
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
        running(task_id)
        gate.touch()
        notification = listen.next()
        assert notification["method"] == "notifications/tasks", notification
        params = notification["params"]
        assert (params["taskId"], params["status"]) == (task_id, "completed")
        assert params["result"] == task(a.url, task_id)["result"]
    finally:
        listen.close()


@pytest.mark.feature("TASK-07")
def test_a_listen_stream_asking_for_tasks_without_the_extension_is_refused(deployment):
    (a, _b), _worker = deployment
    status, messages = post_over_http(a.url, "subscriptions/listen", "refused", envelope(),
                                      notifications={"taskIds": ["anything"]})
    assert status == 400
    error = messages[-1]["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


# (5) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-10")
def test_a_worker_killed_mid_task_leaves_it_failed_with_a_json_rpc_error(gate):
    require_services()
    env = {"CELERY_BROKER_URL": redis_broker(10)}
    with cluster(2, redis_db=9, mcp_settings=SETTINGS, env=env) as (a, b), worker_on(9, env) as worker:
        created = start(a.url, gate=str(gate), limit=600.0)
        running(created["taskId"])
        worker.kill()
        # Noticed once the worker's heartbeat lapses (3 heartbeats), by whichever process is asked.
        failed = until_status(b.url, created["taskId"], "failed", "completed", "cancelled")
        assert failed["status"] == "failed", failed
        assert failed["error"] == {"code": -32603, "message": WORKER_STOPPED}
        assert "result" not in failed
        assert ToolCall.objects.get(id=created["taskId"]).state == State.FAILED


# (6) --------------------------------------------------------------------------------------------
@pytest.mark.feature("TASK-08")
def test_another_principal_can_neither_see_nor_cancel_a_task(deployment, gate):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    (a, b), _worker = deployment
    users = get_user_model().objects
    owner = Token.objects.create(user=users.create_user("task-owner")).key
    other = Token.objects.create(user=users.create_user("task-stranger")).key
    created = start(a.url, owner, gate=str(gate))
    task_id = created["taskId"]
    assert ToolCall.objects.get(id=task_id).owner.get_username() == "task-owner"

    for caller in (other, None):  # another user, and an anonymous caller
        for method, params in (("tasks/get", {}), ("tasks/cancel", {}),
                               ("tasks/update", {"inputResponses": {}})):
            error = ask(b.url, method, caller, taskId=task_id, **params)["error"]
            assert error["code"] == -32602 and "Task not found" in error["message"], error
    listen = ListenStream(b.url, "stranger", {"taskIds": [task_id]}, capabilities=CAPABILITIES,
                          headers={"authorization": f"Token {other}"})
    try:
        assert listen.next()["params"]["notifications"] == {"taskIds": []}
    finally:
        listen.close()
    assert not ToolCall.objects.get(id=task_id).cancel_requested
    assert task(b.url, task_id, owner)["status"] == "working"
    gate.touch()
    assert until_status_as(b.url, task_id, owner)["status"] == "completed"


@pytest.mark.feature("TASK-08")
def test_a_task_whose_owner_was_deleted_is_seen_by_nobody(deployment, gate):
    """Deleting a user sets its calls' owner to nothing: such a task must not then look like one of
    a caller with no user, which any caller authenticated the same way (another user's token of
    the same kind, with no OAuth client or subject) would match."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    (a, b), _worker = deployment
    users = get_user_model().objects
    owner = users.create_user("task-owner-to-delete")
    created = start(a.url, Token.objects.create(user=owner).key, gate=str(gate))
    task_id = created["taskId"]
    other = Token.objects.create(user=users.create_user("task-caller-of-the-same-kind")).key
    owner.delete()  # its token goes with it
    assert ToolCall.objects.get(id=task_id).owner is None

    for url in (a.url, b.url):
        for caller in (other, None):
            error = ask(url, "tasks/get", caller, taskId=task_id)["error"]
            assert error["code"] == -32602 and "Task not found" in error["message"], error
    error = ask(b.url, "tasks/cancel", other, taskId=task_id)["error"]
    assert "Task not found" in error["message"]
    assert not ToolCall.objects.get(id=task_id).cancel_requested
    gate.touch()
    wait_until(lambda: ToolCall.objects.get(id=task_id).state == State.COMPLETED,
               what="the orphaned task to complete")
    assert "Task not found" in ask(a.url, "tasks/get", other, taskId=task_id)["error"]["message"]


def until_status_as(url: str, task_id: str, token: str) -> dict:
    return wait_until(lambda: (lambda t: t if t["status"] != "working" else None)(task(url, task_id, token)),
                      what=f"task {task_id} to end", timeout=PATIENCE)


@pytest.mark.feature("TASK-13")
def test_our_client_in_auto_mode_completes_a_task_of_the_demo_with_one_call_tool(deployment):
    (a, _b), worker = deployment

    async def call() -> Any:
        client = AsyncClient(CheckedHTTPTransport(a.url))
        try:
            await client.connect(mode="auto")
            assert client.is_modern
            return await client.call_tool("count_in_background", {"to": 1})
        finally:
            await client.close()

    assert asyncio.run(call()).text == "Counted to 1"
    record = ToolCall.objects.filter(tool="count_in_background").latest("created_at")
    assert record.task and record.worker.endswith(f":{worker.process.pid}"), record.worker
