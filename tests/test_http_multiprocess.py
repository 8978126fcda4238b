"""One session, two daphne processes: any request of any session on any process.

Two processes serve the demo project (plus tests.stdio_app) on PostgreSQL and Redis, as in
production; each test spreads one session's requests over both and checks that nothing depends
on which process got what. Needs PostgreSQL (DATABASE_URL) and Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from mcp_server.http.event_store import RedisEventStore, broadcast_stream
from mcp_server.http.runtime import runtime_group
from mcp_server.models import Session

from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    call_tool,
    cluster,
    ends,
    events_until,
    new_session,
    next_event,
    open_stream,
    post_checked,
    require_services,
    twin,
    wait_until,
)
from .http_harness import Event, HTTPClient, Listener, iter_events
from .waiting import PATIENCE, SLOW_STEPS
from .wire import check_client_message, check_server_message

REDIS_DB = 13
BOTH = pytest.mark.parametrize("revision", ["2025-11-25", "2024-11-05"])
LIST_CHANGED = "notifications/tools/list_changed"
UPDATED = "notifications/resources/updated"
_names = itertools.count(1)


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker):
    require_services()
    with cluster(2, redis_db=REDIS_DB, mcp_settings={"SERVER_TO_CLIENT_REQUEST_TIMEOUT": 20}) as servers:
        yield servers


@pytest.fixture
def urls(pair, transactional_db):
    """The URLs of the two processes (the database is emptied after each test)."""
    return pair[0].url, pair[1].url


@pytest.fixture
def background():
    """Run a blocking call (a POST read to its end) on a thread; ``.result(timeout)`` bounds it."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def define_tool(client: HTTPClient, url: str) -> str:
    """A list change made through the process at ``url`` (its own registry gains a tool)."""
    name = f"extra_{next(_names)}"
    assert call_tool(client, url, "define_extra_tool", {"name": name}) == f"defined {name}"
    return name


def methods_of(events: list[Event]) -> list[str]:
    return [e.message.get("method") for e in events]


# (1) --------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.feature("HTTP-09", "HTTP-15")
def test_a_session_initialized_on_one_process_is_served_by_the_other(urls, revision):
    a, b = urls
    client = HTTPClient(a, b, revision=revision)
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    response = post_checked(client, message, a)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    check_server_message(response.json(), revision, "initialize")
    client.session_id = response.headers["mcp-session-id"]
    assert uuid.UUID(client.session_id)
    # The session is a database row, not something in process a's memory.
    assert Session.objects.filter(pk=client.session_id, protocol_version=revision).exists()

    assert client.notify("notifications/initialized", url=b).status_code == 202
    assert client.notify("notifications/cancelled", {"requestId": 99}, url=a).status_code == 202
    for url in (b, a, b):
        exchange = client.request("tools/list", url=url)
        assert exchange.status == 200 and exchange.headers["content-type"] == "text/event-stream"
        assert {"echo", "add", "slow_count"} <= {t["name"] for t in exchange.response["result"]["tools"]}
        if revision >= "2025-11-25":  # a priming event, so the client may resume this stream
            assert exchange.events[0].data == "" and exchange.events[0].id.endswith("/0")
    exchange = client.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, url=b)
    assert json.loads(exchange.response["result"]["content"][0]["text"]) == {"sum": 5}
    exchange = client.request("resources/read", {"uri": "demo://readme"}, url=a)
    assert exchange.response["result"]["contents"][0]["uri"] == "demo://readme"
    assert client.request("ping", url=b).response["result"] == {}


# (2) --------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.feature("NOTIF-01", "HTTP-16")
def test_a_list_change_made_through_one_process_reaches_get_streams_on_either(urls, revision):
    a, b = urls
    first, second = new_session(a, revision), new_session(b, revision)
    on_b, on_a = first.listen(url=b), second.listen(url=a)
    assert (on_b.status, on_a.status) == (200, 200)
    # One listening stream per session, whichever process is asked for another.
    for url in (a, b):
        response = httpx.get(url, headers={**first.headers(accept="text/event-stream")}, timeout=PATIENCE)
        assert response.status_code == 409
        check_server_message(response.json(), revision)

    define_tool(first, a)
    define_tool(second, b)
    for listener in (on_b, on_a):
        events = [next_event(listener), next_event(listener)]
        assert methods_of(events) == [LIST_CHANGED, LIST_CHANGED]
        assert events[0].id.startswith("get/") and len({e.id for e in events}) == 2  # not one twice
    on_a.close()
    on_b.close()


