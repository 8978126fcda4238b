"""Server-to-client requests: sent with a fresh id, answered by the client, bounded in time.

A waiting request ends in one of four ways: the client's result, the client's error (raised as
:class:`MCPError` with its code), the timeout (the client is told with ``notifications/cancelled``
and :class:`RequestTimeoutError` is raised), or the cancellation of the request that caused it
(the client is told likewise and :class:`CancelledError` is raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.errors import MCPError, RequestTimeoutError

Send = Callable[..., Awaitable[bool]]


class DeliveryError(MCPError):
    """The request could not be handed to the client at all."""


def new_request_id() -> str:
    """The id of a server-to-client request: a random UUID, which nobody can guess."""
    return str(uuid.uuid4())


def is_request_id_we_sent(request_id: object) -> bool:
    """Whether ``request_id`` has the form of :func:`new_request_id`'s ids."""
    if not isinstance(request_id, str) or len(request_id) != 36:
        return False
    try:
        return str(uuid.UUID(request_id)) == request_id
    except ValueError:
        return False


class PendingRequests:
    """Server-to-client requests that wait for an answer: of one session, or of every session of
    a process (each request then names its session as its ``owner``)."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future, Any]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    async def request(self, send: Send, method: str, params: dict | None, *, timeout: float | None,
                      cancellation: Cancellation | None = None,
                      related_request_id: Any = None, owner: Any = None) -> Any:
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        request_id = new_request_id()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()
        self._waiting[request_id] = (loop, answer, owner)
        unhook = _cancel_on(cancellation, loop, answer)
        try:
            delivered = await send(jsonrpc.request(request_id, method, params),
                                    related_request_id=related_request_id)
            if not delivered:
                raise DeliveryError(f"could not send {method} to the client")
            try:
                message = await asyncio.wait_for(answer, timeout)
            except TimeoutError:
                await _tell_cancelled(send, request_id, "timed out", related_request_id)
                raise RequestTimeoutError(
                    f"{method} got no answer from the client within {timeout} s"
                ) from None
            except CancelledError:
                await _tell_cancelled(send, request_id, cancellation.reason if cancellation else None,
                                      related_request_id)
                raise
        finally:
            self._waiting.pop(request_id, None)
            unhook()
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            raise MCPError(str(error.get("message", "client error")), code=error.get("code", -32603),
                           data=error.get("data"))
        return message.get("result")

    def resolve(self, message: dict, owner: Any = None) -> bool:
        """Hand a client response to its waiting request; False for an unknown id, or one that
        another session's request waits for (an answer counts only in its own session)."""
        entry = self._waiting.get(message.get("id"))
        if entry is None or entry[2] != owner:
            return False
        loop, answer, _owner = entry
        loop.call_soon_threadsafe(_settle, answer, message, None)
        return True

    def cancel_all(self, reason: str) -> None:
        """End every wait (the session is closing)."""
        for loop, answer, _owner in list(self._waiting.values()):
            loop.call_soon_threadsafe(_settle, answer, None, DeliveryError(reason))


def _settle(answer: asyncio.Future, message: Any, error: BaseException | None) -> None:
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(message)


def _cancel_on(cancellation: Cancellation | None, loop: asyncio.AbstractEventLoop,
               answer: asyncio.Future) -> Callable[[], None]:
    if cancellation is None:
        return lambda: None

    def wake(token: Cancellation) -> None:
        error = CancelledError(token.request_id, token.reason)
        loop.call_soon_threadsafe(_settle, answer, None, error)

    return cancellation.on_cancel(wake)


async def _tell_cancelled(send: Send, request_id: str, reason: str | None,
                          related_request_id: Any) -> None:
    params: dict[str, Any] = {"requestId": request_id}
    if reason:
        params["reason"] = reason
    # If the client is gone there is nothing more to tell it.
    with contextlib.suppress(Exception):
        await send(jsonrpc.notification(methods.NOTIFICATIONS_CANCELLED, params),
                   related_request_id=related_request_id)
