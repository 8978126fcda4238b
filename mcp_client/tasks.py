"""The Tasks extension (SEP-2663) for applications that call now and fetch later.

    from mcp_client.tasks import start_tool_call, get_task, wait_for_task

    started = await start_tool_call(client, "export_orders", {"year": 2026})
    if isinstance(started, Task):          # the server made it a task
        save(started.task_id)              # ... and later, from any process:
        result = await wait_for_task(client, await get_task(client, started.task_id))

``start_tool_call`` declares the extension on that one request only, so the client's other calls
are untouched; the server decides whether to answer with a task. Every function needs a client
connected in the 2026-07-28 lifecycle (the extension is not defined before it). Each takes an
``AsyncClient``, typed as the ``ports.TaskClient`` it is (``async_client`` imports this module).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_protocol import methods
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.errors import INTERNAL_ERROR

from .errors import ClientError, NotConnectedError, ServerError, ValidationError
from .handlers import maybe_await, run_handler
from .ports import TaskClient, task_port
from .types import CallToolResult

EXTENSION_ID = methods.TASKS_EXTENSION
FINISHED = ("completed", "failed", "cancelled")
# When the server suggests no interval: a second between two polls.
DEFAULT_POLL_INTERVAL_MS = 1000


@dataclass
class Task:
    """A task as the server last described it (``CreateTaskResult`` or ``tasks/get``)."""

    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    input_requests: dict[str, dict] = field(default_factory=dict)
    result: dict | None = None
    error: dict | None = None

    @classmethod
    def from_wire(cls, data: Any) -> Task:
        if not isinstance(data, dict) or not isinstance(data.get("taskId"), str) \
                or data.get("status") not in (*FINISHED, "working", "input_required"):
            raise ValidationError(f"not a task: {data!r}")
        return cls(task_id=data["taskId"], status=data["status"], created_at=data.get("createdAt", ""),
                   last_updated_at=data.get("lastUpdatedAt", ""), ttl_ms=data.get("ttlMs"),
                   poll_interval_ms=data.get("pollIntervalMs"), status_message=data.get("statusMessage"),
                   input_requests=dict(data.get("inputRequests") or {}), result=data.get("result"),
                   error=data.get("error"))

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


async def _call(client: TaskClient, method: str, params: dict,
                cancellation: Cancellation | None = None) -> Any:
    """One request of the extension; refused on a client not in the 2026-07-28 lifecycle (its
    envelope declares the extension: see :func:`declaring`)."""
    if not client.connected:
        raise NotConnectedError("call connect() before using tasks")
    if not client.is_modern:
        raise ClientError("tasks need the 2026-07-28 lifecycle (SEP-2663 is not defined before it); "
                          f"this client speaks {client.protocol_version}")
    return await task_port(client).send_request(method, params, cancellation=cancellation)


def declaring(capabilities: dict) -> dict:
    """``capabilities`` declaring the extension too: what a 2026-07-28 envelope of this client
    says, since ``call_tool`` drives a returned task to its end."""
    return {**capabilities, "extensions": {**(capabilities.get("extensions") or {}), EXTENSION_ID: {}}}


async def start_tool_call(client: TaskClient, name: str, arguments: dict | None = None, *,
                          cancellation: Cancellation | None = None) -> Task | CallToolResult:
    """``tools/call``, the extension declared: a :class:`Task` when the server made one, else the
    tool's result (a server may answer at once)."""
    result = await _call(client, "tools/call", {"name": name, "arguments": arguments or {}}, cancellation)
    if isinstance(result, dict) and result.get("resultType") == "task":
        return Task.from_wire(result)
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        raise ValidationError(f"tools/call result needs a content list: {result!r}")
    return CallToolResult.from_wire(result)


async def get_task(client: TaskClient, task_id: str) -> Task:
    """``tasks/get``: the task now (a ServerError -32602 when the server knows no such task)."""
    return Task.from_wire(await _call(client, methods.TASKS_GET, {"taskId": task_id}))


