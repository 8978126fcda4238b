"""``ServerContext``: what a handler gets to talk back while its request runs.

Methods that do I/O work from both kinds of handler: in ``async def`` code they return an
awaitable, in plain ``def`` code (which runs on a worker thread) they block until done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation

from . import logging_levels

if TYPE_CHECKING:
    from .server import Server
    from .session import ServerSession


class ServerContext(Mapping):
    """The request being served, its cancellation token, and the user's ``server_context``.

    Reading it like a dict reads the user-defined context, with the request's ``_meta`` under
    ``"_meta"`` when that context is a dict (or unset).
    """

    def __init__(self, server: Server, session: ServerSession, *, request_id: Any,
                 method: str, params: dict | list, message: dict | None = None,
                 cancellation: Cancellation | None = None, user_context: Any = None):
        self.server = server
        self.session = session
        self.request_id = request_id
        self.method = method
        self.params = params
        self.message = message
        self.cancellation = cancellation or Cancellation(request_id)
        raw_meta = params.get("_meta") if isinstance(params, dict) else None
        self.meta: dict = raw_meta if isinstance(raw_meta, dict) else {}
        self.context = _merge_meta(user_context, raw_meta)
        # What instrumentation and around_request see about this request.
        self.instrumentation: dict[str, Any] = {"method": method}
        self._loop = asyncio.get_running_loop()

    # The user-defined context, read as a mapping.
    def __getitem__(self, key: str) -> Any:
        if not isinstance(self.context, dict):
            raise KeyError(key)
        return self.context[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.context) if isinstance(self.context, dict) else iter(())

    def __len__(self) -> int:
        return len(self.context) if isinstance(self.context, dict) else 0

    @property
    def client_info(self) -> dict | None:
        return self.session.client_info

    @property
    def client_capabilities(self) -> dict:
        return self.session.client_capabilities or {}

    @property
    def protocol_version(self) -> str | None:
        return self.session.protocol_version

    @property
    def progress_token(self) -> Any:
        return self.meta.get("progressToken")

    # Cancellation.
    def cancelled(self) -> bool:
        return self.cancellation.cancelled

    def raise_if_cancelled(self) -> None:
        self.cancellation.raise_if_cancelled()

    # Notifications to the requesting client.
    def report_progress(self, progress: float, total: float | None = None,
                        message: str | None = None) -> Any:
        """Send ``notifications/progress``; does nothing when the client sent no progress token."""
        token = self.progress_token
        if token is None:
            return self._io(_done(False))
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return self._io(self._send(methods.NOTIFICATIONS_PROGRESS, params))

    def notify_log_message(self, data: Any, level: str = "info", logger: str | None = None) -> Any:
        """Send ``notifications/message`` if ``level`` passes the level the client set."""
        if not logging_levels.is_level(level):
            raise ValueError(f"unknown log level {level!r}; use one of {logging_levels.LEVELS}")
        if not logging_levels.passes(level, self.session.log_level):
            return self._io(_done(False))
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        return self._io(self._send(methods.NOTIFICATIONS_MESSAGE, params))

    def notify_resources_updated(self, uri: str) -> Any:
        return self._io(self._send(methods.NOTIFICATIONS_RESOURCES_UPDATED, {"uri": uri},
                                   related=False))

    async def _send(self, method: str, params: dict, *, related: bool = True) -> bool:
        message = jsonrpc.notification(method, params)
        related_id = self.request_id if related else None
        return await self.session.send(message, related_request_id=related_id)

    def _io(self, coroutine: Coroutine) -> Any:
        """Awaitable on the event loop's thread; blocking on any other thread."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return coroutine
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __repr__(self) -> str:
        return f"<ServerContext {self.method} id={self.request_id!r}>"


async def _done(value: Any) -> Any:
    return value


def _merge_meta(user_context: Any, meta: Any) -> Any:
    if meta is None:
        return user_context
    if user_context is None:
        return {"_meta": meta}
    if isinstance(user_context, dict):
        return {**user_context, "_meta": meta}
    return user_context
