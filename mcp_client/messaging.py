"""Messages to and from the server, for ``AsyncClient``: a request matched to its answer by id
(with cancellation and the transport's read timeout), notifications out, and what the server sends
in: answers, its own requests (answered by the registered handlers) and notifications (to the
registered callbacks).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND

from . import metrics, modern
from .errors import ClientError, ServerError, ServerRequestError, TransportError, ValidationError
from .handlers import call_handler, maybe_await
from .input_required import result_type

logger = logging.getLogger("mcp_client")


class Messaging:
    """The message layer of ``AsyncClient``, which sets what it uses: ``_wire`` (the adapted
    transport), ``transport`` and ``server_info`` (for metrics), ``_tracing`` (None when its
    telemetry is off), ``_reports_sent``, ``_envelope``,
    ``_pending`` (request id to its answer),
    ``_finished``, ``_background``, ``_last_heard``, ``_server_requests``, ``_notifications``,
    ``_progress`` and ``_subscriptions``."""

    async def _request(self, method: str, params: dict | None, *, meta: dict | None = None,
                       cancellation: Cancellation | None = None, request_id: str | None = None) -> Any:
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        request_id = request_id or str(uuid.uuid4())
        if self._tracing is None:
            return await self._exchange(method, params, meta, cancellation, request_id, None)
        # A CLIENT span around the exchange, its context carried in _meta (mcp_client.tracing).
        with self._tracing.request(self, method, params, request_id) as (carrier, record):
            result = await self._exchange(method, params, meta, cancellation, request_id, carrier)
            record(result)
            return result

    async def _exchange(self, method: str, params: dict | None, meta: dict | None,
                        cancellation: Cancellation | None, request_id: str,
                        carrier: dict[str, str] | None) -> Any:
        params = _with_meta(params, meta)
        if self._envelope is not None:
            params = modern.enveloped(params, self._envelope)
        if carrier:
            params = _with_trace(params, carrier)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()
        sent = asyncio.Event()
        started = metrics.now() if self._tracing is not None else None  # telemetry=False: none
        self._pending[request_id] = answer
        # The request is written by a task of its own, so that the caller can stop waiting (a
        # cancellation, a read timeout) even while a transport is still busy sending it.
        sending = self._spawn(self._send_request(jsonrpc.request(request_id, method, params), answer,
                                                 lambda: loop.call_soon_threadsafe(sent.set)))
        sending.add_done_callback(lambda _: sent.set() if not _failed(sending) else None)
        unhook: Callable[[], None] = lambda: None  # noqa: E731
        if cancellation is not None:
            unhook = cancellation.on_cancel(
                lambda token: loop.call_soon_threadsafe(self._cancel, request_id, token, sent, sending)
            )
        try:
            message = await self._wait(answer, method)
        except BaseException as exc:
            metrics.operation(started, method, params, self.transport, self._protocol_version(), error=exc)
            raise
        finally:
            unhook()
            self._pending.pop(request_id, None)
            self._finished.append(request_id)
        metrics.operation(started, method, params, self.transport, self._protocol_version(), message)
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            raise ServerError(str(error.get("message", "error")), error.get("code", INTERNAL_ERROR),
                              error.get("data"))
        if "result" not in message:
            raise ValidationError(f"the response to {method} has no result: {message!r}")
        result = message["result"]
        if self._envelope is not None:
            result_type(method, result)  # an unknown resultType is an invalid answer (SEP-2322)
        return result

    def _protocol_version(self) -> str | None:
        return (self.server_info or {}).get("protocolVersion")

    async def _send_request(self, message: dict, answer: asyncio.Future, on_sent: Callable[[], None]) -> None:
        try:
            if self._reports_sent:
                await self._wire.send(message, on_sent=on_sent)
            else:
                await self._wire.send(message)
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)
            raise

    async def _wait(self, answer: asyncio.Future, method: str) -> dict:
        """The answer; with a ``read_timeout`` on the transport, a server that stays silent that
        long is an error (anything it sends, progress say, proves it alive)."""
        timeout = getattr(self._wire, "read_timeout", None)
        if timeout is None or method == methods.SUBSCRIPTIONS_LISTEN:  # quiet by design
            return await answer
        asked = time.monotonic()  # the silence counts from the request, or from the last message
        while True:
            remaining = max(self._last_heard, asked) + timeout - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"no answer to {method} within read_timeout ({timeout} s)")
            try:
                return await asyncio.wait_for(asyncio.shield(answer), remaining)
            except TimeoutError:
                continue

    def _cancel(self, request_id: str, token: Cancellation, sent: asyncio.Event,
                sending: asyncio.Task) -> None:
        answer = self._pending.get(request_id)
        if answer is None or answer.done():
            return
        answer.set_exception(CancelledError(request_id, token.reason))
        params: dict[str, Any] = {"requestId": request_id}
        if token.reason:
            params["reason"] = token.reason
        self._spawn(self._send_cancel(params, sent, sending))

    async def _send_cancel(self, params: dict, sent: asyncio.Event, sending: asyncio.Task) -> None:
        """``notifications/cancelled``, never before its request: once the transport said the
        request was handed off (or, for a transport that does not say, once it was sent). A
        request that could not be sent needs no cancel."""
        waiting = asyncio.ensure_future(sent.wait())
        try:
            await asyncio.wait({waiting, sending}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if sent.is_set() or not _failed(sending):
            await sent.wait()
            try:
                await self._notify(methods.NOTIFICATIONS_CANCELLED, params)
            except ClientError:
                logger.warning("could not send notifications/cancelled for %s", params["requestId"])

    async def _notify(self, method: str, params: dict | None = None) -> None:
        await self._wire.send(jsonrpc.notification(method, params))

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _fail(self, error: BaseException, request_id: Any = None) -> None:
        """A transport failure: of one request (``request_id``) or, without one, of all."""
        answers = [self._pending.get(request_id)] if request_id is not None else list(self._pending.values())
        for answer in answers:
            if answer is not None and not answer.done():
                answer.set_exception(error)

    async def _receive(self, message: Any) -> None:
        self._last_heard = time.monotonic()
        if isinstance(message, list):
            for item in message:
                await self._receive(item)
            return
        if not isinstance(message, dict):
            return
        if "method" not in message:  # a response (one with neither result nor error fails its request)
            self._take_response(message)
        elif "method" in message and "id" in message:
            self._spawn(self._answer(message))
        elif "method" in message:
            await self._dispatch_notification(message)

    def _take_response(self, message: dict) -> None:
        if message.get("id") is None:
            # Answers nothing we can name (CSTDIO-05); a server's error about a message it could
            # not read at all is only worth a warning, since every request we send is well formed.
            logger.warning("ignoring a response without an id from the server: %.500r", message)
            return
        answer = self._pending.get(message.get("id"))
        if answer is not None:
            if not answer.done():
                answer.set_result(message)
            return
        if message.get("id") in self._finished:
            return  # a late answer to a request that was cancelled or timed out
        # An answer to nothing we asked: the server is confused; waiting would hang forever.
        self._fail(ValidationError(f"the server answered an unknown request id {message.get('id')!r}"))

    async def _dispatch_notification(self, message: dict) -> None:
        message = self._subscriptions.received(message)
        if message is None:
            return  # a listen stream's own business, or from a stream no longer in use
        method = message["method"]
        params = message.get("params") or {}
        calls = [(callback, params) for callback in self._notifications.get(method, ())]
        calls += [(callback, message) for callback in self._notifications.get("*", ())]
        if method == methods.NOTIFICATIONS_PROGRESS:
            specific = self._progress.get(params.get("progressToken"))
            if specific is not None:
                calls.append((specific, params))
        for callback, argument in calls:
            try:
                await maybe_await(callback(argument))
            except Exception:
                logger.exception("notification callback for %s failed", method)

    async def _answer(self, request: dict) -> None:
        method, request_id = request["method"], request["id"]
        handler = self._server_requests.get(method)
        if handler is None and method == methods.PING:
            response = jsonrpc.response(request_id, {})
        elif handler is None:
            response = jsonrpc.error_response(request_id, METHOD_NOT_FOUND, "Method not found", method)
        else:
            try:
                result = await maybe_await(call_handler(handler, request.get("params") or {}))
                response = jsonrpc.response(request_id, result)
            except ServerRequestError as exc:
                response = jsonrpc.error_response(request_id, exc.code, exc.message, exc.data)
            except Exception:
                logger.exception("the %s handler failed", method)
                response = jsonrpc.error_response(request_id, INTERNAL_ERROR, "Internal error")
        try:
            await self._wire.send(response)
        except ClientError:
            logger.exception("could not answer the server's %s request", method)


def _failed(task: asyncio.Task) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


def _with_meta(params: dict | None, meta: dict | None) -> dict | None:
    """``params`` with ``meta`` merged into ``_meta``, leaving the caller's dicts untouched."""
    if not meta:
        return params
    merged = dict(params or {})
    merged["_meta"] = {**(merged.get("_meta") or {}), **meta}
    return merged


def _with_trace(params: dict | None, carrier: dict[str, str]) -> dict:
    """``params`` with the trace context under ``_meta``, where the caller's own keys win."""
    merged = dict(params or {})
    merged["_meta"] = {**carrier, **(merged.get("_meta") or {})}
    return merged
