"""``Client``: the same API as :class:`AsyncClient`, for code that is not async.

It runs an ``AsyncClient`` on an event loop of its own, in a background thread; each method
blocks until the answer comes. Handlers (``on_elicitation`` ...) may be plain functions.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from .async_client import AsyncClient

_BLOCKING = (
    "connect", "close", "ping", "list_tools", "tools", "call_tool", "list_resources", "resources",
    "list_resource_templates", "resource_templates", "read_resource", "subscribe_resource",
    "unsubscribe_resource", "list_prompts", "prompts", "get_prompt", "complete",
    "set_logging_level", "notify_roots_list_changed",
)
# Registering a handler or a callback may open the listening stream: done on the client's loop.
_ON_LOOP = (
    "on_elicitation", "on_sampling", "on_roots", "on_server_request", "on_notification",
    "on_progress", "on_log_message", "on_resource_updated", "on_list_changed",
)
_PROPERTIES = (
    "connected", "protocol_version", "server_capabilities", "instructions",
    "server_implementation", "server_info", "transport", "max_pages", "is_modern",
)


class Client:
    def __init__(self, transport: Any, **options: Any):
        self._async = AsyncClient(transport, **options)  # first: bad options start no thread
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()

    def _run(self, coroutine: Any) -> Any:
        if not self._thread.is_alive():
            coroutine.close()
            raise RuntimeError("this client was shut down")
        if threading.current_thread() is self._thread:
            # A notification callback runs on the client's loop: waiting there would wait forever.
            coroutine.close()
            raise RuntimeError("a notification callback cannot make a blocking call on its own client; "
                               "use a server-request handler (run on a worker thread) or another thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def shutdown(self) -> None:
        """Close the connection and stop the client's thread."""
        if self._thread.is_alive():
            try:
                self._run(self._async.close())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(5)
                if not self._thread.is_alive():
                    self._loop.close()

    def __enter__(self) -> Client:
        try:
            self.connect()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"<Client {self._async.transport!r}>"


def _blocking(name: str) -> Callable:
    method = getattr(AsyncClient, name)

    def call(self: Client, *args: Any, **kwargs: Any) -> Any:
        return self._run(getattr(self._async, name)(*args, **kwargs))

    call.__name__, call.__doc__ = name, method.__doc__
    return call


def _on_loop(name: str) -> Callable:
    def call(self: Client, *args: Any, **kwargs: Any) -> Any:
        async def register() -> Any:
            return getattr(self._async, name)(*args, **kwargs)

        return self._run(register())

    call.__name__, call.__doc__ = name, getattr(AsyncClient, name).__doc__
    return call


def _property(name: str) -> property:
    return property(lambda self: getattr(self._async, name))


for _name in _BLOCKING:
    setattr(Client, _name, _blocking(_name))
for _name in _ON_LOOP:
    setattr(Client, _name, _on_loop(_name))
for _name in _PROPERTIES:
    setattr(Client, _name, _property(_name))
