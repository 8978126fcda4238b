"""What a client transport provides: start receiving, send one message, close."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

Deliver = Callable[[Any], Awaitable[None]]
# fail(error, request_id=None): one request failed, or (without an id) the whole connection.
Fail = Callable[..., None]
# on_sent(): the bytes of a request were handed off (a cancel for it may follow). Thread-safe.
OnSent = Callable[[], None]


class Transport(Protocol):
    async def start(self, deliver: Deliver, fail: Fail) -> None:
        """Begin reading; every message the server sends goes to ``deliver``; a broken
        connection goes to ``fail``."""

    async def send(self, message: dict, *, on_sent: OnSent | None = None) -> None:
        """Write one message (request, notification or response to the server). ``on_sent`` is
        optional: a transport that accepts it calls it once the bytes are handed off."""

    async def close(self) -> None: ...


class RequestResponseTransport:
    """Adapts a duck-typed transport with ``send_request(request) -> response`` (and optionally
    ``connect()``, ``send_notification(notification)`` and ``close()``), the shape the Ruby SDK
    documents for custom ones.

    ``send_request`` may take an ``on_sent`` keyword: calling it once the request is on its way
    lets a cancellation be sent while the request runs; without it, a cancel is sent only after
    ``send_request`` returned (CAN-09). ``connect`` may take a ``mode`` keyword; a ``connect``
    that does not declare it gets the legacy call shape, ``connect()`` (CLI-06).
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self._deliver: Deliver | None = None

    @property
    def connect_takes_mode(self) -> bool:
        connect = getattr(self.inner, "connect", None)
        return connect is not None and accepts_keyword(connect, "mode")

    async def start(self, deliver: Deliver, fail: Fail, *, mode: str | None = None) -> None:
        self._deliver = deliver
        connect = getattr(self.inner, "connect", None)
        if connect is not None:
            result = connect(mode=mode) if mode is not None and self.connect_takes_mode else connect()
            if inspect.isawaitable(result):
                await result

    async def send(self, message: dict, *, on_sent: OnSent | None = None) -> None:
        if "id" in message and "method" in message:
            send_request = self.inner.send_request
            if on_sent is not None and accepts_keyword(send_request, "on_sent"):
                response = await _call(send_request, message, on_sent=on_sent)
            else:
                response = await _call(send_request, message)
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


async def _call(function: Callable, *args: Any, **kwargs: Any) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(*args, **kwargs)
    result = await asyncio.to_thread(function, *args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def accepts_keyword(function: Callable, name: str) -> bool:
    """Whether ``function`` can be called with the keyword argument ``name``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any((p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) or
               p.kind == p.VAR_KEYWORD for p in parameters)


def adapt(transport: Any) -> Any:
    """Our transports as they are; a duck-typed ``send_request`` one through the adapter."""
    if hasattr(transport, "start") and hasattr(transport, "send"):
        return transport
    if hasattr(transport, "send_request"):
        return RequestResponseTransport(transport)
    raise TypeError("a transport needs start()/send()/close(), or send_request(request)")
