"""Fair share for background calls (issue 24): one client cannot fill the workers' queue, store
what its tool does not take, or keep finished records forever. Two daphne processes, one Celery
worker, PostgreSQL and Redis, as in production.

Every modern request declares the Tasks extension, so a call of a background tool answers at once
with its task: the way one address queued dozens of calls in a fraction of a second.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.utils import timezone

from mcp_server.models import ToolCall

from .celery_support import processes_and_worker
from .http_cluster import REDIS_HOST, REDIS_PORT, call_tool, new_session
from .modern_support import MODERN, envelope, modern_headers, sse_messages
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 13, 14
TASKS = "io.modelcontextprotocol/tasks"
CAPABILITIES = {"extensions": {TASKS: {}}}
LIMIT = 3
STORED_BYTES = 4096
# DRF tokens make a second principal; a request without one is counted by its address.
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "MAX_BACKGROUND_CALLS_PER_PRINCIPAL": LIMIT,
            "MAX_BACKGROUND_CALL_BYTES": STORED_BYTES,
            "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
State = ToolCall.State
IN_FLIGHT = (State.QUEUED, State.RUNNING, State.INPUT_REQUIRED)
ANONYMOUS = "address:127.0.0.1"


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    """Two daphne processes and one worker, all on one Redis database and one broker."""
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


@pytest.fixture
def gate(tmp_path) -> Iterator[Any]:
    """The gate ``task_job`` waits at; opened when the test ends, and then every call the test
    left in flight is waited for, so that the next test starts with a principal holding none."""
    path = tmp_path / "gate"
    yield path
    path.touch()
    wait_until(lambda: not ToolCall.objects.filter(state__in=IN_FLIGHT).exists(),
               what="the test's background calls to end")


_ids = iter(range(1, 1_000_000))


def modern_call(url: str, method: str, token: str | None = None, **params: Any) -> httpx.Response:
    """One 2026-07-28 request declaring the Tasks extension (checked against the schema); the
    HTTP response, whose messages are checked too."""
    message = {"jsonrpc": "2.0", "id": next(_ids), "method": method,
               "params": {**params, "_meta": envelope(CAPABILITIES)}}
    check_client_message(message, MODERN)
    headers = {k: v for k, v in modern_headers(message).items() if k not in ("host", "content-type")}
    if token is not None:
        headers["authorization"] = f"Token {token}"
    response = httpx.post(url, json=message, headers=headers, timeout=PATIENCE)
    for item in messages_of(response):
        check_server_message(item, MODERN, method if "method" not in item else None)
    return response


def messages_of(response: httpx.Response) -> list[dict]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return sse_messages(response.text)
    return [response.json()]


def answer(response: httpx.Response) -> dict:
    return messages_of(response)[-1]


def start(url: str, token: str | None = None, **arguments: Any) -> str:
    """``task_job`` started as a task: its id."""
    response = modern_call(url, "tools/call", token, name="task_job", arguments=arguments)
    assert response.status_code == 200, response.text
    result = answer(response)["result"]
    assert result["resultType"] == "task", result
    return result["taskId"]


def assert_too_many(response: httpx.Response) -> None:
    """The fair-share refusal: 429, a Retry-After, and a JSON-RPC error naming the limit."""
    assert response.status_code == 429, (response.status_code, response.text)
    assert int(response.headers["retry-after"]) >= 1
    error = answer(response)["error"]
    assert error["code"] == -32600, error
    assert f"{LIMIT} background calls" in error["message"], error
    assert error["data"]["retryAfter"] >= 1


def in_flight(principal_key: str) -> int:
    return ToolCall.objects.filter(principal_key=principal_key, state__in=IN_FLIGHT).count()


def status_of(url: str, task_id: str, token: str | None = None) -> str:
    return answer(modern_call(url, "tasks/get", token, taskId=task_id))["result"]["status"]


# One principal's share -------------------------------------------------------------------------
def test_background_calls_in_flight_are_bounded_per_principal_on_every_process(deployment, gate):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    (a, b), _worker = deployment
    started = [start(url, gate=str(gate)) for url in (a.url, b.url, a.url)]
    assert in_flight(ANONYMOUS) == LIMIT
    # One more from the same address, on either process, is refused before anything is queued.
    for url in (a.url, b.url):
        assert_too_many(modern_call(url, "tools/call", name="task_job", arguments={"gate": str(gate)}))
    # A handshake-era session from that address is the same principal: its call is refused too.
    client = new_session(a.url)
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "background_job", "arguments": {"steps": 1}}}
    check_client_message(message, client.revision)
    refused = client.post_raw(json.dumps(message), url=b.url)
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    check_server_message(refused.json(), client.revision)
    assert f"{LIMIT} background calls" in refused.json()["error"]["message"]
    assert ToolCall.objects.filter(state__in=IN_FLIGHT).count() == LIMIT

    # Another principal (a user, from the same address) has a share of its own.
    user = get_user_model().objects.create_user("background-share")
    token = Token.objects.create(user=user).key
    theirs = start(b.url, token, gate=str(gate))
    assert ToolCall.objects.get(id=theirs).principal_key == f"user:{user.pk}"

    # A call that ends frees its place.
    cancelled = answer(modern_call(a.url, "tasks/cancel", taskId=started[0]))
    assert cancelled["result"] == {"resultType": "complete"}
    wait_until(lambda: status_of(b.url, started[0]) == "cancelled", what="the cancelled task to end")
    start(b.url, gate=str(gate))
    assert in_flight(ANONYMOUS) == LIMIT


def test_a_burst_of_calls_from_one_address_gets_no_more_than_its_share(deployment, gate):
    (a, b), _worker = deployment
    urls = [a.url, b.url] * 10

    def call(url: str) -> httpx.Response:
        return modern_call(url, "tools/call", name="task_job", arguments={"gate": str(gate)})

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(urls)) as pool:
        responses = list(pool.map(call, urls, timeout=PATIENCE))
    admitted = [r for r in responses if r.status_code == 200 and "result" in answer(r)]
    assert 1 <= len(admitted) <= LIMIT, [(r.status_code, r.text) for r in responses]
    for response in responses:
        if response not in admitted:
            assert_too_many(response)
    # Nothing of the refused calls was kept or queued.
    assert in_flight(ANONYMOUS) == len(admitted)
    assert ToolCall.objects.count() == len(admitted)


# What a call's record keeps ------------------------------------------------------------------------
def test_a_call_keeps_only_its_declared_arguments_once_and_oversized_ones_are_refused(deployment):
    (a, b), worker = deployment
    # An argument the input schema does not declare is dropped: not stored, not passed to the tool.
    task_id = start(a.url, marker=None, junk="x" * 2000)
    wait_until(lambda: status_of(b.url, task_id) != "working", what="the task to end")
    done = answer(modern_call(b.url, "tasks/get", taskId=task_id))["result"]
    assert done["status"] == "completed", done
    assert not done["result"].get("isError"), done
    assert json.loads(done["result"]["content"][0]["text"])["pid"] == worker.process.pid
    record = ToolCall.objects.get(id=task_id)
    assert record.arguments == {"marker": None}
    # The request's params are kept (its _meta: the envelope), its arguments only once.
    assert "arguments" not in record.params and record.params["name"] == "task_job"

    # Arguments that would make the record larger than allowed are refused, and nothing is kept.
    before = ToolCall.objects.count()
    refused = modern_call(a.url, "tools/call", name="task_job", arguments={"gate": "g" * STORED_BYTES})
    assert refused.status_code == 400, refused.text
    error = answer(refused)["error"]
    assert error["code"] == -32602 and f"at most {STORED_BYTES} bytes" in error["message"], error
    assert ToolCall.objects.count() == before


def test_the_demo_counts_in_the_background_no_further_than_its_schema_allows(deployment):
    (a, _b), _worker = deployment
    response = modern_call(a.url, "tools/call", name="count_in_background", arguments={"to": 10**18})
    result = answer(response)["result"]
    try:
        assert result.get("isError") is True, result
        assert "Invalid arguments" in result["content"][0]["text"], result
        assert not ToolCall.objects.filter(tool="count_in_background").exists()
    finally:
        if result.get("resultType") == "task":  # the code before the bound: stop the count
            modern_call(a.url, "tasks/cancel", taskId=result["taskId"])


# Retention -------------------------------------------------------------------------------------
def test_finished_calls_are_deleted_after_their_retention_by_the_beat_task(deployment):
    from celery import Celery

    (a, _b), _worker = deployment
    client = new_session(a.url)
    call_tool(client, a.url, "background_job", {"steps": 1})
    call_tool(client, a.url, "background_job", {"steps": 1})
    old, recent = ToolCall.objects.filter(session_id=client.session_id).order_by("created_at")
    assert not old.task and old.finished
    two_days_ago = timezone.now() - datetime.timedelta(days=2)
    ToolCall.objects.filter(id=old.id).update(created_at=two_days_ago, finished_at=two_days_ago)

    # The periodic cleanup the Celery beat entry runs, taken by the deployment's worker.
    app = Celery(broker=f"redis://{REDIS_HOST}:{REDIS_PORT}/{BROKER_DB}")
    with contextlib.closing(app):
        app.send_task("mcp_server.clean_tasks")
        wait_until(lambda: not ToolCall.objects.filter(id=old.id).exists(),
                   what="the finished call past its retention to be deleted")
    assert ToolCall.objects.filter(id=recent.id).exists()


# A deployment's bound on how long a call runs --------------------------------------------------
TIME_LIMIT = 2
TIMED = {**SETTINGS, "BACKGROUND_CALL_TIME_LIMIT": TIME_LIMIT}
WAIT = PATIENCE / 2
# Apart from the module's deployment, which runs meanwhile.
TIMED_REDIS_DB, TIMED_BROKER_DB = 9, 10


def test_a_call_past_the_time_limit_is_stopped_and_ends_with_an_error(gate):
    """A call that would wait at its gate for half a minute is stopped at the deployment's limit,
    on the worker, whichever way its client holds it: a task fails, a stream gets the error."""
    with processes_and_worker(redis_db=TIMED_REDIS_DB, broker_db=TIMED_BROKER_DB, mcp_settings=TIMED) \
            as ((a, b), _worker):
        try:
            # Each would wait at its gate (which stays shut) for half a minute; the limit is 2 s.
            task_id = start(a.url, gate=str(gate), limit=WAIT)
            client = new_session(b.url)
            exchange = client.request("tools/call", {"name": "background_job", "arguments": {
                "steps": 1, "gate": str(gate), "limit": WAIT}}, url=b.url)
            error = exchange.response["error"]
            assert error["code"] == -32603 and "BACKGROUND_CALL_TIME_LIMIT" in error["message"], error
            failed = wait_until(lambda: (lambda t: t if t["status"] != "working" else None)(
                answer(modern_call(b.url, "tasks/get", taskId=task_id))["result"]), what="the task to end")
            assert failed["status"] == "failed", failed
            assert failed["error"]["code"] == -32603, failed
            assert f"{TIME_LIMIT} s" in failed["error"]["message"], failed
            assert set(ToolCall.objects.values_list("state", flat=True)) == {State.FAILED}
            assert not gate.exists()  # stopped by the limit, not by the gate
        finally:
            gate.touch()  # what still runs ends before its worker is stopped
            wait_until(lambda: not ToolCall.objects.filter(state__in=IN_FLIGHT).exists(),
                       what="the calls to end")
