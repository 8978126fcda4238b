"""Background tool calls (``@mcp_server.tool(background=True)``) end to end, in both eras.

- The embedded default (no broker, the in-memory channel layer): one daphne process and
  ``manage.py mcp_stdio`` run the call themselves, with its ``ToolCall`` record.
- A deployment (PostgreSQL, Redis, a Celery worker, two daphne processes and a third in
  JSON-response mode that does not validate arguments): 2026-07-28 calls relayed from the worker,
  input_required over two rounds, JSON responses, bad arguments refused before anything is queued.
- Deploy skew: a worker whose code lacks the tool.
- The ``BACKGROUND_CALLS`` setting, in process.

Every message is checked against the schema of its revision (the harness clients do it).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
import socket
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_client import AsyncClient
from mcp_client.transports.round_robin import round_robin
from mcp_server import Configuration, Server, ServerContext, StdioTransport
from mcp_server.background.runner import runner_name
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import ToolCall

from .celery_support import CeleryWorker, celery_worker, redis_broker
from .client_support import CheckedHTTPTransport
from .harness import CLIENT_INFO, StdioServer
from .http_cluster import REDIS_HOST, REDIS_PORT, call_tool, cluster, new_session, require_services
from .http_harness import DaphneServer, database_env
from .http_support import Client, in_thread, running, tool_text
from .modern_support import MODERN, envelope, modern_request, post, post_over_http
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

pytestmark = pytest.mark.django_db(transaction=True)

KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "REQUEST_STATE_KEYS": [KEY]}
# The web processes of the deployment also take an X-API-Key naming a user (scopes mcp:read).
AUTHENTICATED = {**SETTINGS, "AUTHENTICATION_CLASSES": [
    "tests.auth_support.APIKeyAuthentication", "mcp_server.auth.SessionAuthentication"]}
# Neither Redis nor a broker, whatever the environment of the test run says.
EMBEDDED = {"REDIS_URL": "", "CELERY_BROKER_URL": ""}
SKEW_REDIS_DB, REDIS_DB, BROKER_DB, SKEW_BROKER_DB = 3, 4, 5, 6
HOST = socket.gethostname()
ELICITING = envelope({"elicitation": {"form": {}}})
CONFIRM = {"action": "accept", "content": {"confirm": True}}


def runs_in(pid: int) -> str:
    """The ``worker`` of a record run by the process ``pid`` (host and pid)."""
    return f"{HOST}:{pid}"


def progress_of(messages: list[dict]) -> list[float]:
    return [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]


def pid_of(result: dict) -> int:
    return json.loads(result["content"][0]["text"])["pid"]


def received(worker: CeleryWorker, since: int = 0) -> list[str]:
    """The ids of the calls whose task the worker took, after the first ``since`` characters of
    its log (a task's id is its call's id)."""
    return re.findall(r"Task mcp_server\.run_tool_call\[(\w+)\] received", worker.log[since:])


def records() -> list[ToolCall]:
    return list(ToolCall.objects.order_by("created_at"))


# The embedded default: the call runs in the process that received it ----------------------------
@pytest.fixture(scope="module")
def embedded(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings={"REQUEST_STATE_KEYS": [KEY]}, env=EMBEDDED) as server:
        yield server


def test_embedded_http_runs_the_call_in_the_web_process_and_keeps_its_record(embedded, tmp_path):
    client = Client(embedded.url)
    client.initialize()
    gate = tmp_path / "gate"
    future = in_thread(client.tool, "background_job", {"steps": 3, "gate": str(gate)}, progressToken="bg")
    # Held at its gate: running, its progress on the record, no response yet.
    running_call = wait_until(lambda: ToolCall.objects.filter(state="running", progress=3).first())
    assert (running_call.total, running_call.message, running_call.response) == (3, "step 3", None)
    gate.touch()
    exchange = future.result(PATIENCE)
    assert json.loads(tool_text(exchange))["pid"] == embedded.process.pid
    assert progress_of(exchange.notifications) == [1, 2, 3]
    [call] = records()
    assert (call.state, call.delivery, call.tool, call.arguments) == (
        "completed", "local", "background_job", {"steps": 3, "gate": str(gate)})
    assert call.response == exchange.response
    assert (call.progress, call.total, call.message) == (3, 3, "step 3")
    assert call.worker == runs_in(embedded.process.pid) and call.runner
    assert (call.session_id, call.request_id) == (client.session_id, exchange.response["id"])
    assert call.created_at <= call.started_at <= call.finished_at


def test_embedded_http_cancel_ends_the_call_cancelled_with_no_response(embedded, tmp_path):
    client = Client(embedded.url)
    client.initialize()
    future = in_thread(client.request, "tools/call", {
        "name": "background_job", "arguments": {"steps": 1, "gate": str(tmp_path / "never")}},
        request_id="doomed")
    wait_until(lambda: ToolCall.objects.filter(request_id="doomed", state="running").exists())
    response = client.notify("notifications/cancelled", {"requestId": "doomed", "reason": "enough"})
    assert response.status_code == 202
    exchange = future.result(PATIENCE)
    assert exchange.response is None
    [call] = records()
    assert (call.state, call.response, call.error) == ("cancelled", None, "")
    assert call.finished_at is not None


def test_embedded_stdio_runs_the_call_in_the_server_process_and_cancels_it(tmp_path):
    env = {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings", **EMBEDDED, **database_env()}
    with StdioServer(env=env) as server:
        server.initialize()
        gate = tmp_path / "gate"
        first = server.send_request("tools/call", {
            "name": "background_job", "arguments": {"steps": 2, "gate": str(gate)},
            "_meta": {"progressToken": "bg"}})
        wait_until(lambda: ToolCall.objects.filter(state="running", progress=2).exists())
        gate.touch()
        response = server.response(first)
        assert pid_of(response["result"]) == server.process.pid
        assert progress_of(server.notifications) == [1, 2]
        call = ToolCall.objects.get(request_id=first)
        assert (call.state, call.delivery, call.session_id) == ("completed", "local", "")
        assert call.response == response
        assert (call.progress, call.total) == (2, 2)
        assert call.worker == runs_in(server.process.pid) and call.runner
        assert call.created_at <= call.started_at <= call.finished_at

        doomed = server.send_request("tools/call", {
            "name": "background_job", "arguments": {"steps": 1, "gate": str(tmp_path / "never")}})
        wait_until(lambda: ToolCall.objects.filter(request_id=doomed, state="running").exists())
        server.notify("notifications/cancelled", {"requestId": doomed, "reason": "enough"})
        wait_until(lambda: ToolCall.objects.filter(request_id=doomed, state="cancelled").exists())
        server.read_to_end()  # everything it still writes, up to its exit
        assert not [m for m in server.received if m.get("id") == doomed and "method" not in m]
        assert ToolCall.objects.get(request_id=doomed).response is None


def test_modern_calls_and_input_required_on_the_embedded_default(embedded):
    status, messages = post_over_http(embedded.url, "tools/call", "m1", {**envelope(), "progressToken": "p"},
                                      name="background_job", arguments={"steps": 2})
    assert status == 200
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 2 + [None]
    assert progress_of(messages) == [1, 2]
    result = messages[-1]["result"]
    assert result["resultType"] == "complete" and pid_of(result) == embedded.process.pid
    [call] = records()
    assert (call.state, call.delivery, call.protocol_version, call.session_id) == (
        "completed", "local", MODERN, "")
    assert (call.progress, call.total) == (2, 2)

    _first, second = confirm_in_two_rounds(embedded.url, embedded.url)
    assert json.loads(second["content"][0]["text"]) == {
        "pid": embedded.process.pid, "action": "ship", "confirmed": True}
    rounds = ToolCall.objects.filter(tool="background_confirm").order_by("created_at")
    assert [(c.state, c.worker) for c in rounds] == [("completed", runs_in(embedded.process.pid))] * 2


def confirm_in_two_rounds(first_url: str, second_url: str) -> tuple[dict, dict]:
    """``background_confirm`` on the 2026-07-28 wire: round 1 (input_required) on ``first_url``,
    round 2 (with the answer and the sealed state) on ``second_url``; both results."""
    status, messages = post_over_http(first_url, "tools/call", 1, ELICITING, name="background_confirm",
                                      arguments={"action": "ship"})
    assert status == 200, messages
    first = messages[-1]["result"]
    assert first["resultType"] == "input_required", first
    assert first["inputRequests"]["confirm"]["method"] == "elicitation/create"
    assert first["requestState"].startswith("v1.") and "ship" not in first["requestState"]
    status, messages = post_over_http(second_url, "tools/call", 2, ELICITING, name="background_confirm",
                                      arguments={"action": "ship"}, inputResponses={"confirm": CONFIRM},
                                      requestState=first["requestState"])
    assert status == 200, messages
    second = messages[-1]["result"]
    assert second["resultType"] == "complete", second
    return first, second


# A deployment: two daphne processes, one in JSON-response mode, and a Celery worker --------------
@dataclass
class Deployment:
    a: DaphneServer
    b: DaphneServer
    json_mode: DaphneServer  # ENABLE_JSON_RESPONSE, and VALIDATE_TOOL_CALL_ARGUMENTS off
    worker: CeleryWorker


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    require_services()
    broker = redis_broker(BROKER_DB)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
    env = {"CELERY_BROKER_URL": broker}
    json_mode_settings = {**SETTINGS, "ENABLE_JSON_RESPONSE": True, "VALIDATE_TOOL_CALL_ARGUMENTS": False}
    with django_db_blocker.unblock(), \
            cluster(2, redis_db=REDIS_DB, mcp_settings=AUTHENTICATED, env=env) as (a, b):
        json_mode = DaphneServer(mcp_settings=json_mode_settings, env={"REDIS_URL": redis_url, **env})
        try:
            with celery_worker(broker_url=broker, redis_url=redis_url,
                               mcp_settings_json=json.dumps(SETTINGS)) as worker:
                yield Deployment(a, b, json_mode, worker)
        finally:
            json_mode.stop()


def test_modern_calls_are_relayed_from_the_worker_to_the_process_that_received_them(deployment, tmp_path):
    worker, since = deployment.worker, len(deployment.worker.log)
    meta, gate = {**envelope(), "progressToken": "p"}, tmp_path / "gate"
    held = in_thread(post_over_http, deployment.a.url, "tools/call", 1, meta, name="background_job",
                     arguments={"steps": 3, "gate": str(gate)})
    wait_until(lambda: ToolCall.objects.filter(state="running", progress=3).exists())
    # The one worker is busy: a call to the other process waits in the queue meanwhile.
    second = in_thread(post_over_http, deployment.b.url, "tools/call", 2, meta, name="background_job",
                       arguments={"steps": 3})
    wait_until(lambda: ToolCall.objects.filter(state="queued").exists())
    gate.touch()
    for future in (held, second):
        status, messages = future.result(PATIENCE)
        assert status == 200
        assert [m.get("method") for m in messages] == ["notifications/progress"] * 3 + [None]
        assert progress_of(messages) == [1, 2, 3]
        assert all(m["params"]["progressToken"] == "p" for m in messages[:-1])
        result = messages[-1]["result"]
        assert result["resultType"] == "complete" and pid_of(result) == worker.process.pid
    calls = records()
    assert [(c.state, c.delivery, c.protocol_version, c.worker) for c in calls] == [
        ("completed", "relay", MODERN, runs_in(worker.process.pid))] * 2
    assert [(c.progress, c.total) for c in calls] == [(3, 3)] * 2
    assert calls[0].web_channel != calls[1].web_channel  # each answered by its own process
    assert received(worker, since) == [c.id for c in calls]


def test_a_tool_on_the_worker_sees_who_sent_the_call(deployment):
    """The request's principal (an API key's user and its scopes) is the one the tool sees on the
    worker: on the handshake-era stream, on the 2026-07-28 relay, and none for an anonymous call."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("ada")
    worker, ada = deployment.worker, {"user": "ada", "scopes": ["mcp:read"], "method": "api-key"}
    client = Client(deployment.a.url, headers={"x-api-key": "ada"})
    client.initialize()
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 1}})
    assert exchange.response is not None, worker.log
    seen = json.loads(exchange.response["result"]["content"][0]["text"])
    assert (seen["pid"], seen["principal"]) == (worker.process.pid, ada)
    status, messages = post_over_http(deployment.b.url, "tools/call", 7, extra_headers={"x-api-key": "ada"},
                                      name="background_job", arguments={"steps": 1})
    seen = json.loads(messages[-1]["result"]["content"][0]["text"])
    assert (status, seen["pid"], seen["principal"]) == (200, worker.process.pid, ada)
    _status, messages = post_over_http(deployment.b.url, "tools/call", 8, name="background_job",
                                       arguments={"steps": 1})
    assert json.loads(messages[-1]["result"]["content"][0]["text"])["principal"] is None
    calls = records()
    assert [(c.principal or {}).get("scopes") for c in calls] == [["mcp:read"], ["mcp:read"], None]
    assert [c.owner.username if c.owner else None for c in calls] == ["ada", "ada", None]
    assert all(c.worker == runs_in(worker.process.pid) for c in calls)


