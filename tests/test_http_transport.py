"""The Streamable HTTP endpoint of the demo project (``/mcp``), served by one daphne process.

One daphne process serves the whole module, on the embedded default (SQLite or PostgreSQL with the
in-memory channel layer), with the demo's tools, ``tests.stdio_app`` and ``tests.http_hooks``.
Every message is checked against the schema of the negotiated revision (tests/wire.py); the
header-level tests at the end call the ASGI application in process, as daphne's HTTP/1.1 writer
re-capitalizes header names on the wire.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import httpx
import pytest

from mcp_server import Server, ServerContext
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import Session

from .http_harness import iter_events
from .http_support import (
    HOOKS,
    Client,
    call_asgi,
    error_of,
    in_thread,
    log_in,
    messages,
    post_headers,
    raw_http,
    running,
    stream_ended,
    tool_text,
    wait_until,
)
from .waiting import PATIENCE, SLOW_STEPS, eventually

REVISIONS = ["2025-11-25", "2024-11-05"]
SAMPLING_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "test-model",
                   "stopReason": "endTurn"}


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings={**HOOKS, "KEEPALIVE_INTERVAL": 1}) as server:
        yield server


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """Data the daphne process writes is committed: every test runs on a transactional database."""


def body(method: str = "ping", request_id: object = 1, **params: object) -> dict:
    message: dict = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        message["params"] = params
    return message


def flush(client: Client, *listeners) -> None:
    """Broadcast tools/list_changed and wait for it on every listener: whatever a listener got
    before it is then in its queue, so an empty queue proves that nothing else came."""
    assert tool_text(client.tool("broadcast_list_changed")) == "sent=True"
    for listener in listeners:
        assert messages(listener, 1) == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]


# HTTP-01 ------------------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-01")
def test_one_url_serves_post_get_and_delete(daphne):
    client = Client(daphne.url)
    client.initialize()
    assert client.request("ping").response["result"] == {}
    listener = client.listen()
    assert listener.status == 200
    listener.close()
    assert client.delete().json() == {"success": True}


@pytest.mark.feature("HTTP-01")
@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS"])
def test_other_methods_get_405(daphne, method):
    client = Client(daphne.url)
    client.initialize()
    response = client.http.request(method, daphne.url, headers=client.headers(), content=b"{}")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST, DELETE"
    assert error_of(response)["code"] == -32600


# HTTP-03, HTTP-04 -----------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-03")
@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html", ""])
def test_post_needs_to_accept_json_and_sse(daphne, accept):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_json(body(), {"accept": accept})
    assert response.status_code == 406
    assert "Not Acceptable" in error_of(response)["message"]


@pytest.mark.feature("HTTP-03")
@pytest.mark.parametrize("accept", ["application/json, text/event-stream",
                                    "text/event-stream;q=0.9, application/json;q=1", "*/*"])
def test_post_accepting_both_is_served(daphne, accept):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_json(body(), {"accept": accept})
    assert response.status_code == 200


@pytest.mark.feature("HTTP-03")
def test_get_needs_to_accept_sse(daphne):
    client = Client(daphne.url)
    client.initialize()
    response = client.get({"accept": "application/json"})
    assert response.status_code == 406
    assert "text/event-stream" in error_of(response)["message"]


@pytest.mark.feature("HTTP-04")
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_post_body_must_be_json(daphne, content_type):
    client = Client(daphne.url)
    client.initialize()
    headers = client.headers()
    if content_type is None:
        del headers["content-type"]
    else:
        headers["content-type"] = content_type
    response = client.http.post(daphne.url, headers=headers, content=json.dumps(body()))
    assert response.status_code == 415
    assert "Unsupported Media Type" in error_of(response)["message"]


@pytest.mark.feature("HTTP-04")
def test_json_with_parameters_is_json(daphne):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_json(body(), {"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200


# HTTP-06, HTTP-07, HTTP-08 --------------------------------------------------------------------------
def nested(depth: int) -> str:
    """A ping whose text nests objects and arrays exactly ``depth`` levels deep."""
    inner = depth - 3  # the message, its params and their _meta
    return ('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"deep":'
            + "[" * inner + "]" * inner + "}}}")


@pytest.mark.feature("HTTP-06")
def test_json_nested_deeper_than_64_levels_is_refused(daphne):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_raw(nested(65))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32700 and "64" in error["message"]
    assert client.post_raw(nested(64)).status_code == 200


@pytest.mark.feature("HTTP-07")
@pytest.mark.parametrize("text", [b'{"jsonrpc": "2.0", "id": 1, "method": ', b"not json", b"\xff\xfe{}"])
def test_invalid_json_gets_400_parse_error(daphne, text):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_raw(text)
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert error_of(response) == {"code": -32700, "message": "Parse error: Invalid JSON"}


@pytest.mark.feature("HTTP-08")
def test_a_batch_is_refused(daphne):
    client = Client(daphne.url)
    client.initialize()
    response = client.post_json([body(request_id=1), body(request_id=2)])
    assert response.status_code == 400
    assert error_of(response) == {"code": -32600,
                                  "message": "JSON-RPC body must be a single request object"}


# HTTP-09, HTTP-10, HTTP-11, HTTP-12 -----------------------------------------------------------------
@pytest.mark.feature("HTTP-09")
@pytest.mark.parametrize("revision", REVISIONS)
def test_initialize_opens_a_session_named_by_a_random_uuid(daphne, revision):
    client = Client(daphne.url, revision=revision)
    response = client.post_json({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    session_id = response.headers["mcp-session-id"]
    assert uuid.UUID(session_id).version == 4
    assert response.json()["result"]["protocolVersion"] == revision
    row = Session.objects.get(pk=session_id)
    assert (row.protocol_version, row.client_info) == (revision, {"name": "c", "version": "1"})
    again = Client(daphne.url, revision=revision)
    again.initialize()
    assert again.session_id != session_id


@pytest.mark.feature("HTTP-09")
def test_a_failed_initialize_keeps_no_session(daphne):
    before = Session.objects.count()
    client = Client(daphne.url)
    response = client.post_json({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"protocolVersion": "2025-11-25", "capabilities": {}}})
    assert "mcp-session-id" not in response.headers
    assert error_of(response)["code"] == -32602
    assert Session.objects.count() == before


@pytest.mark.feature("HTTP-10")
def test_a_session_id_is_required_after_initialize(daphne):
    client = Client(daphne.url)
    for message in (body(), {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": "s2c", "result": {}}):
        response = client.post_json(message)
        assert response.status_code == 400
        assert "Missing session ID" in error_of(response)["message"]
    for response in (client.get(), client.http.delete(daphne.url, headers=client.headers())):
        assert response.status_code == 400
        assert "Missing session ID" in error_of(response)["message"]


@pytest.mark.feature("HTTP-11", "HTTP-33")
@pytest.mark.parametrize("session_id", ["0" * 32, uuid.uuid4().hex, "x" * 65])
def test_an_unknown_session_gets_404(daphne, session_id):
    client = Client(daphne.url)
    client.session_id = session_id
    replies = [
        client.post_json(body()),
        client.post_json({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        client.post_json({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 1}}),
        client.post_json({"jsonrpc": "2.0", "id": "s2c", "result": {}}),
        client.get(),
        client.delete(),
    ]
    for response in replies:
        assert response.status_code == 404, response.text
        assert error_of(response) == {"code": -32600, "message": "Session not found"}


@pytest.mark.feature("HTTP-11")
def test_a_deleted_session_is_gone_for_every_verb(daphne):
    client = Client(daphne.url)
    client.initialize()
    assert client.delete().status_code == 200
    for response in (client.post_json(body()), client.notify("notifications/initialized"),
                     client.get(), client.delete()):
        assert response.status_code == 404


@pytest.mark.feature("HTTP-12")
def test_the_protocol_version_header(daphne):
    client = Client(daphne.url)
    client.initialize()
    # Absent: the default (2025-03-26) is assumed, and the request is served.
    headers = client.headers()
    del headers["mcp-protocol-version"]
    assert client.http.post(daphne.url, headers=headers, content=json.dumps(body())).status_code == 200
    for unsupported in ("1999-01-01", "2026-07-28", "latest"):
        response = client.post_json(body(), {"mcp-protocol-version": unsupported})
        assert response.status_code == 400
        error = error_of(response)
        assert error["data"] == {"supported": ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                                 "requested": unsupported}
        assert "2025-11-25" in error["message"]
        assert client.get({"mcp-protocol-version": unsupported}).status_code == 400
    # A request refused once its id was claimed lets go of it: the same id is served next.
    assert client.post_json(body()).status_code == 200


@pytest.mark.feature("HTTP-12")
def test_the_protocol_version_header_is_ignored_on_initialize(daphne):
    client = Client(daphne.url, headers={"mcp-protocol-version": "1999-01-01"})
    client.initialize()
    assert client.session_id


# HTTP-13, HTTP-14 -----------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-13")
def test_a_request_id_in_flight_in_the_session_gets_409(daphne):
    client = Client(daphne.url)
    client.initialize(capabilities={"roots": {}})
    # The first call stays in flight until the test answers the roots/list it sends to the client.
    asked, release = threading.Event(), threading.Event()
    client.answers["roots/list"] = lambda params: (asked.set(), release.wait(PATIENCE), {"roots": []})[-1]
    first = in_thread(client.request, "tools/call", {"name": "ask_client", "arguments": {"request": "roots"}},
                      request_id=7)
    wait_until(lambda: asked.is_set() or first.done(), what="the first call to ask the client")
    assert asked.is_set(), first.result().response
    second = client.request("tools/call", {"name": "sleepy", "arguments": {"seconds": 0}}, request_id=7)
    assert second.status == 409
    assert second.response["error"]["code"] == -32600 and "in flight" in second.response["error"]["message"]
    # Another session, or the id "7" (a string), is another request.
    other = Client(daphne.url)
    other.initialize()
    assert other.request("ping", request_id=7).response["result"] == {}
    assert client.request("ping", request_id="7").response["result"] == {}
    release.set()
    assert json.loads(tool_text(first.result(PATIENCE))) == {"result": {"roots": []}}
    assert client.request("ping", request_id=7).response["result"] == {}


@pytest.mark.feature("HTTP-14", "PROG-03", "NOTIF-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_request_is_answered_on_its_own_sse_stream(daphne, revision):
    client = Client(daphne.url, revision=revision)
    client.initialize()
    exchange = client.request("tools/call", {"name": "slow_count", "arguments": {"count": 3, "delay": 0.01},
                                             "_meta": {"progressToken": "count"}}, request_id=41)
    assert exchange.status == 200
    assert exchange.headers["content-type"] == "text/event-stream"
    events = exchange.events
    if revision >= "2025-11-25":
        # A priming event with an id and no data first, so the client can resume (SEP-1699).
        assert (events[0].id, events[0].data) == ("post:i41/0", "")
        events = events[1:]
    assert all(event.id.startswith("post:i41/") for event in events)
    sent = [event.message for event in events]
    assert [m.get("method") for m in sent] == ["notifications/progress"] * 3 + [None]
    assert [m["params"]["progress"] for m in sent[:3]] == [1, 2, 3]
    assert {m["params"]["progressToken"] for m in sent[:3]} == {"count"}
    assert sent[-1]["id"] == 41 and sent[-1]["result"]["content"][0]["text"] == "Counted to 3"


@pytest.mark.feature("HTTP-14")
def test_a_request_without_notifications_still_streams_its_response(daphne):
    client = Client(daphne.url)
    client.initialize()
    exchange = client.request("tools/list")
    assert exchange.headers["content-type"] == "text/event-stream"
    assert [e.message for e in exchange.events if e.message] == [exchange.response]
    assert "echo" in {tool["name"] for tool in exchange.response["result"]["tools"]}


# HTTP-15, NOTIF-05 ----------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-15", "NOTIF-05", "LIFE-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_client_notifications_get_202_and_no_body(daphne, revision):
    client = Client(daphne.url, revision=revision)
    client.initialize(capabilities={"roots": {"listChanged": True}})
    for method, params in [("notifications/initialized", None),
                           ("notifications/progress", {"progressToken": "t", "progress": 1}),
                           ("notifications/roots/list_changed", None),
                           ("notifications/cancelled", {"requestId": 12345, "reason": "never mind"})]:
        response = client.notify(method, params)
        assert (response.status_code, response.content) == (202, b""), method


@pytest.mark.feature("HTTP-15", "SMP-03")
def test_a_client_answer_counts_only_in_its_own_session(daphne):
    client = Client(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    intruder = Client(daphne.url)
    intruder.initialize(capabilities={"elicitation": {}})
    replies = []

    def on_event(event):
        message = event.message
        if message and message.get("method") == "elicitation/create":
            # Another session answers this request first: the answer is taken (202) but ignored.
            replies.append(intruder.respond(message["id"], {"action": "accept",
                                                             "content": {"colour": "from the intruder"}}))

    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {"colour": "red"}}
    exchange = client.request("tools/call", {"name": "ask_client", "arguments": {"request": "elicit"}},
                              on_event=on_event)
    assert [(r.status_code, r.content) for r in replies] == [(202, b"")]
    assert json.loads(tool_text(exchange)) == {"result": {"action": "accept", "content": {"colour": "red"}}}


# HTTP-16 --------------------------------------------------------------------------------------------
def read_comments(client: Client, count: int) -> list[str]:
    """Open a GET stream and read its first ``count`` SSE comment lines."""
    headers = client.headers(accept="text/event-stream")
    headers.pop("content-type")
    comments = []
    with client.http.stream("GET", next(client.urls), headers=headers,
                            timeout=httpx.Timeout(PATIENCE)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for line in response.iter_lines():
            if line.startswith(":"):
                comments.append(line)
                if len(comments) == count:
                    return comments
    raise AssertionError(f"the stream ended after {comments}")


@pytest.mark.feature("HTTP-16", "NOTIF-06")
def test_one_listening_stream_per_session_kept_alive_and_freed_when_dropped(daphne):
    client = Client(daphne.url)
    client.initialize()
    listener = client.listen()
    assert listener.status == 200
    second = client.get()
    assert second.status_code == 409
    assert error_of(second)["code"] == -32600
    # Another session has its own stream.
    other = Client(daphne.url)
    other.initialize()
    other_listener = other.listen()
    assert other_listener.status == 200
    other_listener.close()
    # The client drops its stream: the server notices and frees the session's stream.
    listener.close()
    # Keepalive comments (every KEEPALIVE_INTERVAL = 1 s here; 30 s by default) on the new stream.
    comments = wait_until(lambda: _try_read_comments(client, 3))
    assert comments[0] == ": stream open" and comments[1:] == [": keepalive", ": keepalive"]


def _try_read_comments(client: Client, count: int) -> list[str] | None:
    try:
        return read_comments(client, count)
    except AssertionError:
        return None  # still held by the stream just dropped (409)


# HTTP-17 --------------------------------------------------------------------------------------------
@pytest.mark.feature("HTTP-17")
def test_delete_ends_the_session_and_closes_its_streams(daphne):
    client = Client(daphne.url)
    client.initialize()
    listener = client.listen()
    counting = threading.Event()
    in_flight = in_thread(client.request, "tools/call", {
        "name": "slow_count", "arguments": {"count": SLOW_STEPS, "delay": 0.1},
        "_meta": {"progressToken": 1}},
        on_event=lambda event: event.message and counting.set())
    assert counting.wait(PATIENCE)
    response = client.delete()
    assert (response.status_code, response.json()) == (200, {"success": True})
    assert response.headers["content-type"] == "application/json"
    assert [e.message for e in stream_ended(listener) if e.message] == []
    exchange = in_flight.result(PATIENCE)
    # The request was stopped: its stream ends with no response.
    assert exchange.response is None
    assert len(exchange.notifications) < SLOW_STEPS
    assert not Session.objects.filter(pk=client.session_id).exists()
    assert client.request("ping").status == 404


# HTTP-24, HTTP-25, SMP-03 ---------------------------------------------------------------------------
@pytest.mark.feature("HTTP-25", "SMP-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_sampling_rides_the_stream_of_the_request_that_asked(daphne, revision):
    client = Client(daphne.url, revision=revision)
    client.initialize(capabilities={"sampling": {}})
    listener = client.listen()
    client.answers["sampling/createMessage"] = lambda params: SAMPLING_ANSWER
    exchange = client.request("tools/call", {"name": "ask_client", "arguments": {"request": "sample"}})
    [request] = exchange.server_requests
    assert request["method"] == "sampling/createMessage"
    assert request["params"]["messages"][0]["content"]["text"] == "What is 2 + 2?"
    assert json.loads(tool_text(exchange)) == {"result": SAMPLING_ANSWER}
    flush(client, listener)  # nothing reached the listening stream before this
    listener.close()


@pytest.mark.feature("HTTP-25")
def test_elicitation_rides_the_stream_of_the_request_that_asked(daphne):
    client = Client(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    listener = client.listen()
    client.answers["elicitation/create"] = lambda params: {"action": "accept",
                                                           "content": {"confirm": True, "priority": "high"}}
    exchange = client.tool("confirm_action", {"action": "deploy"})
    assert [r["method"] for r in exchange.server_requests] == ["elicitation/create"]
    # The request's event is on this POST's stream, after the priming event.
    assert exchange.events[0].data == ""
    assert exchange.events[1].id.startswith(exchange.events[0].id.rsplit("/", 1)[0] + "/")
    assert tool_text(exchange) == "Done: deploy (priority high)"
    flush(client, listener)
    listener.close()


@pytest.mark.feature("HTTP-25")
def test_a_request_tied_to_no_request_goes_on_the_listening_stream_with_a_warning(daphne):
    client = Client(daphne.url)
    client.initialize(capabilities={"roots": {}})
    listener = client.listen()
    call = in_thread(client.tool, "roots_without_request")
    [request] = messages(listener, 1)
    assert request["method"] == "roots/list"
    roots = {"roots": [{"uri": "file:///work", "name": "work"}]}
    assert client.respond(request["id"], roots).status_code == 202
    exchange = call.result(PATIENCE)
    assert exchange.server_requests == []
    assert json.loads(tool_text(exchange)) == {"warned": True, "result": roots}
    listener.close()


@pytest.mark.feature("HTTP-24", "CAN-10")
def test_an_unanswered_request_times_out_and_is_cancelled_on_the_same_stream(daphne):
    client = Client(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    exchange = client.tool("ask_client", {"request": "elicit", "timeout": 0.3})
    [request] = exchange.server_requests
    assert exchange.notifications == [{"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": request["id"], "reason": "timed out"}}]
    error = json.loads(tool_text(exchange))["error"]
    assert error["code"] == -32001 and error["type"] == "RequestTimeoutError"


@pytest.mark.feature("HTTP-24")
def test_the_default_server_to_client_timeout_is_600_seconds():
    from mcp_server.site import build_transport

    assert StreamableHTTPTransport(Server("t")).options.server_to_client_request_timeout == 600
    assert build_transport(Server("t")).options.server_to_client_request_timeout == 600


# Logging and progress: who gets what ----------------------------------------------------------------
@pytest.mark.feature("LOG-04", "NOTIF-02")
def test_session_logs_ride_the_request_stream_and_server_logs_every_listening_stream(daphne):
    strict, chatty, silent = Client(daphne.url), Client(daphne.url), Client(daphne.url)
    for client, level in ((strict, "error"), (chatty, "warning"), (silent, None)):
        client.initialize()
        if level:
            assert client.request("logging/setLevel", {"level": level}).response["result"] == {}
    listeners = [client.listen() for client in (strict, chatty, silent)]
    exchange = strict.tool("log_every_level")
    # The session's own messages: on its request's stream, at its level.
    assert json.loads(tool_text(exchange))["session"] == ["error", "critical", "alert", "emergency"]
    assert [(n["params"]["level"], n["params"]["logger"]) for n in exchange.notifications] == [
        (level, "stdio_app") for level in ("error", "critical", "alert", "emergency")]
    # Server-wide messages: on every session's listening stream, at that session's level.
    expected = {0: ["error", "critical", "alert", "emergency"],
                1: ["warning", "error", "critical", "alert", "emergency"]}
    for index, count in ((0, 4), (1, 5)):
        got = messages(listeners[index], count)
        wanted = sorted(f"server-wide {level}" for level in expected[index])
        assert sorted(m["params"]["data"] for m in got) == wanted
    flush(strict, *listeners)  # no more than that, on any of them
    for listener in listeners:
        listener.close()


@pytest.mark.feature("PROG-03", "NOTIF-02")
def test_progress_reaches_only_the_stream_of_the_request(daphne):
    client, other = Client(daphne.url), Client(daphne.url)
    client.initialize()
    other.initialize()
    listeners = [client.listen(), other.listen()]
    exchange = client.tool("slow_count", {"count": 2, "delay": 0.01}, progressToken="mine")
    assert [n["params"]["progress"] for n in exchange.notifications] == [1, 2]
    flush(client, *listeners)
    for listener in listeners:
        listener.close()


# Broadcasts and standalone notifications ------------------------------------------------------------
@pytest.mark.feature("NOTIF-01")
def test_list_changed_reaches_every_sessions_listening_stream(daphne):
    clients = [Client(daphne.url, revision=revision) for revision in (*REVISIONS, "2025-06-18")]
    for client in clients:
        client.initialize()
    listeners = [client.listen() for client in clients]
    quiet = Client(daphne.url)
    quiet.initialize()  # a session with no listening stream is simply skipped
    for kind in ("tools", "prompts", "resources"):
        assert tool_text(quiet.tool("broadcast_list_changed", {"kind": kind})) == "sent=True"
        for listener in listeners:
            assert messages(listener, 1) == [{"jsonrpc": "2.0",
                                              "method": f"notifications/{kind}/list_changed"}]
    for listener in listeners:
        listener.close()


@pytest.mark.feature("NOTIF-03")
def test_resource_updates_and_elicitation_completion_go_to_the_listening_stream(daphne):
    subscriber, bystander = Client(daphne.url), Client(daphne.url)
    subscriber.initialize()
    bystander.initialize()
    assert subscriber.request("resources/subscribe", {"uri": "demo://readme"}).response["result"] == {}
    listeners = [subscriber.listen(), bystander.listen()]
    updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"uri": "demo://readme"}}

    # To every subscribed session, from anywhere (here a tool of the bystander's request).
    exchange = bystander.tool("resource_updated", {"uri": "demo://readme"})
    assert tool_text(exchange) == "sent=True" and exchange.notifications == []
    assert messages(listeners[0], 1) == [updated]
    # From a request's context, to its own session's listening stream, not the request's stream.
    exchange = subscriber.tool("resource_updated", {"uri": "demo://readme", "scope": "session"})
    assert tool_text(exchange) == "sent=True" and exchange.notifications == []
    assert messages(listeners[0], 1) == [updated]
    exchange = subscriber.tool("finish_elicitation", {"elicitation_id": "e-1"})
    assert tool_text(exchange) == "sent=True" and exchange.notifications == []
    assert messages(listeners[0], 1) == [{"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                          "params": {"elicitationId": "e-1"}}]
    flush(bystander, *listeners)  # the bystander got none of them
    for listener in listeners:
        listener.close()


@pytest.mark.feature("NOTIF-06")
def test_a_dropped_request_stream_never_raises_into_the_handler(daphne):
    client = Client(daphne.url)
    client.initialize()
    key = uuid.uuid4().hex
    message = body("tools/call", key, name="progress_recorded",
                   arguments={"key": key, "steps": 4, "delay": 0.3}, _meta={"progressToken": key})
    with client.http.stream("POST", daphne.url, content=json.dumps(message),
                            headers=client.headers()) as response:
        for event in iter_events(response):
            if event.message:
                assert event.message["method"] == "notifications/progress"
                break  # and drop the connection

    def recorded():
        return json.loads(tool_text(client.tool("deliveries", {"key": key})))

    sent = wait_until(lambda: (result := recorded()) and len(result) == 4 and result)
    # Written while the client listened; not delivered (False, no exception) once it had gone.
    assert sent[0] is True and sent[-1] is False


# Cancellation and ownership -------------------------------------------------------------------------
def start_counting(client: Client, count: int = SLOW_STEPS) -> tuple:
    """A slow_count in flight on a thread, once its first progress has arrived: (future, request id)."""
    request_id = uuid.uuid4().hex
    counting = threading.Event()
    future = in_thread(client.request, "tools/call", {
        "name": "slow_count", "arguments": {"count": count, "delay": 0.1},
        "_meta": {"progressToken": request_id}}, request_id=request_id,
        on_event=lambda event: event.message and counting.set())
    assert counting.wait(PATIENCE)
    return future, request_id


@pytest.mark.feature("CAN-01", "CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_cancel_posted_by_the_client_stops_its_request(daphne, revision):
    client = Client(daphne.url, revision=revision)
    client.initialize()
    future, request_id = start_counting(client)
    response = client.notify("notifications/cancelled", {"requestId": request_id, "reason": "enough"})
    assert (response.status_code, response.content) == (202, b"")
    exchange = future.result(PATIENCE)
    assert exchange.response is None
    assert 0 < len(exchange.notifications) < SLOW_STEPS


@pytest.mark.feature("CAN-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_another_users_cancel_is_refused_and_changes_nothing(daphne, revision):
    alice, bob = log_in("alice"), log_in("bob")
    owner = Client(daphne.url, headers=alice["headers"], revision=revision)
    owner.initialize()
    future, request_id = start_counting(owner, count=20)
    for intruder in (Client(daphne.url, headers=bob["headers"], revision=revision),
                     Client(daphne.url, revision=revision)):
        intruder.session_id = owner.session_id
        response = intruder.notify("notifications/cancelled", {"requestId": request_id})
        assert response.status_code == 403
        assert "another user" in error_of(response)["message"]
    assert tool_text(future.result(PATIENCE)) == "Counted to 20"


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_session_belongs_to_the_user_who_opened_it(daphne, revision):
    """Sessions are bound to the Django user of the request that opened them (Appendix A, item 6)."""
    alice, bob = log_in("alice"), log_in("bob")
    owner = Client(daphne.url, headers=alice["headers"], revision=revision)
    owner.initialize()
    assert Session.objects.get(pk=owner.session_id).owner_id == alice["user"].pk
    for headers in (bob["headers"], {}):
        intruder = Client(daphne.url, headers=headers, revision=revision)
        intruder.session_id = owner.session_id
        replies = [intruder.post_json(body()), intruder.notify("notifications/initialized"),
                   intruder.respond("s2c-1", {}), intruder.get(), intruder.delete()]
        for response in replies:
            assert response.status_code == 403, response.text
            assert error_of(response) == {"code": -32600,
                                          "message": "Forbidden: this session belongs to another user"}
    assert owner.request("ping").response["result"] == {}
    listener = owner.listen()
    assert listener.status == 200
    listener.close()
    assert owner.delete().status_code == 200


def test_a_session_opened_anonymously_stays_usable(daphne):
    opener = Client(daphne.url)
    opener.initialize()
    assert Session.objects.get(pk=opener.session_id).owner_id is None
    assert opener.request("ping").response["result"] == {}
    later = Client(daphne.url, headers=log_in("carol")["headers"])
    later.session_id = opener.session_id
    assert later.request("ping").response["result"] == {}
    assert later.delete().status_code == 200


# HTTP-22 (Host without a header at all) -------------------------------------------------------------
@pytest.mark.feature("HTTP-22")
def test_a_request_without_host_is_allowed(daphne):
    payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}).encode()
    status, reply = raw_http(daphne.port, b"POST /mcp HTTP/1.0\r\n"
                             b"Content-Type: application/json\r\n"
                             b"Accept: application/json, text/event-stream\r\n"
                             + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    assert status == 200, reply
    assert b"mcp-session-id" in reply.lower()


# HTTP-28 (handshake era: the headers are optional but must agree with the body) ---------------------
@pytest.mark.feature("HTTP-28")
def test_standard_headers_when_present_must_match_the_body(daphne):
    client = Client(daphne.url)
    client.initialize()
    call = body("tools/call", 5, name="echo", arguments={"message": "hi"})
    good = [{"mcp-method": "tools/call"}, {"mcp-method": "tools/call", "mcp-name": "echo"},
            {"Mcp-Method": "tools/call", "MCP-NAME": "echo"},
            {"mcp-method": "tools/call", "mcp-name": "=?base64?ZWNobw==?="}]
    for headers in good:
        assert client.post_json(call, headers).status_code == 200, headers
    bad = [{"mcp-method": "prompts/get"}, {"mcp-method": "TOOLS/CALL"},
           {"mcp-method": "tools/call", "mcp-name": "add"},
           {"mcp-method": "tools/call", "mcp-name": "=?base64?YWRk?="},
           {"mcp-method": "tools/call", "mcp-name": "=?base64?not base64!?="}]
    for headers in bad:
        response = client.post_json(call, headers)
        assert response.status_code == 400, headers
        error = error_of(response)
        assert error["code"] == -32020 and "Header mismatch" in error["message"]
        assert response.json()["id"] == 5
    read = body("resources/read", 6, uri="demo://readme")
    agreeing = {"mcp-method": "resources/read", "mcp-name": "demo://readme"}
    assert client.post_json(read, agreeing).status_code == 200
    assert client.post_json(read, {"mcp-name": "demo://other"}).status_code == 400
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post_json(note, {"mcp-method": "notifications/initialized"}).status_code == 202
    assert client.post_json(note, {"mcp-method": "notifications/cancelled"}).status_code == 400


# In process: what the application itself sends (HTTP-36) -------------------------------------------
@pytest.fixture
def short_lived_connections():
    """Database connections that this process opens on worker threads close after each use, so
    none is left open when the test database is dropped."""
    from django.db import connection

    saved = connection.settings_dict.get("CONN_MAX_AGE")
    connection.settings_dict["CONN_MAX_AGE"] = 0
    yield
    connection.settings_dict["CONN_MAX_AGE"] = saved


@pytest.mark.feature("HTTP-36")
async def test_every_response_header_name_is_lower_case(short_lived_connections):
    server = Server("headers")

    @server.tool
    async def hello() -> str:
        return "hello"

    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    try:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}).encode()
        replies = [await call_asgi(app, "POST", post_headers(), [init])]
        session_id = replies[0].header(b"mcp-session-id").decode()
        call = json.dumps(body("tools/call", 2, name="hello", arguments={})).encode()
        replies.append(await call_asgi(app, "POST", post_headers(session_id), [call]))
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        replies.append(await call_asgi(app, "POST", post_headers(session_id), [note]))
        replies.append(await call_asgi(app, "PUT", post_headers(session_id), [b"{}"]))
        replies.append(await call_asgi(app, "POST", post_headers(), [b"[]"]))
        replies.append(await call_asgi(app, "DELETE", post_headers(session_id)))
        statuses = [reply.start["status"] for reply in replies]
        assert statuses == [200, 200, 202, 405, 400, 200]
        assert replies[0].header(b"content-type") == b"application/json"
        assert replies[1].header(b"content-type") == b"text/event-stream"
        assert replies[3].header(b"allow") == b"GET, POST, DELETE"
        names = {name for reply in replies for name in reply.header_names}
        assert {b"mcp-session-id", b"content-type", b"allow", b"cache-control"} <= names
        assert all(name == name.lower() for name in names), names
    finally:
        await transport.close()


@pytest.mark.feature("HTTP-35")
async def test_close_ends_the_streams_and_requests_of_this_process_and_its_background_work(
        short_lived_connections):
    server = Server("closing")

    @server.tool
    async def until_cancelled(server_context: ServerContext) -> str:
        while not server_context.cancelled():
            await asyncio.sleep(0.01)
        return "stopped"

    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}).encode()
    session_id = (await call_asgi(app, "POST", post_headers(), [init])).header(b"mcp-session-id").decode()
    listening = asyncio.create_task(call_asgi(app, "GET", {
        "host": "127.0.0.1", "accept": "text/event-stream", "mcp-session-id": session_id}))
    call = json.dumps(body("tools/call", 2, name="until_cancelled", arguments={})).encode()
    calling = asyncio.create_task(call_asgi(app, "POST", post_headers(session_id), [call]))
    runtime = transport._runtimes[asyncio.get_running_loop()]
    await eventually(lambda: runtime.streams and runtime.in_flight, what="a stream and a call")
    background = list(runtime._tasks)
    assert runtime.streams and runtime.in_flight and background

    await asyncio.wait_for(transport.close(), PATIENCE)
    for reply in (await asyncio.wait_for(listening, PATIENCE), await asyncio.wait_for(calling, PATIENCE)):
        assert reply.start["status"] == 200
        assert reply.messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    # The cancelled call sent no response.
    assert b'"result"' not in reply.body
    assert all(task.done() for task in background)
    assert transport._runtimes == {}
    # The session itself stays, for any other process to serve.
    assert await run_in_thread(Session.objects.filter(pk=session_id).exists)
