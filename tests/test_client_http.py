"""``mcp_client.HTTPTransport`` (Streamable HTTP) against our server under daphne, and against a
scripted fake server where a behaviour is hard to provoke from a well-behaved one (status codes,
resumption timing).

The daphne processes serve the demo project plus tests/stdio_app and tests/http_hooks on the test
database. Every message in both directions is checked against the schema of the negotiated
revision; every HTTP request the client makes is recorded through ``http_client_factory``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from conformance.run import CLIENT_SCENARIOS
from mcp_client import (
    AsyncClient,
    BadRequestError,
    Cancellation,
    CancelledError,
    Client,
    ForbiddenError,
    HTTPTransport,
    NotFoundError,
    SessionExpiredError,
    TransportError,
    UnauthorizedError,
)
from mcp_client.errors import HTTPStatusError, UnprocessableError
from mcp_client.transports.http import DEFAULT_MAX_MESSAGE_BYTES, LISTEN_READ_TIMEOUT
from mcp_server.models import Session

from .client_support import (
    INITIALIZE_RESULT,
    WAIT,
    CheckedHTTPTransport,
    FakeHTTPServer,
    Reply,
    cancel_when,
    eventually,
    every_message_checked,
)
from .harness import REPO
from .http_harness import free_port
from .http_support import HOOKS, running, wait_until
from .services import require
from .wire import check_client_message

REVISIONS = ["2025-11-25", "2024-11-05"]


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings=HOOKS) as server:
        yield server


@pytest.fixture(scope="module")
def daphne_json(django_db_setup, django_db_blocker):
    """JSON responses instead of SSE streams, and lists two items a page."""
    settings = {**HOOKS, "ENABLE_JSON_RESPONSE": True, "PAGE_SIZE": 2}
    with running(django_db_blocker, mcp_settings=settings) as server:
        yield server


@pytest.fixture
def ours(daphne, transactional_db):
    return daphne


class Recorder:
    """``http_client_factory`` that records every HTTP request and response of the transport."""

    def __init__(self, **client_options: Any):
        self.requests: list[httpx.Request] = []
        self.responses: list[httpx.Response] = []
        self.client_options = client_options

    def __call__(self) -> httpx.AsyncClient:
        async def request(request: httpx.Request) -> None:
            self.requests.append(request)

        async def response(response: httpx.Response) -> None:
            self.responses.append(response)

        return httpx.AsyncClient(timeout=30, event_hooks={"request": [request], "response": [response]},
                                 **self.client_options)

    def posts(self) -> list[tuple[httpx.Request, dict]]:
        return [(r, json.loads(r.content)) for r in self.requests if r.method == "POST"]

    def of(self, method: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method]


def sessions() -> list[str]:
    from django.db import connection

    try:
        return list(Session.objects.values_list("pk", flat=True))
    finally:
        connection.close()


@pytest.mark.feature("CHTTP-02", "CHTTP-04", "CHTTP-06", "CLI-05", "CLI-10", "TOOL-24", "PRM-08", "RES-13",
                     "CMP-07", "PING-03", "PROG-04", "TRACE-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_whole_session_with_our_server(ours, revision):
    recorder = Recorder()
    transport = CheckedHTTPTransport(ours.url, http_client_factory=recorder)
    client = AsyncClient(transport)
    await client.connect(protocol_version=revision)
    assert client.protocol_version == revision and transport.protocol_version == revision
    assert transport.session_id and await sync_to_async(sessions)() == [transport.session_id]

    tools = {tool.name: tool for tool in await client.tools()}
    assert tools["add"].output_schema["properties"] == {"sum": {"type": "number"}}
    assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"sum": 3}
    progress: list[float] = []
    counted = await client.call_tool("slow_count", {"count": 3, "delay": 0.01}, progress_token="p-1",
                                     on_progress=lambda p: progress.append(p["progress"]))
    assert counted.text == "Counted to 3" and progress == [1, 2, 3]
    prompt = await client.get_prompt("greeting", {"name": "Ada"}, meta={"traceparent": "00-ab-cd-01"})
    assert prompt["messages"][0]["content"]["text"].endswith("for Ada.")
    [readme] = await client.read_resource("demo://readme", meta={"traceparent": "00-ab-cd-01"})
    assert readme["mimeType"] == "text/plain"
    assert (await client.complete({"type": "ref/prompt", "name": "greeting"},
                                  {"name": "style", "value": "p"}))["values"] == ["pirate"]
    assert await client.ping() == {}

    # Every POST asks for JSON or SSE; after initialize each carries the session and the revision.
    posts = recorder.posts()
    assert all(r.headers["accept"] == "application/json, text/event-stream" for r, _ in posts)
    assert all(r.headers["content-type"] == "application/json" for r, _ in posts)
    assert "mcp-session-id" not in posts[0][0].headers
    for request, _ in posts[1:]:
        assert request.headers["mcp-session-id"] == transport.session_id
        assert request.headers["mcp-protocol-version"] == revision
    traced = [body for _, body in posts
              if (body.get("params") or {}).get("_meta") == {"traceparent": "00-ab-cd-01"}]
    assert [body["method"] for body in traced] == ["prompts/get", "resources/read"]
    # Our server answers requests with SSE streams.
    kinds = {r.headers.get("content-type", "").split(";")[0] for r in recorder.responses
             if r.request.method == "POST"}
    assert "text/event-stream" in kinds

    session_id = transport.session_id
    await client.close()
    [delete] = recorder.of("DELETE")
    assert delete.headers["mcp-session-id"] == session_id
    assert transport.session_id is None and await sync_to_async(sessions)() == []


@pytest.mark.feature("CHTTP-02", "CLI-12", "ELI-09")
async def test_server_requests_on_the_post_stream_are_answered(ours):
    recorder = Recorder()
    client = AsyncClient(CheckedHTTPTransport(ours.url, http_client_factory=recorder))
    asked: list[dict] = []

    def confirm(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": {"confirm": True, "priority": "high"}}

    client.on_elicitation(confirm)
    client.on_sampling(lambda params: {"role": "assistant", "content": {"type": "text", "text": "4"},
                                       "model": "m", "stopReason": "endTurn"})
    await client.connect(mode="legacy")
    assert (await client.call_tool("confirm_action", {"action": "ship"})).text == "Done: ship (priority high)"
    assert asked[0]["message"] == "Do you want to ship?"
    sampled = json.loads((await client.call_tool("ask_client", {"request": "sample"})).text)
    assert sampled["result"]["content"]["text"] == "4"
    # The answers went back as POSTs of JSON-RPC responses, accepted with 202 (the tool may have
    # finished before the 202 itself reached the client).
    answers = [(r, body) for r, body in recorder.posts() if "method" not in body]
    assert len(answers) == 2 and all(r.headers["mcp-session-id"] for r, _ in answers)

    def accepted() -> list[int]:
        return [resp.status_code for resp in recorder.responses
                if resp.request.method == "POST" and "method" not in json.loads(resp.request.content)]

    await eventually(lambda: len(accepted()) == 2)
    assert accepted() == [202, 202]
    await client.close()


@pytest.mark.feature("CHTTP-02", "PAG-06", "PAG-07")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_json_responses_and_pages(daphne_json, transactional_db, revision):
    recorder = Recorder()
    client = AsyncClient(CheckedHTTPTransport(daphne_json.url, http_client_factory=recorder))
    await client.connect(protocol_version=revision)
    assert (await client.call_tool("echo", {"message": "plain JSON"})).text == "plain JSON"
    first = await client.list_tools()
    assert len(first.tools) == 2 and first.next_cursor is not None
    tools = await client.tools()
    assert len(tools) > 10 and [t.name for t in tools[:2]] == [t.name for t in first.tools]
    lists = [body for _, body in recorder.posts() if body.get("method") == "tools/list"]
    assert len(lists) == 1 + (len(tools) + 1) // 2  # one for the page, then every page once
    kinds = {r.headers.get("content-type", "").split(";")[0] for r in recorder.responses
             if r.request.method == "POST" and r.status_code == 200}
    assert kinds == {"application/json"}
    await client.close()


@pytest.mark.feature("CHTTP-01")
async def test_custom_headers_go_on_every_request(ours):
    recorder = Recorder()
    transport = CheckedHTTPTransport(ours.url, headers={"x-trace": "abc", "user-agent": "mcp-tests/1"},
                                     http_client_factory=recorder)
    assert transport.max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 4 * 1024 * 1024
    assert transport.max_reconnection_wait == 300
    client = AsyncClient(transport)
    client.on_roots(lambda params: {"roots": []})  # opens the GET stream too
    await client.connect(mode="legacy")
    await client.ping()
    await eventually(lambda: recorder.of("GET"))
    await client.close()
    methods = {r.method for r in recorder.requests}
    assert methods == {"POST", "GET", "DELETE"}
    assert all(r.headers["x-trace"] == "abc" and r.headers["user-agent"] == "mcp-tests/1"
               for r in recorder.requests)


@pytest.mark.feature("CHTTP-01", "CHTTP-03", "CHTTP-09")
@pytest.mark.parametrize(("option", "value"), [
    ("max_message_bytes", 0), ("max_message_bytes", -5), ("max_message_bytes", 1.5),
    ("max_message_bytes", True), ("max_reconnection_wait", 0), ("max_reconnection_wait", -1),
    ("max_reconnection_wait", "300"),
])
def test_limits_must_be_positive(option, value):
    with pytest.raises(ValueError, match=option):
        HTTPTransport("http://127.0.0.1:1/mcp", **{option: value})


@pytest.mark.feature("CHTTP-03")
async def test_max_message_bytes_against_our_server(ours):
    client = AsyncClient(CheckedHTTPTransport(ours.url, max_message_bytes=4096))
    await client.connect(mode="legacy")
    assert (await client.call_tool("echo", {"message": "x" * 1000})).text == "x" * 1000
    with pytest.raises(TransportError, match=r"exceeds max_message_bytes \(4096\)"):
        await client.call_tool("echo", {"message": "x" * 10000})
    assert await client.ping() == {}  # a message too big fails its own request only
    await client.close()


@pytest.mark.feature("CLI-03", "CLI-07", "CHTTP-06")
async def test_connect_once_close_and_connect_again_with_a_new_session(ours):
    recorder = Recorder()
    transport = CheckedHTTPTransport(ours.url, http_client_factory=recorder)
    client = AsyncClient(transport)
    first = await client.connect(mode="legacy")
    session_id = transport.session_id
    assert await client.connect(mode="legacy") is first and transport.session_id == session_id
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    await client.close()
    assert not client.connected and transport.session_id is None
    assert [r.headers["mcp-session-id"] for r in recorder.of("DELETE")] == [session_id]
    await client.connect(mode="legacy")
    assert transport.session_id not in (None, session_id) and await client.ping() == {}
    await client.close()


@pytest.mark.feature("CHTTP-05")
async def test_a_deleted_session_raises_session_expired_and_is_forgotten(ours):
    recorder = Recorder()
    transport = CheckedHTTPTransport(ours.url, http_client_factory=recorder)
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    session_id = transport.session_id
    async with httpx.AsyncClient() as other:  # someone else ends the session
        ended = await other.delete(ours.url, headers={"mcp-session-id": session_id})
    assert ended.status_code == 200
    with pytest.raises(SessionExpiredError) as raised:
        await client.ping()
    assert raised.value.status == 404 and isinstance(raised.value, NotFoundError)
    assert transport.session_id is None
    await client.close()
    assert recorder.of("DELETE") == []  # no session left to delete
    await client.connect(mode="legacy")  # a new session
    assert transport.session_id not in (None, session_id) and await client.ping() == {}
    await client.close()


@pytest.mark.feature("CHTTP-05", "CHTTP-07")
async def test_a_404_without_a_session_is_a_plain_not_found(ours):
    client = AsyncClient(CheckedHTTPTransport(ours.url.replace("/mcp", "/no-mcp-here")))
    with pytest.raises(NotFoundError) as raised:
        await client.connect(mode="legacy")
    assert type(raised.value) is NotFoundError and raised.value.status == 404


@pytest.mark.feature("CHTTP-07")
async def test_our_servers_refusals_map_to_their_errors(ours):
    client = AsyncClient(CheckedHTTPTransport(ours.url, headers={"origin": "http://evil.example"}))
    with pytest.raises(ForbiddenError, match="Invalid Origin header") as raised:
        await client.connect(mode="legacy")
    assert raised.value.status == 403
    client = AsyncClient(CheckedHTTPTransport(ours.url, headers={"mcp-protocol-version": "1999-01-01"}))
    await client.connect(mode="legacy")  # initialize itself carries no revision header to check...
    transport = client.transport
    transport.protocol_version = "1999-01-01"  # ...later requests do
    with pytest.raises(BadRequestError, match="unsupported MCP-Protocol-Version") as raised:
        await client.ping()
    assert raised.value.status == 400 and "1999-01-01" in raised.value.body
    transport.protocol_version = "2025-11-25"
    await client.close()


@pytest.mark.feature("CHTTP-07", "CHTTP-06")
@pytest.mark.parametrize(("status", "error"), [
    (400, BadRequestError), (401, UnauthorizedError), (403, ForbiddenError), (404, SessionExpiredError),
    (422, UnprocessableError), (500, HTTPStatusError), (503, HTTPStatusError),
])
async def test_status_codes_map_to_errors(status, error):
    def refuse(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/call":
            return reply.json({"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32600, "message": f"refused with {status}"}}, code=status)
        return NotImplemented

    with FakeHTTPServer(refuse) as fake:
        transport = CheckedHTTPTransport(fake.url, check_server=False)
        client = AsyncClient(transport)
        await client.connect(mode="legacy")
        with pytest.raises(error, match=f"refused with {status}") as raised:
            await asyncio.wait_for(client.call_tool("x"), WAIT)
        assert type(raised.value) is error and raised.value.status == status
        if status == 404:  # with a session held, a 404 means it expired: it is forgotten
            assert isinstance(raised.value, NotFoundError) and transport.session_id is None
        await client.close()
    # The handshake's notification was accepted with 202 and no body.
    [initialized] = fake.of("notifications/initialized")
    assert initialized.headers["mcp-session-id"] == "s-1"


@pytest.mark.feature("CHTTP-06")
@pytest.mark.parametrize(("status", "raises"), [(200, False), (204, False), (404, False), (405, False),
                                                 (500, True), (403, True)])
async def test_close_deletes_the_session(status, raises):
    def answer(reply: Reply) -> Any:
        if reply.seen.method == "DELETE":
            return reply.status(status)
        return NotImplemented

    with FakeHTTPServer(answer) as fake:
        transport = CheckedHTTPTransport(fake.url, check_server=False)
        client = AsyncClient(transport)
        await client.connect(mode="legacy")
        if raises:
            with pytest.raises(HTTPStatusError) as raised:
                await client.close()
            assert raised.value.status == status
        else:
            await client.close()
        assert transport.session_id is None and not client.connected  # cleared whatever happened
        [delete] = [s for s in fake.requests if s.method == "DELETE"]
        assert delete.headers["mcp-session-id"] == "s-1"


@pytest.mark.feature("CHTTP-06")
async def test_close_without_a_session_sends_nothing():
    def stateless(reply: Reply) -> Any:
        if reply.seen.rpc_method == "initialize":
            return reply.result(INITIALIZE_RESULT)  # no mcp-session-id
        return NotImplemented

    with FakeHTTPServer(stateless) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False))
        await client.connect(mode="legacy")
        await client.close()
        await client.close()
        assert [s.method for s in fake.requests] == ["POST", "POST"]
        assert "mcp-session-id" not in fake.requests[1].headers


def reconnecting(events_before_close: list[dict], retry: int | None, *, answer_on_get: int = 1):
    """A fake whose tools/call stream sends a priming event (id, retry) and closes; the answer comes
    on the ``answer_on_get``-th GET (0: never), which must carry Last-Event-ID."""
    state = {"call": None, "gets": 0}

    def respond(reply: Reply) -> Any:
        seen = reply.seen
        if seen.rpc_method == "tools/call":
            state["call"] = seen.body["id"]
            reply.sse_open()
            reply.event("", event_id="ev-1", retry=retry)
            for event in events_before_close:
                reply.event(event)
            return None
        if seen.method == "GET" and "last-event-id" in seen.headers:  # else: no listening stream (405)
            state["gets"] += 1
            reply.sse_open()
            reply.event("", event_id=f"ev-{1 + state['gets']}", retry=retry)
            if state["gets"] == answer_on_get:
                reply.event({"jsonrpc": "2.0", "id": state["call"],
                             "result": {"content": [{"type": "text", "text": "resumed"}]}},
                            event_id="ev-final")
                reply.hold(0.3)  # the GET stream stays open after the answer
            return None
        return NotImplemented

    return respond


@pytest.mark.feature("CHTTP-08")
@pytest.mark.parametrize(("retry", "expected", "instead"),
                         [(3000, 3.0, 1.0), (None, 1.0, 0.1), (10, 0.1, 1.0)])
async def test_a_closed_stream_is_resumed_with_get_after_the_retry_wait(retry, expected, instead):
    progress = {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "half"}}
    with FakeHTTPServer(reconnecting([progress], retry)) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False))
        logs: list[dict] = []
        client.on_log_message(logs.append)
        await client.connect(mode="legacy")
        result = await asyncio.wait_for(client.call_tool("slow"), WAIT)
        assert result.text == "resumed" and logs == [progress["params"]]
        [post] = fake.of("tools/call")
        [get] = [s for s in fake.requests if s.method == "GET" and "last-event-id" in s.headers]
        assert get.headers["last-event-id"] == "ev-1" and get.headers["accept"] == "text/event-stream"
        assert get.headers["mcp-session-id"] == "s-1"
        waited = get.at - post.at
        assert waited >= expected, waited  # retry honoured; default 1 s; floor 100 ms
        if instead > expected:  # and not the default instead of the floor (no machine is that slow)
            assert waited < instead, waited
        await client.close()


@pytest.mark.feature("CHTTP-08")
async def test_at_most_two_resumptions():
    with FakeHTTPServer(reconnecting([], 100, answer_on_get=0)) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False))
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match="after 2 resumptions"):
            await asyncio.wait_for(client.call_tool("slow"), WAIT)
        gets = [s for s in fake.requests if s.method == "GET"]
        assert [g.headers["last-event-id"] for g in gets] == ["ev-1", "ev-2"]
        await client.close()


@pytest.mark.feature("CHTTP-09")
async def test_a_retry_past_the_budget_raises_without_waiting():
    # A retry of 10 minutes: raising within WAIT is raising without waiting it.
    with FakeHTTPServer(reconnecting([], 600_000)) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False, max_reconnection_wait=1))
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match=r"would need 600\.0 s, past max_reconnection_wait"):
            await asyncio.wait_for(client.call_tool("slow"), WAIT)
        assert [s.method for s in fake.requests].count("GET") == 0
        await client.close()


@pytest.mark.feature("CHTTP-09")
async def test_the_rest_of_the_budget_bounds_the_resumed_stream():
    def silent_after_get(reply: Reply) -> Any:
        if reply.seen.method == "GET":
            reply.sse_open()
            reply.event("", event_id="ev-2")
            reply.hold()  # never answers
            return None
        return reconnecting([], 200)(reply)

    with FakeHTTPServer(silent_after_get) as fake:
        # A read timeout far past WAIT: raising within WAIT is the budget's doing.
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False, max_reconnection_wait=1.2,
                                                  timeout=10 * WAIT))
        await client.connect(mode="legacy")
        started = time.monotonic()
        with pytest.raises(TransportError, match="nothing for the rest of max_reconnection_wait"):
            await asyncio.wait_for(client.call_tool("slow"), WAIT)
        assert time.monotonic() - started >= 1.1  # not before its time
        await client.close()


@pytest.mark.feature("CHTTP-09")
async def test_the_budget_starts_when_the_stream_drops():
    """A stream that ran longer than max_reconnection_wait before it dropped is still resumed."""
    resume = reconnecting([], 100)

    def slow_then_drop(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/call":
            resume(reply)  # the priming event...
            reply.raw(b": still working\n\n")
            reply.hold(0.8)  # ...then 0.8 s of work before the stream drops
            return None
        return resume(reply)

    with FakeHTTPServer(slow_then_drop) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False, max_reconnection_wait=0.5))
        await client.connect(mode="legacy")
        assert (await asyncio.wait_for(client.call_tool("slow"), WAIT)).text == "resumed"
        await client.close()


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory):
    """``conformance/server`` (our server with the suite's fixtures, test_reconnection among them)."""
    folder = tmp_path_factory.mktemp("conformance")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["CONFORMANCE_SQLITE"] = str(folder / "db.sqlite3")
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([str(REPO / "conformance" / "server"), "--port", str(port)], cwd=REPO,
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (folder / "server.log").read_text()
            assert time.monotonic() < deadline, "conformance/server did not answer /health in 60 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield f"http://localhost:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


@pytest.mark.feature("CHTTP-08")
async def test_our_server_closing_the_stream_mid_call_is_resumed(conformance_server):
    recorder = Recorder()
    client = AsyncClient(CheckedHTTPTransport(conformance_server, http_client_factory=recorder))
    await client.connect(mode="legacy")
    started = time.monotonic()
    result = await asyncio.wait_for(client.call_tool("test_reconnection"), WAIT)
    assert result.text.startswith("Reconnection test completed successfully")
    assert time.monotonic() - started >= 0.5  # the server's retry: 500
    [get] = recorder.of("GET")
    assert get.headers["last-event-id"]
    await client.close()


@pytest.mark.feature("CHTTP-10")
@pytest.mark.parametrize("registered", ["before connect", "after connect"])
def test_the_listening_stream_carries_requests_tied_to_no_request(ours, registered):
    recorder = Recorder()
    client = Client(CheckedHTTPTransport(ours.url, http_client_factory=recorder))
    answered = threading.Event()

    def roots(params: dict) -> dict:
        answered.set()
        return {"roots": [{"uri": "file:///listening", "name": "listening"}]}

    if registered == "before connect":
        client.on_roots(roots)
        client.connect(mode="legacy")
    else:
        client.connect(mode="legacy", capabilities={"roots": {}})
        assert recorder.of("GET") == []  # no handler, no listening stream
        client.on_roots(roots)
    with client:
        wait_until(lambda: recorder.of("GET"))
        # The server sends roots/list on no request's stream: only the GET stream carries it.
        outcome = json.loads(client.call_tool("roots_without_request").text)
        assert outcome["result"] == {"roots": [{"uri": "file:///listening", "name": "listening"}]}
        assert answered.is_set()
    [get] = recorder.of("GET")
    assert get.headers["accept"] == "text/event-stream" and get.headers["mcp-session-id"]
    assert get.extensions["timeout"]["read"] == LISTEN_READ_TIMEOUT == 300


@pytest.mark.feature("CHTTP-11")
async def test_the_http_client_factory_can_add_middleware_or_swap_the_adapter(ours):
    class Counting(httpx.AsyncHTTPTransport):
        """An adapter of our own: counts what goes through it."""

        count = 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            Counting.count += 1
            request.headers["x-via"] = "counting"
            return await super().handle_async_request(request)

    made: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        made.append(httpx.AsyncClient(transport=Counting(), timeout=30))
        return made[-1]

    client = AsyncClient(CheckedHTTPTransport(ours.url, http_client_factory=factory))
    await client.connect(mode="legacy")
    assert await client.ping() == {}
    await client.close()
    assert len(made) == 1 and made[0].is_closed
    assert Counting.count == 4  # initialize, initialized, ping, DELETE


@pytest.mark.feature("CHTTP-12", "CAN-07")
async def test_a_cancel_is_posted_with_the_session_headers(ours):
    recorder = Recorder()
    transport = CheckedHTTPTransport(ours.url, http_client_factory=recorder)
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    token = Cancellation()
    cancel_when(lambda: [b for _, b in recorder.posts() if b.get("method") == "tools/call"], token,
                reason="stop")
    with pytest.raises(CancelledError):
        await asyncio.wait_for(client.call_tool("wait_for_cancel", {"limit": WAIT}, cancellation=token), WAIT)
    await eventually(lambda: [b for _, b in recorder.posts() if b.get("method") == "notifications/cancelled"])
    [(request, body)] = [(r, b) for r, b in recorder.posts() if b.get("method") == "notifications/cancelled"]
    [(_, call)] = [(r, b) for r, b in recorder.posts() if b.get("method") == "tools/call"]
    assert body["params"] == {"requestId": call["id"], "reason": "stop"}
    assert request.headers["mcp-session-id"] == transport.session_id
    assert request.headers["mcp-protocol-version"] == "2025-11-25"
    await eventually(lambda: [r for r in recorder.responses if r.request is request])
    [response] = [r for r in recorder.responses if r.request is request]
    assert response.status_code == 202
    await eventually(lambda: "saw the cancellation: stop" in ours.log)
    await client.close()


@pytest.mark.feature("CAN-08")
async def test_the_cancel_post_follows_the_request_post():
    holding = threading.Event()

    def respond(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/call":
            reply.sse_open()
            holding.set()
            reply.hold(2)
            return None
        return NotImplemented

    class OrderedTransport(CheckedHTTPTransport):
        """Records when each POST starts and when its body has been written."""

        order: list[tuple[str, str]] = []

        async def send(self, message: dict, *, on_sent: Any = None, **kwargs: Any) -> None:
            method = message.get("method", "")
            self.order.append(("sending", method))

            def sent() -> None:
                self.order.append(("sent", method))
                if on_sent is not None:
                    on_sent()

            await super().send(message, on_sent=sent, **kwargs)

    with FakeHTTPServer(respond) as fake:
        transport = OrderedTransport(fake.url, check_server=False)
        client = AsyncClient(transport)
        await client.connect(mode="legacy")
        token = Cancellation()
        timer = threading.Timer(0.0, token.cancel)
        call = asyncio.ensure_future(client.call_tool("slow", cancellation=token))
        await asyncio.sleep(0)
        timer.start()  # cancelled right away, while the request may still be on its way
        with pytest.raises(CancelledError):
            await asyncio.wait_for(call, WAIT)
        await eventually(lambda: fake.of("notifications/cancelled"))
        [post] = fake.of("tools/call")
        [cancel] = fake.of("notifications/cancelled")
        assert cancel.body["params"]["requestId"] == post.body["id"]
        # The cancel's POST starts only once the request's body is written. (The fake server's
        # times of arrival cannot tell: each connection is read by a thread of its own, and a
        # loaded machine may run the later one first.)
        order = transport.order
        assert order.index(("sent", "tools/call")) < order.index(("sending", "notifications/cancelled"))
        await client.close()


@pytest.mark.feature("CLI-13")
async def test_a_handler_for_any_method_over_http():
    def respond(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/call":
            reply.sse_open()
            reply.event({"jsonrpc": "2.0", "id": "ask-1", "method": "acme/confirm", "params": {"what": "it"}})
            wait_until(lambda: any(s.body.get("id") == "ask-1" for s in list(fake.requests)
                                   if isinstance(s.body, dict) and "method" not in s.body),
                       what="the client's answer")
            reply.event({"jsonrpc": "2.0", "id": reply.seen.body["id"],
                         "result": {"content": [{"type": "text", "text": "confirmed"}]}})
            return None
        return NotImplemented

    with FakeHTTPServer(respond) as fake:
        client = AsyncClient(CheckedHTTPTransport(fake.url, check_server=False))
        client.on_server_request("acme/confirm", lambda params: {"confirmed": params["what"]})
        await client.connect(mode="legacy")
        assert (await asyncio.wait_for(client.call_tool("x"), WAIT)).text == "confirmed"
        [answer] = [s for s in fake.requests if isinstance(s.body, dict) and s.body.get("id") == "ask-1"]
        assert answer.body == {"jsonrpc": "2.0", "id": "ask-1", "result": {"confirmed": "it"}}
        assert answer.headers["mcp-session-id"] == "s-1"
        await client.close()


@pytest.mark.feature("CHTTP-13")
def test_only_http_needs_httpx_and_sse_needs_nothing_more():
    """With httpx (and Django, and the usual SSE libraries) made unimportable, the client still
    imports, parses event streams with its own parser and talks stdio; only HTTPTransport refuses,
    naming the missing package."""
    script = (
        "import sys\n"
        "for name in ('httpx', 'django', 'httpx_sse', 'sse_starlette', 'sseclient', 'mcp_server'):\n"
        "    sys.modules[name] = None\n"
        "import mcp_client\n"
        "from mcp_client.transports.sse import SSEParser\n"
        "events = SSEParser(1000).feed(b'id: 7\\nretry: 250\\ndata: {\"a\"\\ndata: : 1}\\n\\n')\n"
        "assert [(e.id, e.retry, e.data) for e in events] == [('7', 250, '{\"a\"\\n: 1}')], events\n"
        "with mcp_client.Client(mcp_client.StdioTransport(sys.executable, ['-m', 'tests.reference_server',\n"
        "                                                 'stdio'])) as client:\n"
        "    assert client.call_tool('echo', {'message': 'hi'}).text == 'hi'\n"
        "try:\n"
        "    mcp_client.HTTPTransport('http://127.0.0.1:9/mcp')\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('refused:', exc.name, exc)\n"
    )
    finished = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ("refused: httpx HTTPTransport needs the httpx package, which is missing: "
                               "pip install httpx (stdio needs nothing more)\n")


# conformance/client: what the official suite's client scenarios run ---------------------------------

def conformance_client(scenario: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "conformance" / "client"), url], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "MCP_CONFORMANCE_SCENARIO": scenario})


def check_what_the_client_wrote(fake: FakeHTTPServer) -> None:
    """The messages a client in another process POSTed, checked against the schema: the auto
    mode's probe against the revision its envelope names, the rest against 2025-11-25 (which the
    fake negotiates)."""
    bodies = [seen.body for seen in fake.requests if seen.method == "POST"]
    assert bodies
    for body in bodies:
        named = ((body.get("params") or {}).get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
        check_client_message(body, named or "2025-11-25")


SEP1034_SCHEMA = {"type": "object", "required": [], "properties": {
    "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
    "score": {"type": "number", "default": 95.5},
    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "default": True}}}


@pytest.mark.feature("CONF-02")
def test_the_conformance_client_calls_add_numbers():
    def respond(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/list":
            return reply.result({"tools": [{"name": "add_numbers", "inputSchema": {"type": "object"}}]})
        if reply.seen.rpc_method == "tools/call":
            return reply.result({"content": [{"type": "text", "text": "8"}]})
        return NotImplemented

    with FakeHTTPServer(respond) as fake:
        finished = conformance_client("tools_call", fake.url)
        assert finished.returncode == 0, finished.stderr
        [call] = fake.of("tools/call")
        assert call.body["params"] == {"name": "add_numbers", "arguments": {"a": 5, "b": 3}}
        client_info = fake.of("initialize")[0].body["params"]["clientInfo"]
        assert client_info["name"] == "django-mcp-sdk-conformance-client"
        assert [s.method for s in fake.requests][-1] == "DELETE"
        check_what_the_client_wrote(fake)


@pytest.mark.feature("CONF-02", "ELI-09")
def test_the_conformance_client_accepts_elicitations_with_the_defaults():
    def respond(reply: Reply) -> Any:
        if reply.seen.rpc_method == "tools/call":
            reply.sse_open()
            reply.event({"jsonrpc": "2.0", "id": "e-1", "method": "elicitation/create",
                         "params": {"message": "defaults please", "requestedSchema": SEP1034_SCHEMA}})
            wait_until(lambda: [s for s in fake.requests
                                if isinstance(s.body, dict) and s.body.get("id") == "e-1"],
                       what="the client's answer")
            reply.event({"jsonrpc": "2.0", "id": reply.seen.body["id"], "result": {"content": []}})
            return None
        return NotImplemented

    with FakeHTTPServer(respond) as fake:
        finished = conformance_client("elicitation-sep1034-client-defaults", fake.url)
        assert finished.returncode == 0, finished.stderr
        [answer] = [s for s in fake.requests if isinstance(s.body, dict) and s.body.get("id") == "e-1"]
        assert answer.body["result"] == {"action": "accept", "content": {
            "name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True}}
        assert fake.of("initialize")[0].body["params"]["capabilities"] == {"elicitation": {}}
        # (Not checked as an ElicitResult: the published 2025-11-25 schema allows integers but no
        # other numbers in content, while the suite's score default is 95.5.)
        check_what_the_client_wrote(fake)


@pytest.mark.feature("CONF-02")
def test_the_conformance_client_names_what_it_cannot_do():
    finished = conformance_client("auth/no-such-scenario", "http://127.0.0.1:9/mcp")
    assert finished.returncode == 2 and "'auth/no-such-scenario' is not implemented" in finished.stderr
    finished = conformance_client("tools_call", "http://127.0.0.1:9/mcp")
    assert finished.returncode == 1 and "ConnectError" in finished.stderr


# The handshake-era scenarios and an auth/* sample, one per path of the flow (about 2 s each: the
# whole list, both suites, is conformance/run's, which CI runs).
SAMPLE = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
          "auth/metadata-var3", "auth/scope-step-up", "auth/token-endpoint-auth-basic",
          "auth/pre-registration", "auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
          "auth/client-credentials-jwt", "auth/cross-app-access-complete-flow"]


@pytest.mark.feature("CONF-02", "CHTTP-08", "OAUTH-34")
def test_the_official_suite_passes_the_client_scenarios(tmp_path):
    """``conformance/run --client-scenario ...``: the 0.1.16 suite runs its four handshake-era client
    scenarios (initialize, tools_call, elicitation-sep1034-client-defaults, sse-retry) and a sample of
    its 22 auth/* ones against conformance/client. CI runs them all as part of ``conformance/run``."""
    suite = REPO / "conformance" / "suite-0.1" / "node_modules" / "@modelcontextprotocol" / "conformance"
    require(shutil.which("node") is not None and suite.is_dir(),
            "node or the conformance suite is missing (conformance/run installs it)")
    def run(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(REPO / "conformance" / "run"), *options, "--results", str(tmp_path)],
                              cwd=REPO, capture_output=True, text=True, timeout=600)

    finished = run("--suite", "0.1", *(f"--client-scenario={name}" for name in SAMPLE))
    lines = finished.stdout.splitlines()
    # sse-retry warns when the reconnection comes more than 200 ms after the server's retry: (500 ms);
    # a machine busy with other tests can be that slow once, so a failed scenario gets one more run.
    failed = [line for line in lines if line.startswith("FAIL ")]
    if not failed:
        assert finished.returncode == 0 and lines[-1] == f"{len(SAMPLE)} passed, 0 failed", \
            finished.stdout + finished.stderr
    for line in failed:
        again = run("--scenario", line.split()[1], "--suite", "0.1")
        assert again.returncode == 0, finished.stdout + again.stdout + again.stderr
        lines[lines.index(line)] = again.stdout.splitlines()[0]
    assert [line for line in lines if line.startswith(("PASS", "FAIL"))] == [
        f"PASS {name} (0.1.16, client)" for name in CLIENT_SCENARIOS if name in SAMPLE]
    assert len(CLIENT_SCENARIOS) == 26 and sum(name.startswith("auth/") for name in CLIENT_SCENARIOS) == 22
