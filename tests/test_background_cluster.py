"""Background tool calls on a real Celery worker, with one session spread over two daphne
processes on PostgreSQL and Redis (issue acceptance (1)-(9)).

The tests that kill no process share one deployment (two daphne processes and one worker, Redis as
the broker); a test that kills a process, needs another broker or starts its worker late has its
own, on Redis databases of its own.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import queue
import re
import signal
import threading
from typing import Any

import httpx
import pytest

from mcp_server.http.liveness import REQUEST_STOPPED
from mcp_server.models import ToolCall

from .celery_support import (
    CeleryWorker,
    processes_and_worker,
    rabbitmq_queue,
    redis_broker,
    require_rabbitmq,
    worker_beside,
)
from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    cluster,
    ends,
    listening,
    new_session,
    next_event,
    open_stream,
    redis_client,
    require_services,
)
from .http_harness import Event, HTTPClient, drop_connection, iter_events
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 13, 14
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1}
# How long a call waits at a gate that never opens: longer than any wait of these tests, so such a
# call ends only when it is cancelled or its worker dies.
NEVER = 600.0
State = ToolCall.State


def redis_url(db: int) -> str:
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def worker_on(redis_db: int, env: dict) -> contextlib.AbstractContextManager[CeleryWorker]:
    """A worker beside daphne processes started with ``env`` on Redis database ``redis_db``."""
    return worker_beside(redis_db, env, SETTINGS)


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    """Two daphne processes and one worker, all on one Redis database and one broker."""
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


class CallStream:
    """A ``tools/call`` of ``background_job`` POSTed on a thread, its SSE stream read as it comes
    (``next()``, None at its end), so that a test can act mid-call: cancel it, drop the
    connection, kill a process. Every message is checked against the session's schema."""

    def __init__(self, client: HTTPClient, url: str, request_id: int, arguments: dict):
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
            "name": "background_job", "arguments": arguments, "_meta": {"progressToken": "job"}}}
        check_client_message(message, client.revision)
        self.revision = client.revision
        self.request_id = request_id
        self.received: list[Event] = []
        self.failure: BaseException | None = None
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._http = httpx.Client(timeout=httpx.Timeout(PATIENCE, read=None))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        args=(url, json.dumps(message), client.headers()))
        self._thread.start()

    def _read(self, url: str, body: str, headers: dict) -> None:
        try:
            with self._http.stream("POST", url, content=body, headers=headers) as response:
                self._response = response
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise AssertionError(f"not an SSE stream: {response.status_code} {response.read()!r}")
                for event in iter_events(response):
                    message = event.message
                    if message is not None:
                        answers = "method" not in message and message.get("id") == self.request_id
                        check_server_message(message, self.revision, "tools/call" if answers else None)
                    self.received.append(event)
                    self._events.put(event)
        except (httpx.HTTPError, RuntimeError):
            pass  # the connection dropped (the test dropped it, or its process died)
        except BaseException as exc:  # a message off the schema: the test fails with it
            self.failure = exc
        finally:
            self._http.close()
            self._events.put(None)

    def next(self, timeout: float = PATIENCE) -> Event | None:
        event = self._events.get(timeout=timeout)
        if event is None and self.failure is not None:
            raise self.failure
        return event

    def drop(self) -> None:
        """Drop the connection mid-stream, as a client that goes away does."""
        drop_connection(self._response, self._http, self._thread)
        if self.failure is not None:
            raise self.failure


def until_progress(stream: Any) -> Event:
    """Read ``stream`` up to its next progress notification."""
    while True:
        event = next_event(stream)
        if event.message.get("method") == "notifications/progress":
            return event


def progress_of(events: list[Event]) -> list[float]:
    return [e.message["params"]["progress"] for e in events
            if e.message and e.message.get("method") == "notifications/progress"]


def answers_to(events: list[Event], request_id: int) -> list[dict]:
    """The responses (results or errors) to ``request_id`` among ``events``."""
    return [e.message for e in events if e.message and "method" not in e.message
            and e.message.get("id") in (request_id, None)]


def last_id(events: list[Event]) -> str:
    return [e.id for e in events if e.id is not None][-1]


def call_of(client: HTTPClient) -> ToolCall:
    """The record of the session's one background call."""
    return ToolCall.objects.get(session_id=client.session_id)


