"""The web process's side of a background call: record it, queue it, and stay the client's end.

How the call's messages (progress, log messages, requests to the client, the response) reach the
client depends on how the request came:

- ``stream``: a handshake-era request answered on an SSE stream. The worker stores each message
  on the request's stream, as this process would, and hands it to whoever holds that stream: this
  process's POST stream, or the stream the client resumed on any other process. The worker holds
  the request itself once it starts (cancels and the client's answers go straight to it), and if
  it dies its request gets an error from whichever process watches the stream.
- ``relay``: a request with no resumable stream (2026-07-28, JSON responses). The worker sends its
  messages to this process, which answers the request as if the tool ran here.
- ``local``: the embedded default (no broker), and transports no worker can reach (stdio, a
  stateless endpoint, a call made in process such as admin's Try it): the tool runs in this
  process, with the same record and flags.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.errors import InternalError, MCPError

from .. import mrtr, telemetry
from ..errors import AnsweredElsewhere
from ..http.event_store import post_stream, request_key
from ..http.listen import ListenStream
from ..http.liveness import holder_channel
from ..input_required import InputRequiredResult
from ..invoke import call_user_code, run_in_thread
from ..models import ToolCall
from . import admission, records
from .execute import BackgroundContext, ProgressFloor, execute, process_name
from .queue_wait import expire_if_untaken, wait_before_check
from .recovery import run_again
from .runner import celery_enabled, enqueue, revoke
from .task_hooks import task_hooks, wanted_as_task

if TYPE_CHECKING:
    from ..context import ServerContext
    from ..http.runtime import Runtime
    from ..http.transport import StreamableHTTPTransport
    from ..primitives.tool import Tool

WORKER_STOPPED = "The worker running this call stopped before answering; send it again"
logger = logging.getLogger("mcp_server.background")


async def call_in_background(ctx: ServerContext, tool: Tool, arguments: dict) -> Any:
    as_task = wanted_as_task(ctx, tool)  # -32021 for a task-only tool the client cannot hold
    # What the record keeps is what the tool gets, wherever it runs: its declared arguments.
    arguments, params = admission.stored_parts(tool, arguments, ctx.params)
    if tool.prepares:
        prepared = await prepare(ctx, tool, arguments)
        if prepared is not None:
            return prepared  # the client is asked first (input_required)
    transport, runtime = _reachable_runtime(ctx)
    if as_task:
        call = await _record(ctx, tool, arguments, params, transport, runtime, "task")
        hooks = task_hooks()
        assert hooks is not None  # wanted_as_task is False without them
        return await hooks.start(ctx, call, transport, runtime, tool, arguments)
    delivery = "local" if transport is None else _delivery(ctx)
    call = await _record(ctx, tool, arguments, params, transport, runtime, delivery)
    if delivery == "local":
        return await _run_here(ctx, tool, arguments, call.id, runtime)
    unhook = ctx.cancellation.on_cancel(_cancel_forwarder(transport, call.id))
    try:
        if delivery == "stream":
            await _follow_stream(ctx, transport, runtime, call.id)
            raise AnsweredElsewhere()
        return await _relay(ctx, transport, runtime, call.id)
    except (AnsweredElsewhere, CancelledError):
        raise
    except Exception as exc:
        # The call ended in an error: the worker's (its record says so already), or this side's
        # (the broker refused the task, say), which the record must say too.
        await records.finish(call.id, records.State.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        unhook()


async def prepare(ctx: ServerContext, tool: Tool, arguments: dict) -> dict | None:
    """Run the tool's ``prepare`` (input_required rounds before the call is queued): the
    ``InputRequiredResult`` for the client, or None once it asks nothing more."""
    value = await mrtr.run_rounds(ctx, lambda: call_user_code(tool.prepare, arguments, server_context=ctx))
    if isinstance(value, InputRequiredResult):
        return mrtr.wire_result(ctx, value)
    if value is not None:
        raise TypeError(f"{tool.name}.prepare() must return an InputRequiredResult or None, "
                        f"not {type(value).__name__}")
    return None


async def _record(ctx: ServerContext, tool: Tool, arguments: dict, params: dict, transport: Any,
                  runtime: Any, delivery: str) -> ToolCall:
    """The call's record (``admission.stored_parts``: its declared arguments, and the request's
    other params), admitted within its principal's share (TooManyBackgroundCalls past it)."""
    session = ctx.session
    record = getattr(session, "record", None)  # the stored session, over Streamable HTTP
    call = await admission.admit(
        server=transport.group if transport is not None else "", tool=tool.name, arguments=arguments,
        params=params, principal_key=admission.principal_key_of(session),
        session_id=record.id if record is not None else "", request_id=ctx.request_id,
        request_key=request_key(ctx.request_id), protocol_version=ctx.protocol_version or "",
        owner_id=session.user_id, owned=session.user_id is not None, delivery=delivery,
        task=delivery == "task",
        principal=session.principal.to_record() if session.principal is not None else None,
        idempotent=bool((tool.annotations or {}).get("idempotentHint")),
        web_channel=runtime.channel_key if runtime is not None else "",
        # The context of the span serving this request (the caller's in "propagation_only"), so
        # that the worker's span joins the client's trace.
        trace_context=telemetry.trace_carrier(),
    )
    ctx.instrumentation["background_call"] = call.id
    return call


