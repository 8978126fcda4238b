"""Running one background call, wherever it runs: its progress and end go on its record, the
cancel flag set on the record (by any process, or by admin) reaches the running tool, and so does
the deployment's bound on how long a call runs (``BACKGROUND_CALL_TIME_LIMIT``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import InterfaceError, OperationalError

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.errors import InternalError, MCPError

from ..context import ServerContext
from ..handlers.tools import run_tool
from ..primitives.tool import Tool
from ..settings import mcp_settings
from ..telemetry import metrics
from . import records
from .task_hooks import TaskHooks

logger = logging.getLogger("mcp_server.background")

# Seconds between two looks at the call's cancel flag (and writes of its progress) while it runs:
# a cancel set on the record reaches the tool's ``cancelled()`` within this.
WATCH_INTERVAL = 0.5
# The database away (a restart, a failover): the call runs on, and its end waits this long at most
# for the database to take its final state, before the call ends with the database's error.
DATABASE_ERRORS = (OperationalError, InterfaceError)
FINISH_PATIENCE = 60.0


def time_limit() -> float | None:
    """``BACKGROUND_CALL_TIME_LIMIT``, checked: seconds one run of a call may take (None: no bound)."""
    value = mcp_settings.BACKGROUND_CALL_TIME_LIMIT
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        raise ImproperlyConfigured("MCP_SERVER['BACKGROUND_CALL_TIME_LIMIT'] must be a positive number of "
                                   f"seconds or None, not {value!r}")
    return value


def time_limit_error(seconds: float) -> InternalError:
    return InternalError(f"The background call ran longer than BACKGROUND_CALL_TIME_LIMIT ({seconds:g} s) "
                         "allows, and was stopped")


def process_name() -> str:
    """Where a call runs, readable by a person: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