# (3) --------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.feature("CAN-01", "CAN-03", "HTTP-15")
def test_slow_count_on_one_process_is_cancelled_by_a_notification_posted_to_the_other(urls, revision):
    a, b = urls
    client = new_session(a, revision)
    cancels = []

    def cancel_at_first_progress(event: Event) -> None:
        if event.message and event.message.get("method") == "notifications/progress" and not cancels:
            cancels.append(client.notify("notifications/cancelled",
                                         {"requestId": 42, "reason": "changed my mind"}, url=b))

    exchange = client.request(
        "tools/call", {"name": "slow_count", "arguments": {"count": SLOW_STEPS, "delay": 0.1},
                       "_meta": {"progressToken": "count"}},
        request_id=42, url=a, on_event=cancel_at_first_progress)
    assert [r.status_code for r in cancels] == [202]
    assert exchange.response is None  # a cancelled request is never answered
    progress = [n["params"]["progress"] for n in exchange.notifications]
    assert 1 <= len(progress) < SLOW_STEPS and progress == list(range(1, len(progress) + 1))
    # The id is free again, on either process.
    assert call_tool(client, b, "echo", {"message": "again"}, request_id=42) == "again"


# (4) --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])
@pytest.mark.feature("HTTP-15", "HTTP-25", "ELI-01")
def test_an_elicitation_from_a_tool_on_one_process_is_answered_by_a_post_to_the_other(urls, revision):
    a, b = urls
    client = new_session(a, revision, capabilities={"elicitation": {}})
    stranger = new_session(b, revision, capabilities={"elicitation": {}})
    answers = []

    def answer_on_b(event: Event) -> None:
        request = event.message
        if request and request.get("method") == "elicitation/create":
            # The same id from another session is accepted but answers nothing.
            answers.append(stranger.respond(request["id"], {"action": "decline"}, url=b))
            answers.append(client.respond(
                request["id"], {"action": "accept", "content": {"confirm": True, "priority": "high"}},
                url=b))

    exchange = client.request("tools/call", {"name": "confirm_action", "arguments": {"action": "ship"}},
                              url=a, on_event=answer_on_b)
    [request] = exchange.server_requests  # on the POST's own stream
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Do you want to ship?"
    assert [r.status_code for r in answers] == [202, 202]
    assert exchange.response["result"]["content"][0]["text"] == "Done: ship (priority high)"


# (5) --------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.feature("NOTIF-01", "NOTIF-03")
def test_a_dropped_get_stream_resumed_on_the_other_process_gets_every_missed_event_once(urls, revision):
    a, b = urls
    client = new_session(a, revision)
    assert client.request("resources/subscribe", {"uri": "demo://readme"}, url=b).response["result"] == {}
    listener = open_stream(client, a)
    # (Events sent by one process reach a stream in the order it sent them.)
    define_tool(client, b)
    call_tool(client, b, "touch_resource", {"uri": "demo://readme"})
    seen = events_until(listener, UPDATED)
    assert methods_of(seen) == [LIST_CHANGED, UPDATED]
    listener.close()  # the connection drops

    # Missed while no stream is open: broadcasts and this session's own events, from both processes
    # (each stored before the next is sent, so they have an order).
    for count, send in enumerate([
        lambda: define_tool(client, a),
        lambda: call_tool(client, b, "touch_resource", {"uri": "demo://readme"}),
        lambda: define_tool(client, b),
        lambda: call_tool(client, a, "touch_resource", {"uri": "demo://readme"}),
    ], start=1):
        send()
        wait_until(lambda n=count: _stored_after(client.session_id, _sequence(seen[-1])) == n,
                   what="the event to be stored")

    resumed = open_stream(client, b, last_event_id=seen[-1].id)
    missed = [next_event(resumed) for _ in range(4)]
    assert methods_of(missed) == [LIST_CHANGED, UPDATED, LIST_CHANGED, UPDATED]
    # Live events follow on the resumed stream; then a marker ends what we read.
    client.request("resources/subscribe", {"uri": "demo://marker"}, url=b)
    define_tool(client, a)
    call_tool(client, a, "touch_resource", {"uri": "demo://marker"})
    rest = [next_event(resumed), next_event(resumed)]
    assert methods_of(rest) == [LIST_CHANGED, UPDATED]
    assert rest[-1].message["params"]["uri"] == "demo://marker"
    everything = seen + missed + rest
    sequences = [_sequence(e) for e in everything]
    assert all(e.id.startswith("get/") for e in everything)
    assert sequences == sorted(set(sequences))  # in order, and none twice
    resumed.close()


