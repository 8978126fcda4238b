"""The Tasks extension (SEP-2663) on one process (the embedded runner): negotiation, the task
surface's errors, input over tasks/update, expiry and cleanup. The same on two daphne processes and
a Celery worker is tests/test_tasks_cluster.py; the suite's tasks-* scenarios run in conformance/run."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_server import Capabilities, InputRequiredResult, Server, ServerContext
from mcp_server.extensions.tasks import Tasks
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import ToolCall

from .http_support import call_asgi, post_headers
from .modern_support import envelope, modern_request, post, sse_messages
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

pytestmark = pytest.mark.asyncio

TASKS = "io.modelcontextprotocol/tasks"
DECLARING = envelope({"extensions": {TASKS: {}}, "elicitation": {"form": {}}})


def build_server(declare: bool = True) -> Server:
    capabilities = Capabilities().support_tools()
    if declare:
        capabilities.support_extensions(Tasks.capability())
    server = Server("tasks", version="1.0", capabilities=capabilities)

    @server.tool(background=True)
    async def wait_a_little(server_context: ServerContext) -> str:
        await asyncio.sleep(0.05)
        return "waited"

    @server.tool(background=True, task_only=True)
    async def only_as_task() -> str:
        return "a task"

    @server.tool(background=True)
    async def two_questions(server_context: ServerContext) -> str | InputRequiredResult:
        first, second = server_context.input_response("first"), server_context.input_response("second")
        if first is None or second is None:
            form = InputRequiredResult.form_elicitation("Name?", {"type": "object", "properties": {
                "name": {"type": "string"}}})
            return InputRequiredResult({"first": form, "second": form})
        return f"{first['content']['name']} and {second['content']['name']}"

    return server


@pytest.fixture
async def app(short_lived_connections, transactional_db):
    transport = StreamableHTTPTransport(build_server())
    yield transport.as_asgi()
    await transport.close()


def call(name: str, request_id=1, meta=None) -> dict:
    return modern_request("tools/call", request_id, meta=meta or DECLARING, name=name, arguments={})


def task_request(method: str, task_id: str, request_id=2, meta=None, **params) -> dict:
    return modern_request(method, request_id, meta=meta or DECLARING, taskId=task_id, **params)


async def until(app, task_id: str, *statuses: str) -> dict:
    deadline = time.monotonic() + PATIENCE
    while True:
        result = (await post(app, task_request("tasks/get", task_id))).result
        if result["status"] in statuses or time.monotonic() > deadline:
            assert result["status"] in statuses, result
            return result
        await asyncio.sleep(0.02)


@pytest.mark.feature("TASK-01")
async def test_the_extension_is_declared_in_discover_and_initialize(app):
    discovered = (await post(app, modern_request("server/discover", 1))).result
    assert discovered["capabilities"]["extensions"] == {TASKS: {}}
    assert "tasks" not in discovered["capabilities"]  # the 2025-11-25 slot is not used
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    check_client_message(initialize, "2025-11-25")
    raw = await call_asgi(app, "POST", post_headers(), [json.dumps(initialize).encode()])
    answer = sse_messages(raw.body.decode())[-1] if raw.body.startswith(b"event") else json.loads(raw.body)
    check_server_message(answer, "2025-11-25", "initialize")
    assert answer["result"]["capabilities"]["extensions"] == {TASKS: {}}


@pytest.mark.feature("TASK-02", "TASK-04")
async def test_a_background_tool_is_a_task_only_for_a_request_declaring_the_extension(app):
    plain = (await post(app, call("wait_a_little", meta=envelope()))).result
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "waited"

    created = (await post(app, call("wait_a_little"))).result
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000
    record = await run_in_thread(ToolCall.objects.get, id=created["taskId"])
    assert record.task and record.delivery == "task"
    done = await until(app, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "waited" and done["resultType"] == "complete"


@pytest.mark.feature("TASK-03")
async def test_a_task_only_tool_without_the_extension_gets_32021_naming_it(app):
    reply = await post(app, call("only_as_task", meta=envelope()))
    assert reply.error["code"] == -32021
    assert reply.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert await run_in_thread(ToolCall.objects.count) == 0


@pytest.mark.feature("TASK-04", "TASK-06")
async def test_the_task_methods_refuse_what_they_cannot_serve(app):
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        extra = {"inputResponses": {}} if method == "tasks/update" else {}
        undeclared = await post(app, task_request(method, "x", meta=envelope(), **extra))
        assert undeclared.error["code"] == -32021, method
        unknown = await post(app, task_request(method, "no-such-task", **extra))
        assert unknown.error["code"] == -32602 and "Task not found" in unknown.error["message"]
    for removed in ("tasks/result", "tasks/list"):
        assert (await post(app, modern_request(removed, 3, meta=DECLARING))).error["code"] == -32601
    transport = StreamableHTTPTransport(build_server(declare=False))
    try:
        reply = await post(transport.as_asgi(), task_request("tasks/get", "x"))
        assert reply.error["code"] == -32601
        sync = (await post(transport.as_asgi(), call("wait_a_little"))).result
        assert sync["resultType"] == "complete"  # the server does not declare it: no task
    finally:
        await transport.close()


@pytest.mark.feature("TASK-05")
async def test_answers_come_one_by_one_and_the_task_goes_on_once_all_are_in(app):
    task_id = (await post(app, call("two_questions"))).result["taskId"]
    asking = await until(app, task_id, "input_required")
    assert sorted(asking["inputRequests"]) == ["first", "second"]
    answer = {"action": "accept", "content": {"name": "Ann"}}
    ack = await post(app, task_request("tasks/update", task_id, inputResponses={
        "first": answer, "never-asked": answer}))
    assert ack.result == {"resultType": "complete"}
    still = (await post(app, task_request("tasks/get", task_id))).result
    assert still["status"] == "input_required" and list(still["inputRequests"]) == ["second"]
    bad = await post(app, task_request("tasks/update", task_id, inputResponses={"second": "yes"}))
    assert bad.error["code"] == -32602
    await post(app, task_request("tasks/update", task_id, inputResponses={
        "second": {"action": "accept", "content": {"name": "Bob"}}}))
    done = await until(app, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Ann and Bob"


@pytest.mark.feature("TASK-09")
async def test_an_expired_task_is_refused_and_cleaned_up(app):
    task_id = (await post(app, call("wait_a_little"))).result["taskId"]
    await until(app, task_id, "completed")
    long_ago = timezone.now() - timedelta(hours=2)
    await run_in_thread(lambda: ToolCall.objects.filter(id=task_id).update(created_at=long_ago))
    expired = await post(app, task_request("tasks/get", task_id))
    assert expired.error["code"] == -32602 and "expired" in expired.error["message"]
    with override_settings(MCP_SERVER={"TASK_TTL_MS": None}):
        await run_in_thread(call_command, "mcp_clean_tasks")
        assert await run_in_thread(ToolCall.objects.filter(id=task_id).exists)
    await run_in_thread(call_command, "mcp_clean_tasks")
    assert not await run_in_thread(ToolCall.objects.filter(id=task_id).exists)
