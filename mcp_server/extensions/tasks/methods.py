"""``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (SEP-2663).

Each is refused with -32601 when the server does not declare the extension, with -32021 when the
request does not, and answers -32602 ("Task not found") for an id that names no task the caller
may see, so another caller's task and a made-up id look the same.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol import jsonrpc
from mcp_protocol.errors import METHOD_NOT_FOUND, InternalError, InvalidParamsError, MCPError

from ...background import records
from ...background.launch import WORKER_STOPPED, cancel_call, request_transport
from ...background.queue_wait import expire_if_untaken
from ...background.recovery import run_again
from ...models import ToolCall
from ...mrtr import checked_input_responses
from . import Tasks, missing_capability, request_capabilities, store
from .access import may_see
from .notify import publish
from .wire import detailed, expired

State = ToolCall.State


async def get_task(ctx: Any) -> dict[str, Any]:
    call = await _task_of(ctx, "retrieve")
    call = await _settle_dead_runner(ctx, call)
    return detailed(call)


async def update_task(ctx: Any) -> dict[str, Any]:
    call = await _task_of(ctx, "update")
    responses = checked_input_responses(ctx.params.get("inputResponses"))
    if await store.answer(call.id, responses):
        await publish(call.id, request_transport(ctx))
    return {}


async def cancel_task(ctx: Any) -> dict[str, Any]:
    """Ack only: the call's flag is set and its runner told; the task ends ``cancelled`` when the
    tool stops (or another status, when it finished first). A finished task is acked as it is."""
    call = await _task_of(ctx, "cancel")
    if not call.finished:
        transport = request_transport(ctx)
        if transport is not None:
            call = await cancel_call(transport, call.id)
        else:
            call = await records.request_cancel(call.id)
        if call is not None and call.finished:
            await publish(call.id, transport)
    return {}


async def _task_of(ctx: Any, verb: str) -> ToolCall:
    if not Tasks.server_supports(ctx.server.capabilities_for(ctx.protocol_version or "")):
        raise MCPError(f"Method not found: {ctx.method} (this server does not declare the "
                       f"io.modelcontextprotocol/tasks extension)", code=METHOD_NOT_FOUND)
    if not Tasks.client_supports(request_capabilities(ctx)):
        raise missing_capability()
    params = ctx.params if isinstance(ctx.params, dict) else {}
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError(f"Invalid params: {ctx.method} needs params.taskId, a string")
    call = await records.get(task_id)
    if call is None or not call.task or not may_see(call, ctx.session):
        raise InvalidParamsError(f"Failed to {verb} task: Task not found")
    if expired(call):
        raise InvalidParamsError(f"Failed to {verb} task: Task has expired")
    return call


async def _settle_dead_runner(ctx: Any, call: ToolCall) -> ToolCall:
    """A task whose runner died mid-call fails with a JSON-RPC error (or runs again, when its tool
    is idempotent), and so does one that no worker took within BACKGROUND_CALL_QUEUE_TIMEOUT,
    found by whichever process is asked about it."""
    if call.state == State.QUEUED and call.delivery == "task":
        if await expire_if_untaken(call) is None:
            return call
        await publish(call.id, request_transport(ctx))
        return await records.get(call.id) or call
    if call.state not in (State.RUNNING, State.INPUT_REQUIRED) or not call.runner:
        return call
    transport = request_transport(ctx)
    runtime = await transport.ensure_runtime() if transport is not None else None
    if runtime is None or runtime.channel is None:
        return call
    if not await transport.liveness.holds_dead(call.runner, runtime.channel_key):
        return call
    if not await run_again(transport, call):
        response = jsonrpc.error_from(call.request_id, InternalError(WORKER_STOPPED))
        if await records.finish(call.id, State.FAILED, response, WORKER_STOPPED):
            await publish(call.id, transport)
    return await records.get(call.id) or call