# (6) --------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.feature("HTTP-17", "HTTP-11")
def test_a_delete_on_one_process_ends_the_sessions_streams_on_the_other(urls, revision, background):
    a, b = urls
    client = new_session(a, revision)
    listener = open_stream(client, b)
    runner = twin(client, b)
    started = []
    call = background.submit(
        runner.request, "tools/call", {"name": "slow_count", "arguments": {"count": SLOW_STEPS, "delay": 0.1},
                                       "_meta": {"progressToken": "w"}},
        request_id=7, url=b, on_event=started.append)
    # The call runs on b before the session is deleted on a.
    _wait_for(lambda: any(e.message for e in started), "the call on b to report progress")

    response = client.delete(url=a)
    assert response.status_code == 200 and response.json() == {"success": True}
    _ended(listener)
    exchange = call.result(timeout=PATIENCE)  # the request stream on b ended too, unanswered
    assert exchange.response is None
    assert not Session.objects.filter(pk=client.session_id).exists()

    # Gone everywhere: requests, notifications, responses, GET and DELETE all get 404.
    for url in (a, b):
        request = {"jsonrpc": "2.0", "id": 8, "method": "ping"}
        for message in (request, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": "x", "result": {}}):
            response = post_checked(client, message, url)
            assert response.status_code == 404 and "Session not found" in response.json()["error"]["message"]
        get = httpx.get(url, headers=client.headers(accept="text/event-stream"), timeout=PATIENCE)
        delete = client.delete(url=url)
        for response in (get, delete):
            assert response.status_code == 404
            check_server_message(response.json(), revision)


# More that crosses processes --------------------------------------------------------------------
@BOTH
@pytest.mark.feature("NOTIF-03")
def test_notify_resources_updated_reaches_a_subscriber_whose_stream_is_on_the_other_process(urls, revision):
    a, b = urls
    subscriber, other = new_session(a, revision), new_session(b, revision)
    assert subscriber.request("resources/subscribe", {"uri": "demo://readme"}, url=a).response["result"] == {}
    subscriber_stream, other_stream = open_stream(subscriber, b), open_stream(other, a)

    assert call_tool(other, a, "touch_resource", {"uri": "demo://readme"}) == "sent=True"
    event = next_event(subscriber_stream)
    assert event.message == {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": "demo://readme"}}
    define_tool(other, a)  # a marker every session gets, sent after it by the same process
    assert methods_of([next_event(subscriber_stream)]) == [LIST_CHANGED]
    assert methods_of([next_event(other_stream)]) == [LIST_CHANGED]  # it was not subscribed

    unsubscribed = subscriber.request("resources/unsubscribe", {"uri": "demo://readme"}, url=b)
    assert unsubscribed.response["result"] == {}
    call_tool(subscriber, a, "touch_resource", {"uri": "demo://readme"})
    define_tool(other, a)
    assert methods_of([next_event(subscriber_stream)]) == [LIST_CHANGED]
    subscriber_stream.close()
    other_stream.close()


@BOTH
@pytest.mark.feature("LOG-02", "LOG-04", "NOTIF-02")
def test_a_server_wide_log_message_reaches_each_session_at_its_own_level(urls, revision):
    a, b = urls
    levels = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    warning, error, silent = (new_session(a, revision), new_session(b, revision),
                              new_session(a, revision))
    assert warning.request("logging/setLevel", {"level": "warning"}, url=b).response["result"] == {}
    assert error.request("logging/setLevel", {"level": "error"}, url=a).response["result"] == {}
    streams = {"warning": open_stream(warning, a), "error": open_stream(error, b),
               "silent": open_stream(silent, b)}

    exchange = warning.request("tools/call", {"name": "log_every_level", "arguments": {}}, url=b)
    # The session's own messages ride its request's stream, at its level.
    on_post = [n["params"] for n in exchange.notifications]
    assert [p["level"] for p in on_post] == levels[3:]
    assert all(p["logger"] == "stdio_app" for p in on_post)
    # A marker after the log messages: sent from the same process, so it leaves after them.
    define_tool(silent, b)

    expected = {"warning": levels[3:], "error": levels[4:], "silent": []}
    for name, listener in streams.items():
        events = events_until(listener, LIST_CHANGED)
        logged = [e.message["params"] for e in events[:-1]]
        assert [p["data"] for p in logged] == [f"server-wide {level}" for level in expected[name]], name
        assert [p["level"] for p in logged] == expected[name]
        listener.close()


@BOTH
@pytest.mark.feature("HTTP-13", "CORE-14")
def test_a_request_id_in_flight_on_one_process_is_refused_on_the_other(urls, revision, background):
    a, b = urls
    client = new_session(a, revision, capabilities={"roots": {}})
    runner = twin(client, a)
    # The call stays in flight until the test answers the roots/list it sends to the client.
    asked, release = threading.Event(), threading.Event()
    runner.answers["roots/list"] = lambda params: (asked.set(), release.wait(PATIENCE), {"roots": []})[-1]
    asking = {"name": "ask_client", "arguments": {"request": "roots"}}
    call = background.submit(runner.request, "tools/call", asking, request_id="job-1", url=a)
    _wait_for(lambda: asked.is_set() or call.done(), "the call on a to ask the client")
    assert asked.is_set(), call.result().response

    message = {"jsonrpc": "2.0", "id": "job-1", "method": "ping"}
    response = post_checked(client, message, b)
    assert response.status_code == 409
    assert response.json()["id"] == "job-1" and response.json()["error"]["code"] == -32600
    release.set()
    exchange = call.result(timeout=PATIENCE)  # the first request completes normally
    assert json.loads(exchange.response["result"]["content"][0]["text"]) == {"result": {"roots": []}}
    assert client.request("ping", request_id="job-1", url=b).response["result"] == {}


@pytest.mark.feature("HTTP-14")
def test_a_post_stream_dropped_midway_is_resumed_on_the_other_process(urls):
    a, b = urls
    client = new_session(a, "2025-11-25")
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow_count", "arguments": {"count": 6, "delay": 0.15}, "_meta": {"progressToken": "t"}}}
    check_client_message(message, client.revision)
    before = []
    with httpx.Client(timeout=PATIENCE) as http, http.stream(
            "POST", a, content=json.dumps(message), headers=client.headers()) as response:
        assert response.headers["content-type"] == "text/event-stream"
        for event in iter_events(response):
            if event.message is not None:
                check_server_message(event.message, client.revision)
            before.append(event)
            if event.message and event.message.get("method") == "notifications/progress":
                break  # and the connection drops
    assert before[0].id == "post:i5/0" and before[0].data == ""

    resumed = client.listen(last_event_id=before[-1].id, url=b)
    assert resumed.status == 200
    after = _ended(resumed)
    messages = [e.message for e in before[1:] + after]
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3, 4, 5, 6]  # each once
    assert messages[-1] == {"jsonrpc": "2.0", "id": 5, "result": messages[-1]["result"]}
    assert messages[-1]["result"]["content"][0]["text"] == "Counted to 6"
    check_server_message(messages[-1], client.revision, "tools/call")
    assert all(e.id.startswith("post:i5/") for e in after)


# Helpers ----------------------------------------------------------------------------------------
def _sequence(event: Event) -> int:
    return int(event.id.rsplit("/", 1)[1])


def _stored_after(session_id: str, sequence: int) -> int:
    """How many events of the session's GET stream (its own and broadcasts) are stored after one,
    in the event store of the processes (Redis, as they have REDIS_URL)."""
    store = RedisEventStore(f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}", retention=3600)

    async def count() -> int:
        try:
            # The processes serve the demo server: its broadcasts are stored under its group.
            broadcasts = broadcast_stream(runtime_group(settings.MCP_SERVER["NAME"]))
            return len(await store.replay(session_id, "get", sequence, broadcasts=broadcasts))
        finally:
            store.clients.get().close()

    return async_to_sync(count)()


def _wait_for(condition, what: str) -> None:
    wait_until(condition, what=what)


def _ended(listener: Listener, timeout: float = PATIENCE) -> list[Event]:
    """The events a stream still sent before it ended (within ``timeout``)."""
    events = [e for e in ends(listener, timeout) if e.message is not None]
    listener.close()
    return events
