"""Turning one incoming JSON-RPC message into at most one response.

Every transport calls :func:`handle_message`; batches and JSON text are handled here too so
that stdio and the in-process API behave the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import InterfaceError, OperationalError

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import CancelledError
from mcp_protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError

from . import log_context, ports
from .context import ServerContext
from .errors import DATABASE_UNAVAILABLE, AnsweredElsewhere, MissingCapabilityError
from .handlers import declares
from .middleware.base import Call

if TYPE_CHECKING:
    from .server import Server
    from .session import ServerSession

logger = logging.getLogger("mcp_server")


async def handle_payload(server: Server, payload: Any, session: ServerSession) -> Any:
    """One decoded message or a batch; returns the response, a list of them, or None."""
    if isinstance(payload, list):
        if not payload:
            return jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: empty batch")
        answers = await asyncio.gather(*(handle_message(server, m, session) for m in payload))
        responses = [answer for answer in answers if answer is not None]
        if not responses:
            return None
        return responses[0] if len(responses) == 1 else responses
    return await handle_message(server, payload, session)


async def handle_json(server: Server, text: str | bytes, session: ServerSession) -> str | None:
    try:
        payload = jsonrpc.decode(text)
    except jsonrpc.DecodeError as refused:
        return jsonrpc.encode(refused.response())
    answer = await handle_payload(server, payload, session)
    if answer is None:
        return None
    failures: list[tuple[BaseException, dict]] = []
    text = encode_answer(server, answer, payload, failures)
    for exc, context in failures:  # reported before the answer goes out
        await server.report_exception_async(exc, context)
    return text


def encode_answer(server: Server, answer: Any, payload: Any,
                  failures: list[tuple[BaseException, dict]] | None = None) -> str:
    """The JSON text of a response or batch of responses to ``payload``.

    A result JSON cannot carry (a ``datetime`` returned by a handler, say) becomes -32603 for
    that request alone, keeping its id, instead of an exception that loses every answer.
    Encoding is tried once as a whole first, so the usual case costs nothing extra. Each failure
    goes to the exception reporter, or into ``failures`` for a caller that reports them itself.
    """
    try:
        return jsonrpc.encode(answer)
    except (TypeError, ValueError):
        pass
    requests = payload if isinstance(payload, list) else [payload]
    # Only valid ids answer with their own id (and are hashable; an object id is neither).
    by_id = {m["id"]: m for m in requests
             if isinstance(m, dict) and "method" in m and jsonrpc.is_valid_id(m.get("id"))}
    fixed = []
    for response in answer if isinstance(answer, list) else [answer]:
        try:
            jsonrpc.encode(response)
        except (TypeError, ValueError) as exc:
            request_id = response.get("id")
            if failures is None:
                server.report_exception(exc, {"request": by_id.get(request_id)})
            else:
                failures.append((exc, {"request": by_id.get(request_id)}))
            response = jsonrpc.in_place_of_unencodable(response)
        fixed.append(response)
    return jsonrpc.encode(fixed if isinstance(answer, list) else fixed[0])


async def handle_message(server: Server, message: Any, session: ServerSession) -> dict | None:
    return await handle_incoming(server, jsonrpc.classify(message), session)


async def handle_incoming(server: Server, incoming: jsonrpc.Incoming,
                          session: ServerSession) -> dict | None:
    """:func:`handle_message` of a message a transport has classified already."""
    message = incoming.message
    if incoming.kind == "invalid":
        return incoming.error
    if incoming.kind == "response":
        await session.server.receive_response(message, session)
        return None
    # The ids on log records written meanwhile (mcp_server.log_context), unless the transport
    # set them already.
    # A request goes straight to _handle_request (no coroutine between: this runs for every one).
    handle = _handle_request if incoming.kind == "request" else _handle_observed_notification
    if log_context.covers(incoming.method, incoming.id, session.id):
        return await handle(server, incoming, session)
    with log_context.serving(method=incoming.method, request_id=incoming.id, session_id=session.id,
                             params=incoming.params):
        return await handle(server, incoming, session)


def handling(server: Server, incoming: jsonrpc.Incoming, session: ServerSession) -> Any:
    """The awaitable of :func:`handle_incoming` for a request: the handling itself when the
    transport set the log ids already (a coroutine fewer, on every request)."""
    if incoming.kind == "request" and log_context.covers(incoming.method, incoming.id, session.id):
        return _handle_request(server, incoming, session)
    return handle_incoming(server, incoming, session)


async def _handle_observed_notification(server: Server, incoming: jsonrpc.Incoming,
                                        session: ServerSession) -> None:
    observed = _notification_observed(server, incoming, session) if ports.observers() else ()
    try:
        chain = server.middleware_chain
        if chain is None:
            await _handle_notification(server, incoming.method, incoming.params, session)
        else:
            await notification_through(chain, server, incoming, session, _handle_notification)
    finally:
        for done in reversed(observed):
            done()


async def notification_through(chain: Any, server: Server, incoming: jsonrpc.Incoming,
                               session: ServerSession, handle: Any) -> None:
    """Handle a notification through the middleware ``chain``: ``handle(server, method, params,
    session)`` with what the middleware leaves. A refusal is logged (there is no response)."""
    async def run(call: Call) -> None:
        await handle(server, call.method, call.params, session)

    try:
        await chain(Call(method=incoming.method, params=incoming.params, session=session, run=run))
    except MCPError as refused:  # a notification has no response to carry the refusal
        logger.info("MCP notification %s refused by middleware: %s", incoming.method, refused.message)
    except Exception as exc:
        await server.report_exception_async(exc, {"notification": incoming.method})


async def _handle_notification(server: Server, method: str, params: Any,
                               session: ServerSession) -> None:
    params = params if isinstance(params, dict) else {}
    if method == methods.NOTIFICATIONS_CANCELLED:
        session.cancel_request(params.get("requestId"), params.get("reason"))
    elif method == methods.NOTIFICATIONS_ROOTS_LIST_CHANGED:
        if server.hooks.roots_list_changed is not None:
            await _notify_hook(server, method, server.hooks.roots_list_changed, params)
    elif method in server.custom_methods:
        await _notify_hook(server, method, server.custom_methods[method], params)
    # notifications/initialized, progress and unknown notifications need no action.


def _notification_observed(server: Server, incoming: jsonrpc.Incoming, session: ServerSession) -> list:
    """What the observers that watch notifications too (``notification_started``) call when it
    was handled."""
    observed = []
    for observer in ports.observers():
        started = getattr(observer, "notification_started", None)
        if started is None:
            continue
        try:
            observed.append(started(session, incoming.method, incoming.params))
        except Exception as exc:  # the notification is handled unobserved by this one
            server.report_exception(exc, {"notification": incoming.method, "observer": observer})
    return observed


async def _notify_hook(server: Server, method: str, hook: Any, params: dict) -> None:
    from .invoke import call_user_code

    try:
        await call_user_code(hook, params)
    except Exception as exc:
        await server.report_exception_async(exc, {"notification": method})


async def _handle_request(server: Server, incoming: jsonrpc.Incoming,
                          session: ServerSession) -> dict | None:
    method, request_id = incoming.method, incoming.id
    if method.startswith(methods.NOTIFICATION_PREFIX):
        return jsonrpc.error_response(
            request_id, METHOD_NOT_FOUND, "Method not found: notifications take no id", method
        )
    handler, capability = server.method_handler(method)
    if handler is None:
        await server.instrument_async({"method": "unsupported_method", "duration": 0.0})
        return jsonrpc.error_response(request_id, METHOD_NOT_FOUND, "Method not found", method)
    if capability is not None and not declares(server.capabilities, capability):
        return jsonrpc.error_from(request_id, MissingCapabilityError(method, capability))

    # Registered before the first await, so a cancel read right after this request finds it.
    cancellation = None
    if method != methods.INITIALIZE:
        cancellation = session.begin_request(request_id)
        if cancellation is None:
            return jsonrpc.error_response(
                request_id, INVALID_REQUEST, f"Invalid Request: request id {request_id!r} "
                "is already in flight in this session",
            )
    params = incoming.params if incoming.params is not None else {}
    ctx = ServerContext(
        server, session, request_id=request_id, method=method,
        params=params,
        message=incoming.message, cancellation=cancellation,
        user_context=server.server_context,
    )
    try:
        return await _run(server, ctx, handler)
    finally:
        if cancellation is not None:
            session.end_request(request_id, cancellation)


class _Outcome:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


async def _run(server: Server, ctx: ServerContext, handler: Any) -> dict | None:
    config = server.configuration
    data = ctx.instrumentation
    if config.instrument_server_context:
        data["server_context"] = server.server_context
    outcome = _Outcome()
    observers = ports.observers()
    observed = _started(server, observers, ctx) if observers else ()
    started = time.perf_counter()

    chain = server.middleware_chain
    around = config.around_request
    if around is None:
        # What call_next below does, inline (no closure, no coroutine of its own): the usual
        # case, without an around_request hook.
        try:
            if chain is None:
                outcome.result = await handler(ctx)
            else:
                outcome.result = await chain(through_middleware(ctx, handler))
        except (CancelledError, AnsweredElsewhere, MCPError) as exc:
            outcome.error = exc
        except Exception as exc:
            outcome.error = exc
            data["error"] = "internal_error"
            # Reported here, once; a reporter that fails costs the client nothing more.
            with contextlib.suppress(Exception):
                await server.report_exception_async(exc, {"request": ctx.message})
        finally:
            outcome.done = True
            if ctx.session.client_info is not None:
                data.setdefault("client", _client_summary(ctx.session.client_info))
    else:
        async def call_next() -> Any:
            try:
                if chain is None:
                    outcome.result = await handler(ctx)
                else:
                    outcome.result = await chain(through_middleware(ctx, handler))
            except (CancelledError, AnsweredElsewhere) as exc:
                outcome.error = exc
                raise
            except MCPError as exc:
                outcome.error = exc
                raise
            except Exception as exc:
                # Reported here, once, even if around_request swallows it.
                outcome.error = exc
                data["error"] = "internal_error"
                await server.report_exception_async(exc, {"request": ctx.message})
                raise
            finally:
                outcome.done = True
                if ctx.session.client_info is not None:
                    data.setdefault("client", _client_summary(ctx.session.client_info))
            return outcome.result

        try:
            await _call_around(around, data, call_next)
        except Exception as exc:
            if outcome.error is None:  # raised by the hook itself, not by the handler
                await server.report_exception_async(exc, {"request": ctx.message})
                outcome.error = exc
        if not outcome.done and outcome.error is None:
            outcome.error = RuntimeError("around_request did not call the request handler")
            await server.report_exception_async(outcome.error, {"request": ctx.message})

    cancelled = ctx.cancellation.cancelled or isinstance(outcome.error, CancelledError)
    if cancelled:
        data["cancelled"] = True
        reason = ctx.cancellation.reason
        if reason is None and isinstance(outcome.error, CancelledError):
            reason = outcome.error.reason
        data["cancellation_reason"] = reason
    data["duration"] = duration = time.perf_counter() - started
    if config.instrumentation_callback is not None:
        await server.instrument_async(data)
    response = _response(ctx, outcome, cancelled)
    for observer, state in reversed(observed):  # nested: the first started ends last
        try:
            observer.request_finished(state, ctx, response, outcome.error, duration)
        except Exception as exc:  # an observer never costs the client its answer
            await server.report_exception_async(exc, {"request": ctx.message, "observer": observer})
    return response


def through_middleware(ctx: ServerContext, handler: Any, *, background: bool = False) -> Call:
    """The :class:`Call` of a request, whose innermost step runs ``handler(ctx)`` with the params
    the middleware left."""
    async def run(call: Call) -> Any:
        served = call.context  # a middleware may hand the handler a copy (TimeoutMiddleware)
        served.params = call.params
        return await handler(served)

    return Call(method=ctx.method, params=ctx.params, session=ctx.session, request_id=ctx.request_id,
                context=ctx, background=background, run=run)


def _started(server: Server, observers: list, ctx: ServerContext) -> list:
    # Not a coroutine: this runs for every request while any observer is installed.
    observed = []
    for observer in observers:
        try:
            observed.append((observer, observer.request_started(ctx)))
        except Exception as exc:  # the request is served unobserved by this one
            server.report_exception(exc, {"request": ctx.message, "observer": observer})
    return observed


def _response(ctx: ServerContext, outcome: _Outcome, cancelled: bool) -> dict | None:
    if cancelled or isinstance(outcome.error, AnsweredElsewhere):
        return None  # a cancelled request gets no response; another has one already
    error = outcome.error
    if error is None:
        return jsonrpc.response(ctx.request_id, outcome.result)
    if isinstance(error, MCPError):
        return jsonrpc.error_from(ctx.request_id, error)
    if isinstance(error, OperationalError | InterfaceError):
        # Its session row or call record could not be read or written: worth trying again.
        return jsonrpc.error_response(ctx.request_id, INTERNAL_ERROR, DATABASE_UNAVAILABLE)
    return jsonrpc.error_response(ctx.request_id, INTERNAL_ERROR, "Internal error")


async def _call_around(around: Any, data: dict, call_next: Any) -> None:
    if inspect.iscoroutinefunction(around):
        await around(data, call_next)
        return
    # A plain hook runs on a worker thread; its call_next blocks on the event loop.
    await sync_to_async(around, thread_sensitive=False)(data, async_to_sync(call_next))


def _client_summary(client_info: dict) -> dict:
    return {"name": client_info.get("name"), "version": client_info.get("version")}