async def update_task(client: TaskClient, task_id: str, input_responses: dict[str, dict]) -> None:
    """``tasks/update``: answers to the task's ``input_requests``, by their keys."""
    await _call(client, methods.TASKS_UPDATE, {"taskId": task_id, "inputResponses": input_responses})


async def cancel_task(client: TaskClient, task_id: str) -> None:
    """``tasks/cancel``: asks the server to stop; the task ends ``cancelled`` (or as it finished)."""
    await _call(client, methods.TASKS_CANCEL, {"taskId": task_id})


async def wait_for_task(client: TaskClient, task: Task, *, timeout: float | None = None,
                        cancellation: Cancellation | None = None,
                        on_status: Callable[[Task], Any] | None = None) -> CallToolResult:
    """Poll ``task`` to its end at the server's ``pollIntervalMs``, answering its input requests
    with the client's handlers (``on_elicitation``, ``on_sampling``, ``on_roots``): the tool's
    result. ``on_status(task)`` hears each new status or status message (a task's progress). A
    failed task raises ServerError with its JSON-RPC error; a cancelled one (or ``cancellation``,
    which cancels the task too) CancelledError; ``timeout`` seconds without an end, TimeoutError
    (the task goes on)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    answered: set[str] = set()
    told: tuple[str, str | None] | None = None
    while True:
        if on_status is not None and (task.status, task.status_message) != told:
            told = (task.status, task.status_message)
            await maybe_await(on_status(task))
        if task.finished:
            break
        if cancellation is not None and cancellation.cancelled:
            await cancel_task(client, task.task_id)
            raise CancelledError(task.task_id, cancellation.reason or "cancelled")
        pending = {key: entry for key, entry in task.input_requests.items() if key not in answered}
        if task.status == "input_required" and pending:
            await update_task(client, task.task_id, await _answers(client, pending))
            answered |= set(pending)
        else:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"task {task.task_id} did not end within {timeout} s")
            await asyncio.sleep((task.poll_interval_ms or DEFAULT_POLL_INTERVAL_MS) / 1000)
        task = await get_task(client, task.task_id)
    if task.status == "failed":
        error = task.error or {}
        raise ServerError(str(error.get("message", "the task failed")), error.get("code", INTERNAL_ERROR),
                          error.get("data"))
    if task.status == "cancelled":
        raise CancelledError(task.task_id, task.status_message or "cancelled")
    if not isinstance(task.result, dict) or not isinstance(task.result.get("content"), list):
        raise ValidationError(f"a completed task needs a tool result: {task.result!r}")
    return CallToolResult.from_wire(task.result)


async def final_result(client: TaskClient, created: dict, cancellation: Cancellation | None = None,
                       on_status: Callable[[Task], Any] | None = None) -> dict:
    """The tool result (as sent) a ``CreateTaskResult`` ends with: what ``call_tool`` returns."""
    return (await wait_for_task(client, Task.from_wire(created), cancellation=cancellation,
                                on_status=on_status)).raw


async def call_tool_as_task(client: TaskClient, name: str, arguments: dict | None = None, *,
                            timeout: float | None = None,
                            cancellation: Cancellation | None = None) -> CallToolResult:
    """``start_tool_call`` and ``wait_for_task`` in one: the tool's result, task or not."""
    started = await start_tool_call(client, name, arguments, cancellation=cancellation)
    if isinstance(started, CallToolResult):
        return started
    return await wait_for_task(client, started, timeout=timeout, cancellation=cancellation)


async def _answers(client: TaskClient, requests: dict[str, dict]) -> dict[str, dict]:
    answers = {}
    for key, entry in requests.items():
        method = entry.get("method") if isinstance(entry, dict) else None
        handler = task_port(client).server_request_handler(method)
        if handler is None:
            raise ClientError(f"the task asks {method!r} ({key}) and no handler is registered for it")
        answers[key] = await run_handler(handler, entry.get("params") or {})
    return answers