def test_input_required_from_a_background_tool_in_two_rounds_on_the_worker(deployment):
    worker = deployment.worker
    first, second = confirm_in_two_rounds(deployment.a.url, deployment.b.url)
    assert first["inputRequests"]["confirm"]["params"]["message"] == "Really ship?"
    assert json.loads(second["content"][0]["text"]) == {
        "pid": worker.process.pid, "action": "ship", "confirmed": True}
    rounds = records()
    assert [(c.tool, c.state, c.delivery, c.worker) for c in rounds] == [
        ("background_confirm", "completed", "relay", runs_in(worker.process.pid))] * 2
    assert rounds[0].response["result"]["resultType"] == "input_required"


MEETING_ANSWERS = {"Where is the launch?": {"place": "Oslo"}, "Which room in Oslo?": {"room": 7},
                   "Do you want to ship?": {"confirm": True, "priority": "high"}}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_declared_asks_of_a_background_tool_are_asked_from_the_worker_in_either_era(deployment, mode):
    """``background_meeting`` declares two asks, the second depending on the first answer; our
    client's requests alternate between the two processes. In auto mode (2026-07-28, the Tasks
    extension declared) the call is a task whose questions the worker puts on it; in legacy mode
    the worker asks live on the call's stream, answered through the other process. The body runs
    once, in the worker."""
    worker = deployment.worker
    factory = round_robin([deployment.a.url, deployment.b.url])
    asked: list[str] = []

    def elicit(params: dict) -> dict:
        asked.append(params["message"])
        return {"action": "accept", "content": MEETING_ANSWERS[params["message"]]}

    client = AsyncClient(CheckedHTTPTransport(deployment.a.url, http_client_factory=factory), mode=mode)
    client.on_elicitation(elicit)
    async with client:
        assert client.is_modern == (mode == "auto")
        result = await client.call_tool("background_meeting", {"topic": "launch"})
        confirmed = await client.call_tool("background_confirm_action", {"action": "ship"})
    assert json.loads(result.text) == {
        "pid": worker.process.pid, "topic": "launch", "place": "Oslo", "room": 7}
    assert json.loads(confirmed.text) == {
        "pid": worker.process.pid, "action": "accept", "content": {"confirm": True, "priority": "high"}}
    assert asked == list(MEETING_ANSWERS)
    calls = await run_in_thread(records)
    assert [(c.tool, c.state, c.delivery, c.worker) for c in calls] == [
        (tool, "completed", "task" if mode == "auto" else "stream", runs_in(worker.process.pid))
        for tool in ("background_meeting", "background_confirm_action")]