def request_transport(ctx: ServerContext) -> StreamableHTTPTransport | None:
    """The Streamable HTTP transport serving ``ctx``'s request: its stored session's, or (a request
    with no stored session: 2026-07-28, in process) the server's transport running on this event
    loop; None on stdio and in process."""
    transport = getattr(ctx.session, "transport", None)
    if transport is not None:
        return transport
    return next((t for t in ctx.server.transports if _runtime_of(t) is not None), None)


def _runtime_of(transport: Any) -> Runtime | None:
    current_runtime = getattr(transport, "current_runtime", None)  # stdio has no runtime
    return current_runtime() if current_runtime is not None else None


def _reachable_runtime(ctx: ServerContext) -> tuple[StreamableHTTPTransport | None, Runtime | None]:
    """The HTTP transport and runtime a worker can send this request's messages to; no transport
    when the call runs here (no broker, or a transport without a channel a worker can reach), with
    this loop's runtime if there is one."""
    # Read first, whatever the transport: an unknown BACKGROUND_CALLS value is refused on stdio
    # too, never silently run here.
    celery = celery_enabled()
    # A handshake-era session with no transport of its own (in process: admin's Try it,
    # server.handle()) has no stored session a worker could answer through: its call runs here.
    in_process = getattr(ctx.session, "transport", None) is None and not ctx.session.is_modern
    transport = request_transport(ctx)
    runtime = _runtime_of(transport)
    if runtime is None or runtime.channel is None or not celery or in_process:
        return None, runtime
    return transport, runtime


def _delivery(ctx: ServerContext) -> str:
    outbound = ctx.session.outbound
    if getattr(outbound, "sse", None) is not None and not ctx.session.is_modern:
        return "stream"
    return "relay"


# The embedded default ---------------------------------------------------------------------------
async def _run_here(ctx: ServerContext, tool: Tool, arguments: dict, call_id: str,
                    runtime: Runtime | None) -> Any:
    runner = runtime.channel_key if runtime is not None and runtime.channel else f"local:{process_name()}"
    if await records.start(call_id, runner, process_name()) is None:
        raise CancelledError(ctx.request_id, "cancelled before it started")
    return await execute(BackgroundContext.of(ctx, call_id), tool, arguments)


# Cancelling ---------------------------------------------------------------------------------------
def _cancel_forwarder(transport: StreamableHTTPTransport, call_id: str) -> Any:
    """What runs when this process's request is cancelled (the client's cancel, its connection
    dropped on a 2026-07-28 request): the call is cancelled wherever it is."""
    loop = asyncio.get_running_loop()

    def on_cancel(_token: Cancellation) -> None:
        loop.call_soon_threadsafe(transport.spawn, loop, cancel_call(transport, call_id))

    return on_cancel


async def cancel_call(transport: StreamableHTTPTransport, call_id: str) -> ToolCall | None:
    """Cancel a background call from any process: its flag is set (the tool sees it within
    ``WATCH_INTERVAL`` wherever it runs) and the process running it is told at once. A call that
    never started is cancelled for good: its task is revoked, its request let go, and whoever
    holds its stream sees that stream end with no response. The record as it is then."""
    call = await records.request_cancel(call_id)
    if call is None:
        return None
    if call.state in (records.State.RUNNING, records.State.INPUT_REQUIRED) and call.runner:
        await transport.send_to_process(holder_channel(call.runner), cancel_message(call_id))
    elif call.state == records.State.CANCELLED and call.started_at is None:
        if celery_enabled():
            await run_in_thread(revoke, call_id)
        if call.delivery == "stream":
            await transport.let_go_of_request(call.session_id, call.request_id)
            await transport.end_stream(call.session_id, post_stream(call.request_id))
        elif call.delivery == "relay":
            await transport.send_to_process(call.web_channel, {
                "type": "mcp.call", "call_id": call_id, "item": {"cancelled": True}})
    return call


async def cancel_call_of_request(transport: StreamableHTTPTransport, session_id: str,
                                 key: str) -> None:
    """A session's ``notifications/cancelled`` for one of its requests, if it is a background call."""
    call = await records.of_request(session_id, key)
    if call is not None and not call.finished:
        await cancel_call(transport, call.id)


def cancel_message(call_id: str) -> dict:
    """The channel-layer message that cancels a call in the process running it."""
    return {"type": "mcp.cancel", "session_id": "call", "request_key": call_id, "reason": "cancelled"}


