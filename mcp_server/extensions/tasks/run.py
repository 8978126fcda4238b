"""Starting a task: the call is recorded (durably, before the client hears of it), queued for a
Celery worker or run on this process's loop, and the client gets ``CreateTaskResult`` at once.

A task's tool writes nothing to a stream: no request of the client stays open for it, and
progress and log notifications are not part of tasks (SEP-2663). Its progress message is kept on
the record and shown as the task's ``statusMessage``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcp_protocol.cancellation import Cancellation, CancelledError

from ...background import records
from ...background.execute import BackgroundContext, execute, process_name
from ...background.launch import request_transport
from ...background.runner import enqueue
from ...background.task_hooks import TaskHooks
from ...invoke import run_in_thread
from ...modern.request_session import ModernSession
from . import Tasks, missing_capability, request_capabilities
from .wire import task

TASK_RESULT = "task"
# The tasks this process runs itself (no Celery): kept referenced until they end.
_running: set[asyncio.Task] = set()


class DiscardOutbound:
    """Where a task's messages go: nowhere (its state is on the record)."""

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        return False

    async def respond(self, response: dict) -> None:
        return None

    async def end(self) -> None:
        return None


def task_session(server: Any, envelope: Any) -> ModernSession:
    """The session a task's tool sees: the creating request's envelope, no stream."""
    return ModernSession(server, envelope, outbound=DiscardOutbound(), listen_supported=True)


async def start(ctx: Any, call: Any, transport: Any, runtime: Any, tool: Any, arguments: dict,
                hooks: TaskHooks) -> dict:
    """Queue (or start here) the recorded ``call``; its ``CreateTaskResult``. ``hooks``: the
    extension's, which a task run here reports through."""
    if transport is not None:
        try:
            await run_in_thread(enqueue, call.id)
        except Exception as exc:
            await records.finish(call.id, records.State.FAILED, error=f"{type(exc).__name__}: {exc}")
            raise
    else:
        _spawn(_run_here(ctx, call.id, runtime, tool, arguments, hooks))
    return {**task(call), "resultType": TASK_RESULT}


def _spawn(coroutine: Any) -> None:
    running = asyncio.get_running_loop().create_task(coroutine)
    _running.add(running)
    running.add_done_callback(_running.discard)


async def _run_here(ctx: Any, call_id: str, runtime: Any, tool: Any, arguments: dict,
                    hooks: TaskHooks) -> None:
    """The embedded runner: the task's tool on this process's loop, cancellable from any process
    through this process's channel (``mcp.cancel``) and the record's flag."""
    session = task_session(ctx.server, ctx.session.envelope)
    if ctx.session.principal is not None:
        session.act_for(ctx.session.principal)
    runner = runtime.channel_key if runtime is not None and runtime.channel else f"local:{process_name()}"
    cancellation = Cancellation(ctx.request_id)
    background = BackgroundContext(ctx.server, session, request_id=ctx.request_id, method=ctx.method,
                                   params=ctx.params, message=ctx.message, cancellation=cancellation,
                                   user_context=ctx.server.server_context, call_id=call_id)
    background.run_as_task(hooks, request_transport(ctx))
    in_flight = runtime.in_flight if runtime is not None else {}
    in_flight[("call", call_id)] = cancellation
    try:
        if await records.start(call_id, runner, process_name()) is None:
            return
        with contextlib.suppress(CancelledError, Exception):
            # The record holds how it ended (execute leaves it in its final state).
            await execute(background, tool, arguments)
    finally:
        in_flight.pop(("call", call_id), None)


def wanted(ctx: Any, tool: Any) -> bool:
    """Whether this call of a background tool becomes a task: the server and the request both
    declare the extension. A task-only tool asked without it gets -32021 naming the extension."""
    server_declares = Tasks.server_supports(ctx.server.capabilities_for(ctx.protocol_version or ""))
    as_task = server_declares and Tasks.client_supports(request_capabilities(ctx))
    if tool.task_only and not as_task:
        raise missing_capability()
    return as_task
