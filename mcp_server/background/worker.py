"""The worker's side of a background call: the tool runs here, its messages go to the client.

A worker process keeps one event loop on a thread of its own (started on its first call, after
any fork), with the transport's runtime on it: a channel on the layer, whose heartbeat tells the
web processes that the worker lives, and on which cancels and the client's answers arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import CancelledError
from mcp_protocol.envelope import parse_envelope
from mcp_protocol.errors import INTERNAL_ERROR, InternalError, InvalidParamsError, MCPError

from .. import telemetry
from ..auth.base import Principal
from ..dispatch import through_middleware
from ..http.event_store import EventsDropped
from ..http.outbound import DETACHED, PostOutbound
from ..http.stored_session import HTTPServerSession
from ..modern.request_session import ModernSession
from ..outgoing import DeliveryError
from . import records
from .execute import BackgroundContext, ProgressFloor, execute, process_name
from .task_hooks import TaskHooks, task_hooks

if TYPE_CHECKING:
    from ..http.transport import StreamableHTTPTransport

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None
# Seconds between renewals of the worker's hold on a long call's request.
CLAIM_RENEWAL = 60.0


def run_call(call_id: str, transport: StreamableHTTPTransport) -> str:
    """Run the call on this process's event loop, blocking until it ended; its messages go
    through ``transport`` (the web processes' endpoint, as this worker builds it)."""
    return asyncio.run_coroutine_threadsafe(run_call_async(call_id, transport), _event_loop()).result()


def _event_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():  # a forked child starts its own
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
            threading.Thread(target=_loop.run_forever, name="mcp-background", daemon=True).start()
        return _loop


async def run_call_async(call_id: str, transport: StreamableHTTPTransport) -> str:
    runtime = await transport.ensure_runtime()
    call = await records.start(call_id, runtime.channel_key, process_name())
    if call is None:
        return "not run: it was cancelled, or ended, before a worker took it"
    # Records written while it runs carry its request's ids, as in the web process that took it.
    with records.log_ids(call):
        return await _run_taken(transport, runtime, call)


async def _run_taken(transport: StreamableHTTPTransport, runtime: Any, call: Any) -> str:
    stream = call.delivery == "stream"
    if stream:
        await transport.take_request(call.session_id, call.request_id)
    renewal = asyncio.create_task(_renew(transport, call)) if stream else None
    try:
        return await _run(transport, runtime, call)
    finally:
        if renewal is not None:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
        if stream:
            await transport.release_request(call.session_id, call.request_id)


async def _run(transport: Any, runtime: Any, call: Any) -> str:
    server = transport.server
    session = await _session(transport, runtime, call)
    if session is None:
        await records.finish(call.id, records.State.FAILED, error="the session ended before the call ran")
        return "failed: the session ended"
    outbound = session.outbound
    tool = await server.tool_named(call.tool)
    if tool is None:
        # A deploy where workers run other code than the web processes: the call ends, once.
        error = InvalidParamsError(
            f"Tool not found: {call.tool} is not registered in the worker {process_name()}; "
            "workers must run the same code as the web processes", data={"name": call.tool})
        response = jsonrpc.error_from(call.request_id, error)
        await records.finish(call.id, records.State.FAILED, response, str(error))
        hooks = task_hooks()
        if call.task and hooks is not None:
            await hooks.changed(call.id, transport)
        await outbound.respond(response)
        return "failed: unknown tool"
    cancellation = session.begin_request(call.request_id)
    runtime.in_flight[("call", call.id)] = cancellation
    params = records.request_params(call)
    message = jsonrpc.request(call.request_id, methods.TOOLS_CALL, params)
    ctx = BackgroundContext(server, session, request_id=call.request_id, method=methods.TOOLS_CALL,
                            params=params, message=message,
                            cancellation=cancellation, user_context=server.server_context, call_id=call.id)
    if call.task:
        ctx.run_as_task(_task_hooks_of(call), transport)
    # The span of the run (MCP_SERVER["TELEMETRY"]), linked to the one that queued the call.
    with telemetry.background_span(call, tool) as record_outcome:
        try:
            result = await _through_middleware(server, ctx, tool, call.arguments)
            response = jsonrpc.response(call.request_id, result)
        except CancelledError:
            response = None
        except MCPError as exc:
            response = jsonrpc.error_from(call.request_id, exc)
        except Exception as exc:
            await server.report_exception_async(exc, {"request": ctx.message})
            response = jsonrpc.error_response(call.request_id, INTERNAL_ERROR, "Internal error")
        finally:
            session.end_request(call.request_id, cancellation)
            runtime.in_flight.pop(("call", call.id), None)
        record_outcome(response)
    if response is None:  # cancelled: no response (the spec's rule); the stream just ends
        await outbound.end()
        return "cancelled"
    await outbound.respond(response)
    return "failed" if "error" in response else "completed"


async def _through_middleware(server: Any, ctx: BackgroundContext, tool: Any, arguments: dict) -> Any:
    """Run the call through the server's middleware, as the web process did before queueing it
    (``Call.background`` is True here): the arguments are those the middleware leaves."""
    chain = server.middleware_chain
    if chain is None:
        return await execute(ctx, tool, arguments)

    async def run(served: Any) -> Any:
        params = served.params if isinstance(served.params, dict) else {}
        given = params.get("arguments", arguments)
        return await execute(served, tool, given if isinstance(given, dict) else arguments)

    return await chain(through_middleware(ctx, run, background=True))


async def _session(transport: Any, runtime: Any, call: Any) -> Any:
    """The session the tool sees, acting for the call's principal; None when the session ended."""
    session = await _unbound_session(transport, runtime, call)
    if session is not None and call.principal is not None:
        owner = await records.owner(call) if call.owner_id is not None else None
        principal = Principal.from_record(call.principal, owner)
        if isinstance(session, HTTPServerSession):
            session.principal = principal  # its user is the stored session's owner already
        else:
            session.act_for(principal)
    return session


async def _unbound_session(transport: Any, runtime: Any, call: Any) -> Any:
    """The session the tool sees, as the web process would build it; None when it ended."""
    envelope = parse_envelope(call.params) if call.protocol_version else None
    if envelope is not None and call.task:
        return _task_hooks_of(call).session(transport.server, envelope)
    if envelope is not None:
        return ModernSession(transport.server, envelope, listen_supported=True,
                             outbound=RelayOutbound(runtime, call))
    record = await transport.sessions.load(call.session_id)
    if record is None:
        return None
    if call.delivery == "stream":
        outbound = StreamOutbound(transport, record, call.request_id)
        if call.attempts > 1:  # a run after a dead worker's: progress goes on from what was sent
            outbound.progress = ProgressFloor(await _highest_progress(transport, outbound))
        return HTTPServerSession(transport, record, outbound)
    session = HTTPServerSession(transport, record, RelayOutbound(runtime, call))
    session.requests_refused = "JSON response mode does not support server-to-client requests"
    return session


def _task_hooks_of(call: Any) -> TaskHooks:
    hooks = task_hooks()
    if hooks is None:
        raise InternalError(f"{call.id} is a task, but the Tasks extension is not installed in the worker "
                            f"{process_name()}")
    return hooks


async def _highest_progress(transport: Any, outbound: StreamOutbound) -> float | None:
    try:
        events = await transport.events.replay(outbound.record.id, outbound.stream, 0)
    except EventsDropped:
        return None  # what was sent is gone from the store, and so from any resumed stream
    floor = ProgressFloor()
    for _sequence, message, _level in events:
        floor.passes(message)
    return floor.highest


async def _renew(transport: Any, call: Any) -> None:
    while True:
        await asyncio.sleep(CLAIM_RENEWAL)
        with contextlib.suppress(Exception):
            await transport.take_request(call.session_id, call.request_id)


class StreamOutbound(PostOutbound):
    """The request's stream, written from a process the client is never connected to: each
    message is stored and handed to whoever holds the stream (see ``PostOutbound.write``)."""

    def __init__(self, transport: Any, record: Any, request_id: Any):
        super().__init__(transport, record, request_id, DETACHED)
        self.progress = ProgressFloor()

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        if not self.progress.passes(message):
            return False
        return await super().send(message, related_request_id=related_request_id)

    async def respond(self, response: dict) -> None:
        await self.write(response, last=True)

    async def end(self) -> None:
        await self.transport.end_stream(self.record.id, self.stream)


class RelayOutbound:
    """Messages of the request, sent to the web process that holds it (which writes them)."""

    def __init__(self, runtime: Any, call: Any):
        self.runtime = runtime
        self.call = call

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        if "id" in message and "method" in message:
            raise DeliveryError("this request's transport carries no requests to the client")
        if related_request_id != self.call.request_id:
            return False  # a relayed request has no other stream to put it on
        await self._relay({"message": message})
        return True

    async def respond(self, response: dict) -> None:
        await self._relay({"response": response})

    async def end(self) -> None:
        await self._relay({"cancelled": True})

    async def _relay(self, item: dict) -> None:
        await self.runtime.send_to(self.call.web_channel, {"type": "mcp.call", "call_id": self.call.id,
                                                           "item": item})