def test_declared_asks_of_a_background_tool_in_rounds_relayed_from_the_worker(deployment):
    """Without the Tasks extension a 2026-07-28 call is relayed: each round is a call the worker
    runs, its asks in an input_required result whose sealed state the next round opens on the
    other process."""
    worker, urls = deployment.worker, [deployment.a.url, deployment.b.url]
    params: dict = {}
    for round_number in range(3):
        status, messages = post_over_http(urls[round_number % 2], "tools/call", round_number, ELICITING,
                                          name="background_meeting", arguments={"topic": "launch"}, **params)
        assert status == 200, messages
        result = messages[-1]["result"]
        if round_number < 2:
            [(key, question)] = result["inputRequests"].items()
            answer = {"action": "accept", "content": MEETING_ANSWERS[question["params"]["message"]]}
            params = {"inputResponses": {key: answer}, "requestState": result["requestState"]}
    assert json.loads(result["content"][0]["text"]) == {
        "pid": worker.process.pid, "topic": "launch", "place": "Oslo", "room": 7}
    assert [(c.state, c.delivery, c.worker) for c in records()] == [
        ("completed", "relay", runs_in(worker.process.pid))] * 3


def test_json_response_mode_gets_the_workers_result_as_json(deployment):
    url, worker = deployment.json_mode.url, deployment.worker
    client = new_session(url)
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 2},
                                             "_meta": {"progressToken": "p"}})
    assert exchange.headers["content-type"].startswith("application/json")
    assert pid_of(exchange.response["result"]) == worker.process.pid
    status, messages = post_over_http(url, "tools/call", 5, name="background_job", arguments={"steps": 1})
    assert status == 200 and len(messages) == 1
    assert pid_of(messages[0]["result"]) == worker.process.pid
    calls = records()
    assert [(c.state, c.delivery, c.worker) for c in calls] == [
        ("completed", "relay", runs_in(worker.process.pid))] * 2
    assert calls[0].response == exchange.response