def finished_call(client: HTTPClient) -> ToolCall | None:
    call = ToolCall.objects.filter(session_id=client.session_id).first()
    return call if call is not None and call.finished_at is not None else None


def task_outcome(worker: CeleryWorker, call_id: str) -> str | None:
    """What the worker's task for ``call_id`` returned, as its log says (None: not yet)."""
    found = re.search(rf"run_tool_call\[{call_id}\] succeeded in [\d.e-]+s: '([^']*)'", worker.log)
    return found.group(1) if found else None


# (1) --------------------------------------------------------------------------------------------
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


# (2) --------------------------------------------------------------------------------------------
def test_a_cancel_posted_to_the_other_process_stops_the_call_in_the_worker(deployment, gate):
    (a, b), worker = deployment
    client = new_session(a.url)
    call = CallStream(client, a.url, 21, {"steps": 1, "gate": str(gate), "limit": NEVER})
    until_progress(call)  # from the worker: the call runs there now

    cancel = client.notify("notifications/cancelled", {"requestId": 21, "reason": "not needed"}, url=b.url)
    cancelled_at = datetime.datetime.now(datetime.UTC)
    assert cancel.status_code == 202, cancel.text
    ends(call)
    assert answers_to(call.received, 21) == [], f"a cancelled call was answered\n{worker.log}"
    record = call_of(client)
    assert record.state == State.CANCELLED and record.response is None, worker.log
    # The tool stopped waiting at its gate (still shut) when it saw the cancel: its task ended.
    outcome = wait_until(lambda: task_outcome(worker, record.id), what="the worker's task to end")
    assert outcome == "cancelled", worker.log
    elapsed = (record.finished_at - cancelled_at).total_seconds()
    print(f"\ncancel POSTed to the other process -> call ended in the worker: {elapsed:.3f} s")
    # Never answered: the stream resumed later on either process ends with nothing more.
    resumed = open_stream(client, b.url, last_event_id=last_id(call.received))
    assert ends(resumed) == [], worker.log


# (3) --------------------------------------------------------------------------------------------
def test_an_elicitation_from_the_worker_is_answered_through_the_other_process(deployment):
    (a, b), worker = deployment
    client = new_session(a.url, capabilities={"elicitation": {}})
    answers = []

    def answer_on_b(event: Event) -> None:
        request = event.message
        if request and request.get("method") == "elicitation/create":
            answers.append(client.respond(
                request["id"], {"action": "accept", "content": {"colour": "teal"}}, url=b.url))

    asking = {"name": "background_job", "arguments": {"steps": 1, "ask": True}}
    exchange = client.request("tools/call", asking, request_id=31, url=a.url, on_event=answer_on_b)
    [question] = exchange.server_requests  # on the call's own stream
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "Which colour?"
    assert [r.status_code for r in answers] == [202]
    assert exchange.response is not None, worker.log
    assert json.loads(exchange.response["result"]["content"][0]["text"]) == {
        "pid": worker.process.pid, "colour": "teal", "principal": None}


# (5) --------------------------------------------------------------------------------------------
def test_a_dropped_call_stream_resumed_on_the_other_process_gets_every_event_once(deployment, gate):
    (a, b), worker = deployment
    client = new_session(a.url)
    call = CallStream(client, a.url, 51, {"steps": 2, "gate": str(gate), "after_gate": 3})
    until_progress(call)
    call.drop()
    before = list(call.received)  # all the client got before the connection went

    resumed = open_stream(client, b.url, last_event_id=last_id(before))
    gate.touch()  # the rest of the call happens while the resumed stream is open
    after = ends(resumed)
    assert progress_of(before + after) == [1, 2, 3, 4, 5], worker.log
    assert progress_of(after)[-3:] == [3, 4, 5]
    assert all(e.id.startswith("post:i51/") for e in after if e.id is not None)
    [answer] = answers_to(before + after, 51)
    assert after[-1].message == answer, "the response must end the resumed stream"
    check_server_message(answer, client.revision, "tools/call")
    assert json.loads(answer["result"]["content"][0]["text"])["pid"] == worker.process.pid