# stream: the worker writes on the request's stream ---------------------------------------------
async def _follow_stream(ctx: ServerContext, transport: StreamableHTTPTransport, runtime: Runtime,
                         call_id: str) -> None:
    """Hold the request's stream while the worker writes to it, until its response."""
    session, outbound = ctx.session, ctx.session.outbound
    session_id, stream, token = session.record.id, outbound.stream, uuid.uuid4().hex
    if not await transport.claim_stream(session_id, stream, token):
        raise InternalError("this request's stream is held elsewhere")
    listener = ListenStream(transport, session_id, stream, outbound.sse, token, final_id=ctx.request_id)
    runtime.streams[(session_id, stream)] = listener
    outbound.listener = listener  # a dropped connection ends it
    watchdog = None
    try:
        # The worker takes the request over once it starts; until then this process holds it.
        outbound.request_handed_off = True
        try:
            await run_in_thread(enqueue, call_id)
        except Exception:
            outbound.request_handed_off = False
            raise
        watchdog = asyncio.create_task(_answer_if_untaken_or_orphaned(transport, runtime, call_id))
        await listener.run(None)
    finally:
        if watchdog is not None:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
        if runtime.streams.get((session_id, stream)) is listener:
            del runtime.streams[(session_id, stream)]
        await transport.release_stream(session_id, stream, token)


async def _answer_if_untaken_or_orphaned(transport: StreamableHTTPTransport, runtime: Runtime,
                                         call_id: str) -> None:
    """While the stream waits for the worker: a call no worker takes within the bound, or whose
    worker died, lets go of its request and gets its error on the stream, written as a worker
    writes its response (stored, then handed to whoever holds the stream).

    A worker that died holding the request is found by the stream's own watch of its request
    (``ListenStream``); one that died after taking the call but before taking the request over
    leaves this process holding it, alive, and only this check ends the call."""
    interval = transport.options.process_heartbeat_interval
    try:
        call = await records.get(call_id)
        while call is not None and not call.finished:
            await asyncio.sleep(wait_before_check(call, interval))
            call = await records.get(call_id)
            if call is None:
                return
            error = await expire_if_untaken(call)
            if error is None and call.state == records.State.RUNNING:
                error = await _end_if_runner_died(transport, runtime, call)
            if error is not None:
                # The id first: the client may send it again as soon as it reads the error.
                await transport.let_go_of_request(call.session_id, call.request_id)
                await transport.deliver(call.session_id, post_stream(call.request_id),
                                        jsonrpc.error_from(call.request_id, error))
                return
    except Exception as exc:  # the stream still ends when the call does; only the bound is lost
        logger.warning("watching the worker of %s failed: %s", call_id, exc)


async def _end_if_runner_died(transport: StreamableHTTPTransport, runtime: Runtime,
                              call: ToolCall) -> InternalError | None:
    """The error that ends a running call whose worker died before taking its request over (this
    process holds it still); None while the worker lives or once it took the request (the
    stream's watch of its request answers for a dead one), when the call runs again (an
    idempotent tool's), or when another process ended it first."""
    if not await transport.holds_request(call.session_id, call.request_id) \
            or not await transport.liveness.holds_dead(call.runner, runtime.channel_key):
        return None
    if await run_again(transport, call):
        return None
    error = InternalError(WORKER_STOPPED)
    if not await records.finish(call.id, records.State.FAILED, jsonrpc.error_from(call.request_id, error),
                                WORKER_STOPPED):
        return None
    return error


# relay: the worker's messages come here -----------------------------------------------------------
async def _relay(ctx: ServerContext, transport: StreamableHTTPTransport, runtime: Runtime,
                 call_id: str) -> Any:
    queue: asyncio.Queue[dict] = asyncio.Queue()
    runtime.calls[call_id] = queue
    progress = ProgressFloor()
    try:
        await run_in_thread(enqueue, call_id)
        wait = wait_before_check(await records.get(call_id), transport.options.process_heartbeat_interval)
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                wait = await _check_runner(transport, runtime, call_id)
                continue
            if "message" in item:
                if not progress.passes(item["message"]):
                    continue  # a run after a dead worker's repeats what the client has seen
                await ctx.session.send(item["message"], related_request_id=ctx.request_id)
            elif item.get("cancelled"):
                raise CancelledError(ctx.request_id, "cancelled")
            else:
                return _result_of(item["response"])
    finally:
        runtime.calls.pop(call_id, None)


async def _check_runner(transport: StreamableHTTPTransport, runtime: Runtime, call_id: str) -> float:
    """A relayed call that no worker takes in time, or whose worker died, ends with an error
    instead of waiting forever. The seconds to wait before the next check."""
    interval = transport.options.process_heartbeat_interval
    call = await records.get(call_id)
    if call is not None and call.state == records.State.QUEUED:
        error = await expire_if_untaken(call)
        if error is not None:
            raise error
        return wait_before_check(call, interval)
    if call is None or call.state != records.State.RUNNING:
        return interval
    if await transport.liveness.holds_dead(call.runner, runtime.channel_key):
        if await run_again(transport, call):
            return interval
        await records.finish(call_id, records.State.FAILED, error=WORKER_STOPPED)
        raise InternalError(WORKER_STOPPED)
    return interval


def _result_of(response: dict) -> Any:
    if "error" in response:
        error = response["error"]
        raise MCPError(str(error.get("message", "")), code=error.get("code", -32603), data=error.get("data"))
    return response.get("result")