@pytest.mark.parametrize("validated", [True, False], ids=["validation-on", "validation-off"])
def test_invalid_arguments_are_refused_before_anything_is_queued(deployment, validated):
    server = deployment.a if validated else deployment.json_mode
    worker, since = deployment.worker, len(deployment.worker.log)
    client = new_session(server.url)
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": "three"}})
    status, messages = post_over_http(server.url, "tools/call", 3, name="background_job",
                                      arguments={"steps": 1, "limit": "soon"})
    assert status == 200
    for result in (exchange.response["result"], messages[-1]["result"]):
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("Invalid arguments"), result
    assert not ToolCall.objects.exists()
    # A good call after them is the first task the worker takes: nothing was queued before it.
    text = call_tool(client, server.url, "background_job", {"steps": 1})
    assert json.loads(text)["pid"] == worker.process.pid
    [call] = records()
    assert received(worker, since) == [call.id]


# Deploy skew: the worker runs code without the tool ----------------------------------------------
@pytest.fixture
def skewed(django_db_blocker):
    """A daphne process with the test tools, and a worker with the demo's alone (``tests.settings``
    leaves ``tests.stdio_app`` out), on their own broker."""
    require_services()
    broker = redis_broker(SKEW_BROKER_DB)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{SKEW_REDIS_DB}"
    env = {"CELERY_BROKER_URL": broker}
    with cluster(1, redis_db=SKEW_REDIS_DB, mcp_settings=SETTINGS, env=env) as (web,), \
            celery_worker(broker_url=broker, redis_url=redis_url, settings_module="tests.settings",
                          name="skewed") as worker:
        yield web, worker