# (9) --------------------------------------------------------------------------------------------
def test_deleting_the_session_cancels_its_call_in_the_worker(deployment, gate):
    (a, b), worker = deployment
    client = new_session(a.url)
    call = CallStream(client, a.url, 91, {"steps": 1, "gate": str(gate), "limit": NEVER})
    until_progress(call)

    response = client.delete(url=b.url)
    assert response.status_code == 200 and response.json() == {"success": True}
    ends(call)
    assert answers_to(call.received, 91) == [], worker.log
    record = wait_until(lambda: finished_call(client), what="the call to end")
    assert record.state == State.CANCELLED, f"{record.state} {record.error}\n{worker.log}"
    outcome = wait_until(lambda: task_outcome(worker, record.id), what="the worker's task to end")
    assert outcome == "cancelled", worker.log


# (4) --------------------------------------------------------------------------------------------
def test_a_worker_killed_mid_call_ends_the_call_with_an_error(gate):
    require_services()
    env = {"CELERY_BROKER_URL": redis_broker(6)}
    with cluster(2, redis_db=5, mcp_settings=SETTINGS, env=env, wait=False) as (a, _b), \
            worker_on(5, env) as worker:
        listening([a, _b])
        client = new_session(a.url)
        call = CallStream(client, a.url, 41, {"steps": 1, "gate": str(gate), "limit": NEVER})
        until_progress(call)
        assert call_of(client).state == State.RUNNING

        worker.kill()
        # Noticed once the worker's heartbeat lapses (3 heartbeats), then within one more.
        rest = ends(call)
        error = rest[-1].message
        assert error == {"jsonrpc": "2.0", "id": 41, "error": {"code": -32603, "message": REQUEST_STOPPED}}
        assert answers_to(call.received, 41) == [error], worker.log
        record = call_of(client)
        assert record.state == State.FAILED, record.state


# (6) --------------------------------------------------------------------------------------------
def test_a_call_whose_web_process_was_killed_is_resumed_on_the_other_process(gate):
    require_services()
    env = {"CELERY_BROKER_URL": redis_broker(8)}
    with cluster(2, redis_db=7, mcp_settings=SETTINGS, env=env, wait=False) as (a, b), \
            worker_on(7, env) as worker:
        listening([a, b])
        client = new_session(b.url)
        call = CallStream(client, a.url, 61, {"steps": 2, "gate": str(gate), "after_gate": 2})
        until_progress(call)

        a.kill()
        ends(call)  # its connection went with it
        before = list(call.received)
        gate.touch()  # the call goes on in the worker while no process holds its stream
        record = wait_until(lambda: finished_call(client), what="the call to end")
        assert record.state == State.COMPLETED, f"{record.state} {record.error}\n{worker.log}"

        resumed = open_stream(client, b.url, last_event_id=last_id(before))
        after = ends(resumed)
        assert progress_of(before + after) == [1, 2, 3, 4], worker.log
        assert progress_of(after)[-2:] == [3, 4]  # sent after the process died: missed, replayed
        [answer] = answers_to(before + after, 61)
        assert after[-1].message == answer
        check_server_message(answer, client.revision, "tools/call")
        assert json.loads(answer["result"]["content"][0]["text"])["pid"] == worker.process.pid


# (7) --------------------------------------------------------------------------------------------
def test_progress_from_a_worker_on_rabbitmq_reaches_the_client():
    require_services()
    require_rabbitmq()
    with rabbitmq_queue() as env, \
            cluster(2, redis_db=3, mcp_settings=SETTINGS, env=env, wait=False) as (a, b), \
            worker_on(3, env) as worker:
        listening([a, b])
        client = new_session(a.url)
        exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 3},
                                                 "_meta": {"progressToken": "p"}}, url=b.url)
        assert exchange.response is not None, worker.log
        result = json.loads(exchange.response["result"]["content"][0]["text"])
        assert result["pid"] == worker.process.pid
        assert progress_of(exchange.events) == [1, 2, 3]


def queued_call(client: Any, url: str, request_id: int, broker_db: int) -> CallStream:
    """A one-step background_job call left in the queue: no worker runs yet."""
    call = CallStream(client, url, request_id, {"steps": 1})
    with redis_client(broker_db) as broker:
        wait_until(lambda: broker.llen("celery") == 1, what="the call's task to be queued")
    assert call_of(client).state == State.QUEUED
    return call