class BackgroundContext(ServerContext):
    """The ``ServerContext`` of a background call: what it does in a web process, and its
    progress is kept on the call's record too (written at most every ``WATCH_INTERVAL``).

    A task's context (the Tasks extension, :meth:`run_as_task`) brings its ``input_required``
    results to the client through the task (``task_input``, which ``mrtr`` calls), and publishes
    each change of the task's status through ``task_transport`` (None: the extension's default)."""

    task: TaskHooks | None = None
    task_input: Any = None
    task_transport: Any = None
    # Set when the call's cancellation came from its time limit, not from a cancel: it then ends
    # with an error, not silently.
    stopped_at_limit: float | None = None

    def __init__(self, *args: Any, call_id: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.call_id = call_id
        self._progress_lock = threading.Lock()
        self._progress: tuple[float, float | None, str | None] | None = None

    def run_as_task(self, hooks: TaskHooks, transport: Any) -> None:
        self.task, self.task_input, self.task_transport = hooks, hooks.fulfil, transport

    @classmethod
    def of(cls, ctx: ServerContext, call_id: str) -> BackgroundContext:
        """The same request as ``ctx`` (same session), as a background call. Its cancellation is
        its own, cancelled with the request's: a stop at the time limit must not mark the request
        itself cancelled, which would then get no response."""
        cancellation = Cancellation(ctx.request_id)
        ctx.cancellation.on_cancel(lambda request: cancellation.cancel(request.reason))
        background = cls(ctx.server, ctx.session, request_id=ctx.request_id, method=ctx.method,
                         params=ctx.params, message=ctx.message, cancellation=cancellation,
                         user_context=ctx.server.server_context, call_id=call_id)
        background.instrumentation = ctx.instrumentation
        return background

    def report_progress(self, progress: float, total: float | None = None,
                        message: str | None = None) -> Any:
        with self._progress_lock:
            self._progress = (progress, total, message)
        return super().report_progress(progress, total, message)

    def take_progress(self) -> tuple[float, float | None, str | None] | None:
        """The progress reported since the last call, if any."""
        with self._progress_lock:
            progress, self._progress = self._progress, None
        return progress


async def execute(ctx: BackgroundContext, tool: Tool, arguments: dict) -> dict:
    """Run the call's tool: its result, or MCPError / CancelledError as the tool ends. The
    record is left in its final state either way. Past ``BACKGROUND_CALL_TIME_LIMIT`` the tool is
    cancelled, as by a cancel (it stops at its next ``cancelled()`` check), and the call ends
    with -32603 instead of silently; a tool that returns anyway keeps its result."""
    watcher = asyncio.create_task(_watch(ctx, time_limit()))
    state, error, response = records.State.FAILED, "", None
    began = time.perf_counter()
    try:
        result = await run_tool(ctx, tool, arguments)
        state, response = records.State.COMPLETED, jsonrpc.response(ctx.request_id, result)
        return result
    except CancelledError:
        if ctx.stopped_at_limit is None:
            state = records.State.CANCELLED
            raise
        stopped = time_limit_error(ctx.stopped_at_limit)
        error, response = str(stopped), jsonrpc.error_from(ctx.request_id, stopped)
        raise stopped from None
    except MCPError as exc:
        error, response = str(exc), jsonrpc.error_from(ctx.request_id, exc)
        raise
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        with contextlib.suppress(*DATABASE_ERRORS):  # the final state below matters, not this
            await _write_progress(ctx)
        if ctx.cancellation.cancelled and ctx.stopped_at_limit is None:
            state, response = records.State.CANCELLED, None
        await _finish(ctx.call_id, state, response, error)
        metrics.background_call_ran(tool.name, state, time.perf_counter() - began)
        if ctx.task is not None:
            await ctx.task.changed(ctx.call_id, ctx.task_transport)


async def _watch(ctx: BackgroundContext, limit: float | None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit if limit is not None else None
    while not ctx.cancellation.cancelled:
        await asyncio.sleep(WATCH_INTERVAL if deadline is None
                            else max(0.0, min(WATCH_INTERVAL, deadline - loop.time())))
        try:
            await _write_progress(ctx)
            cancel = await records.cancel_requested(ctx.call_id)
        except DATABASE_ERRORS as exc:
            # The tool runs on: its progress is written, and its cancel flag read, at a next look.
            logger.warning("background call %s: its record cannot be read or written: %s", ctx.call_id, exc)
            cancel = False
        if cancel:
            ctx.cancellation.cancel("cancelled")
        elif deadline is not None and loop.time() >= deadline:
            ctx.stopped_at_limit = limit
            ctx.cancellation.cancel(f"it ran past BACKGROUND_CALL_TIME_LIMIT ({limit:g} s)")


async def _finish(call_id: str, state: str, response: dict | None, error: str) -> None:
    """The call's final state on its record, tried again while the database does not answer, for
    up to :data:`FINISH_PATIENCE`: a record left running would count against its principal's limit
    and show in admin as running. Its client waits for the answer meanwhile."""
    deadline = time.monotonic() + FINISH_PATIENCE
    delay = 0.25
    while True:
        try:
            await records.finish(call_id, state, response, error)
            return
        except DATABASE_ERRORS as exc:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("background call %s ended %s; its record cannot be written yet (next attempt in "
                           "%g s): %s", call_id, state, delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def _write_progress(ctx: BackgroundContext) -> None:
    progress = ctx.take_progress()
    if progress is not None:
        await records.record_progress(ctx.call_id, *progress)


class ProgressFloor:
    """Progress must increase (the specification): what does not go past the highest progress the
    client has seen does not pass (a run started again after its worker died counts anew)."""

    def __init__(self, highest: float | None = None):
        self.highest = highest

    def passes(self, message: dict) -> bool:
        if message.get("method") != methods.NOTIFICATIONS_PROGRESS:
            return True
        value = (message.get("params") or {}).get("progress")
        if not isinstance(value, int | float):
            return True
        if self.highest is not None and value <= self.highest:
            return False
        self.highest = value
        return True