def test_a_worker_without_the_tool_fails_the_call_and_goes_on_serving(skewed):
    web, worker = skewed
    client = new_session(web.url)
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 1}})
    status, messages = post_over_http(web.url, "tools/call", 4, name="background_job", arguments={"steps": 1})
    assert (exchange.status, status) == (200, 400)
    for error in (exchange.response["error"], messages[-1]["error"]):
        assert error["code"] == -32602, error
        assert "background_job is not registered in the worker" in error["message"]
    handshake, modern = records()
    assert (handshake.delivery, modern.delivery) == ("stream", "relay")
    for call in (handshake, modern):
        assert call.state == "failed" and "not registered in the worker" in call.error
        assert call.worker == runs_in(worker.process.pid)
    assert handshake.response == exchange.response
    # Not a crash loop: the worker lives, takes each task once, and runs the next call it gets.
    assert worker.process.poll() is None
    assert call_tool(client, web.url, "count_in_background", {"to": 1}) == "Counted to 1"
    counted = ToolCall.objects.get(tool="count_in_background")
    assert (counted.state, counted.worker) == ("completed", runs_in(worker.process.pid))
    assert received(worker) == [handshake.id, modern.id, counted.id]


# The BACKGROUND_CALLS setting -------------------------------------------------------------------
# A broker nothing listens on: a call handed to Celery here would never be answered.
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def background_calls(choice: str, **other_settings: object) -> override_settings:
    return override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALLS": choice}, **other_settings)