# (8) --------------------------------------------------------------------------------------------
def test_a_call_cancelled_while_queued_never_runs():
    require_services()
    broker_db = 2
    env = {"CELERY_BROKER_URL": redis_broker(broker_db)}
    with cluster(2, redis_db=1, mcp_settings=SETTINGS, env=env) as (a, b):
        client = new_session(a.url)
        call = queued_call(client, a.url, 81, broker_db)

        cancel = client.notify("notifications/cancelled", {"requestId": 81}, url=b.url)
        assert cancel.status_code == 202, cancel.text
        ends(call)
        assert answers_to(call.received, 81) == []
        record = call_of(client)
        assert record.state == State.CANCELLED and record.started_at is None

        with worker_on(1, env) as worker:
            outcome = wait_until(lambda: task_outcome(worker, record.id), what="the worker to take the task")
            assert outcome.startswith("not run"), worker.log
        record.refresh_from_db()
        assert (record.state, record.started_at, record.worker) == (State.CANCELLED, None, "")
        # Its id is free again: no process holds the request any more.
        with redis_client(1) as redis:
            wait_until(lambda: not redis.exists(f"mcp:req:{client.session_id}:i81"),
                       what="the request's id to be released")
        assert client.request("ping", request_id=81, url=b.url).response == {
            "jsonrpc": "2.0", "id": 81, "result": {}}


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_call_queued_when_its_web_process_stops_runs_once_a_worker_takes_it(stop):
    """No queued call is lost with the web process that received it: it stops (SIGTERM, it
    drains; or SIGKILL) before any worker took the call; the client resumes the stream on the
    other process, and the worker that comes later runs the call once and answers there."""
    require_services()
    broker_db = 2
    env = {"CELERY_BROKER_URL": redis_broker(broker_db)}
    with cluster(2, redis_db=1, mcp_settings=SETTINGS, env=env) as (a, b):
        client = new_session(b.url)
        call = queued_call(client, a.url, 85, broker_db)
        # The client has an id to resume from (the stream's priming event) before the process stops.
        wait_until(lambda: any(event.id is not None for event in call.received), what="the stream's first id")

        a.process.send_signal(getattr(signal, stop))
        before = ends(call)
        a.process.wait(PATIENCE)
        assert answers_to(before, 85) == []
        resumed = open_stream(client, b.url, last_event_id=last_id(before))
        with worker_on(1, env) as worker:
            after = ends(resumed)
        [answer] = answers_to(after, 85)
        check_server_message(answer, client.revision, "tools/call")
        assert json.loads(answer["result"]["content"][0]["text"])["pid"] == worker.process.pid, worker.log
        record = call_of(client)
        assert (record.state, record.attempts) == (State.COMPLETED, 1)


# Warm shutdown ------------------------------------------------------------------------------------
def test_a_worker_told_to_stop_finishes_its_call_and_runs_none_twice(gate):
    """SIGTERM is Celery's warm shutdown: the call the worker runs finishes and its result reaches
    the client, the worker starts no other call, and the call queued behind it runs once, on the
    next worker (at most once: docs/production.md, "Rolling restarts and load balancers")."""
    require_services()
    env = {"CELERY_BROKER_URL": redis_broker(4)}
    with cluster(1, redis_db=3, mcp_settings=SETTINGS, env=env, wait=False) as (a,), \
            worker_on(3, env) as stopping:
        listening([a])
        client = new_session(a.url)
        first = CallStream(client, a.url, 91, {"steps": 1, "gate": str(gate), "after_gate": 1})
        until_progress(first)
        second = CallStream(client, a.url, 92, {"steps": 1})
        calls = ToolCall.objects.filter(session_id=client.session_id)
        queued = wait_until(lambda: calls.filter(request_id=92).first(), what="the second call's record")
        assert queued.state == State.QUEUED

        stopping.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "warm shutdown" in stopping.log.lower(), what="the worker's warm shutdown")
        gate.touch()
        ends(first)
        [answer] = answers_to(first.received, 91)
        assert json.loads(answer["result"]["content"][0]["text"])["pid"] == stopping.process.pid
        assert progress_of(first.received) == [1, 2]
        assert stopping.process.wait(PATIENCE) == 0, stopping.log
        queued.refresh_from_db()
        assert (queued.state, queued.started_at, queued.attempts) == (State.QUEUED, None, 0), stopping.log

        with worker_on(3, env) as taking_over:
            ends(second)
            [answer] = answers_to(second.received, 92)
            assert json.loads(answer["result"]["content"][0]["text"])["pid"] == taking_over.process.pid
        ran = [(call.state, call.attempts) for call in calls.order_by("created_at")]
        assert ran == [(State.COMPLETED, 1), (State.COMPLETED, 1)]
