"""``mcp_client.tasks``: the Tasks extension's call-now, fetch-later API against our server (the
ASGI application in process, every message in both directions checked against the 2026-07-28
schema with the extension's definitions)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from mcp_client import AsyncClient, ClientError, ServerError
from mcp_client.tasks import (
    Task,
    call_tool_as_task,
    cancel_task,
    get_task,
    start_tool_call,
    update_task,
    wait_for_task,
)
from mcp_client.types import CallToolResult
from mcp_protocol.cancellation import CancelledError
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import ToolCall

from .client_support import CheckedHTTPTransport
from .test_tasks import build_server
from .waiting import PATIENCE

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def client(transactional_db, short_lived_connections):
    transport = StreamableHTTPTransport(build_server())
    app = transport.as_asgi()

    headers: list[tuple[str | None, str | None]] = []

    async def record(request: httpx.Request) -> None:
        headers.append((request.headers.get("mcp-method"), request.headers.get("mcp-name")))

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), event_hooks={"request": [record]})

    connected = AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory))
    connected.headers_sent = headers
    yield connected
    await connected.close()
    await transport.close()


async def until_status(client: AsyncClient, task_id: str, *statuses: str) -> Task:
    """The task once its status is one of ``statuses`` (or it finished), polled for PATIENCE s."""
    deadline = time.monotonic() + PATIENCE
    while True:
        task = await get_task(client, task_id)
        if task.status in statuses or task.finished or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.02)


async def until_finished(client: AsyncClient, task_id: str) -> Task:
    return await until_status(client, task_id, "completed", "failed", "cancelled")


@pytest.mark.feature("TASK-13")
async def test_a_task_is_started_fetched_later_and_driven_to_its_result(client):
    await client.connect(mode="modern")
    started = await start_tool_call(client, "wait_a_little")
    assert isinstance(started, Task) and started.status == "working" and started.poll_interval_ms == 1000
    again = await get_task(client, started.task_id)
    assert again.task_id == started.task_id
    # Mcp-Name carries the task id, so a load balancer can route by it (SEP-2663).
    assert ("tasks/get", started.task_id) in client.headers_sent
    result = await wait_for_task(client, again)
    assert isinstance(result, CallToolResult) and result.text == "waited"
    # call_tool declares the extension on a modern request and drives the task to its result.
    assert (await client.call_tool("wait_a_little")).text == "waited"
    assert await run_in_thread(ToolCall.objects.filter(tool="wait_a_little", task=True).count) == 2


@pytest.mark.feature("TASK-13")
async def test_call_tool_drives_a_task_and_a_failed_one_raises_its_error(client):
    await client.connect(mode="auto")
    assert client.is_modern
    assert (await client.call_tool("only_as_task")).text == "a task"
    with pytest.raises(ServerError) as failed:  # no elicitation handler: the task fails with -32021
        await client.call_tool("two_questions")
    assert failed.value.code == -32021


@pytest.mark.feature("TASK-13")
async def test_input_requests_are_answered_with_the_registered_handler(client):
    asked = []

    @client.on_elicitation
    async def answer(params: dict) -> dict:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": f"name {len(asked)}"}}

    await client.connect(mode="modern")
    result = await call_tool_as_task(client, "two_questions")
    assert result.text == "name 1 and name 2" and asked == ["Name?", "Name?"]


@pytest.mark.feature("TASK-13")
async def test_update_cancel_and_errors_of_the_low_level_calls(client):
    client.on_elicitation(lambda params: {"action": "decline"})  # declares the capability only
    await client.connect(mode="modern")
    started = await start_tool_call(client, "two_questions")
    task = await until_status(client, started.task_id, "input_required")
    assert task.status == "input_required" and sorted(task.input_requests) == ["first", "second"]
    await update_task(client, task.task_id, {"first": {"action": "accept", "content": {"name": "a"}}})
    assert list((await get_task(client, task.task_id)).input_requests) == ["second"]
    await cancel_task(client, task.task_id)
    ended = await until_finished(client, task.task_id)
    assert ended.status == "cancelled"
    with pytest.raises(CancelledError):
        await wait_for_task(client, ended)
    with pytest.raises(ServerError) as unknown:
        await get_task(client, "no-such-task")
    assert unknown.value.code == -32602


@pytest.mark.feature("TASK-13")
async def test_a_task_asking_what_the_client_cannot_answer_fails_with_32021(client):
    await client.connect(mode="modern")  # no elicitation handler: the capability is not declared
    with pytest.raises(ServerError) as failed:
        await call_tool_as_task(client, "two_questions", timeout=30)
    assert failed.value.code == -32021


async def test_tasks_need_the_2026_07_28_lifecycle(client):
    await client.connect(mode="legacy")
    with pytest.raises(ClientError, match="2026-07-28"):
        await start_tool_call(client, "wait_a_little")