def where_server(reports: list) -> Server:
    """A server with one background tool, ``where``, which says which process ran it."""
    server = Server("background-settings", configuration=Configuration(
        exception_reporter=lambda exc, context: reports.append(exc)))

    @server.tool(background=True)
    def where() -> str:
        """The id of the process it runs in."""
        return str(os.getpid())

    return server


async def call_over_http(server: Server) -> dict:
    """``where`` called on a 2026-07-28 request to the server's HTTP transport, in process."""
    transport = StreamableHTTPTransport(server)
    try:
        reply = await post(transport.as_asgi(), modern_request("tools/call", 1, name="where", arguments={}))
    finally:
        await transport.close()
    return reply.response


async def call_over_stdio(server: Server) -> dict:
    """``where`` called on a stdio session (initialize, then the call), in process."""
    revision = "2025-11-25"
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "where", "arguments": {}}},
    ]
    for message in messages:
        check_client_message(message, revision)
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdout = io.BytesIO()
    transport = StdioTransport(server, stdin=stdin, stdout=stdout, stderr=io.StringIO())
    await asyncio.wait_for(transport.serve(), PATIENCE)
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, revision)
    return next(a for a in answers if a.get("id") == 2)


async def test_local_runs_in_the_web_process_even_with_a_broker(short_lived_connections):
    with background_calls("auto", CELERY_BROKER_URL=UNREACHABLE_BROKER):
        assert runner_name() == "celery"  # the broker is configured: "auto" would use it
    with background_calls("local", CELERY_BROKER_URL=UNREACHABLE_BROKER):
        assert runner_name() == "local"
        response = await call_over_http(where_server([]))
    assert response["result"]["content"][0]["text"] == str(os.getpid())
    call = await run_in_thread(ToolCall.objects.get)
    assert (call.state, call.delivery, call.worker) == ("completed", "local", runs_in(os.getpid()))


@pytest.mark.parametrize("call", [call_over_http, call_over_stdio], ids=["http", "stdio"])
async def test_an_unknown_background_calls_value_is_refused(short_lived_connections, call):
    reports: list = []
    with background_calls("sometimes"):
        with pytest.raises(ImproperlyConfigured, match=r"MCP_SERVER\['BACKGROUND_CALLS'\] must be one of"):
            runner_name()
        response = await call(where_server(reports))
    assert response["error"]["code"] == -32603
    [error] = reports
    assert isinstance(error, ImproperlyConfigured) and "BACKGROUND_CALLS" in str(error)
    assert "'sometimes'" in str(error)
    assert not await run_in_thread(ToolCall.objects.exists)  # nothing ran, nothing was recorded


async def test_a_call_past_its_principals_share_over_stdio_gets_a_json_rpc_error(short_lived_connections):
    # Over stdio the transport knows no principal: its one client counts as "local".
    held = await run_in_thread(ToolCall.objects.create, id="held", tool="where", principal_key="local",
                               state=ToolCall.State.RUNNING)
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALLS": "local",
                                       "MAX_BACKGROUND_CALLS_PER_PRINCIPAL": 1}):
        response = await call_over_stdio(where_server([]))
    error = response["error"]
    assert error["code"] == -32600 and error["data"] == {"retryAfter": 5}, error
    assert error["message"].startswith("Too Many Requests: 1 background calls of this client"), error
    assert [call.id for call in await run_in_thread(list, ToolCall.objects.all())] == [held.id]


async def test_a_call_run_here_past_its_time_limit_gets_the_error_not_silence(short_lived_connections):
    server = Server("time-limited")

    @server.tool(background=True, name="where")
    def waits_for_a_cancel(server_context: ServerContext) -> str:
        """Waits until it is cancelled (at most a minute), as a long call that checks would."""
        server_context.cancellation.wait(PATIENCE)
        server_context.raise_if_cancelled()
        return "never stopped"

    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALLS": "local",
                                       "BACKGROUND_CALL_TIME_LIMIT": 0.2}):
        response = await call_over_stdio(server)
    error = response["error"]
    assert error["code"] == -32603 and "BACKGROUND_CALL_TIME_LIMIT (0.2 s)" in error["message"], error
    call = await run_in_thread(ToolCall.objects.get)
    assert (call.state, call.response) == ("failed", response)
