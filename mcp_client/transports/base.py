"""What a client transport provides: start receiving, send one message, close."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

Deliver = Callable[[Any], Awaitable[None]]
# fail(error, request_id=None): one request failed, or (without an id) the whole connection.
Fail = Callable[..., None]


class Transport(Protocol):
    async def start(self, deliver: Deliver, fail: Fail) -> None:
        """Begin reading; every message the server sends goes to ``deliver``; a broken
        connection goes to ``fail``."""

    async def send(self, message: dict) -> None:
        """Write one message (request, notification or response to the server)."""

    async def close(self) -> None: ...


class RequestResponseTransport:
    """Adapts a duck-typed transport with ``send_request(request) -> response`` (and optionally
    ``send_notification(notification)``), the shape the Ruby SDK documents for custom ones."""

    def __init__(self, inner: Any):
        self.inner = inner
        self._deliver: Deliver | None = None

    async def start(self, deliver: Deliver, fail: Fail) -> None:
        self._deliver = deliver
        connect = getattr(self.inner, "connect", None)
        if connect is not None:
            result = connect()
            if inspect.isawaitable(result):
                await result

    async def send(self, message: dict) -> None:
        if "id" in message and "method" in message:
            response = await _call(self.inner.send_request, message)
            if response is not None:
                await self._deliver(response)
            return
        notify = getattr(self.inner, "send_notification", None)
        if notify is not None:
            await _call(notify, message)

    async def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            await _call(close)


async def _call(function: Callable, *args: Any) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    return await asyncio.to_thread(function, *args)


def adapt(transport: Any) -> Any:
    """Our transports as they are; a duck-typed ``send_request`` one through the adapter."""
    if hasattr(transport, "start") and hasattr(transport, "send"):
        return transport
    if hasattr(transport, "send_request"):
        return RequestResponseTransport(transport)
    raise TypeError("a transport needs start()/send()/close(), or send_request(request)")
