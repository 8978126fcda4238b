"""Calling user code: ``async def`` on the event loop, plain ``def`` on a worker thread.

A plain function runs in a thread with Django's connection hygiene (the pattern of Channels'
``database_sync_to_async``), so ORM code in tools works and never blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections


def _with_fresh_connections(function: Callable, *args: Any, **kwargs: Any) -> Any:
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


_in_thread = sync_to_async(_with_fresh_connections, thread_sensitive=False)


async def run_in_thread(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run blocking code of ours (ORM queries, say) on a worker thread with fresh connections.

    Straight on the event loop's executor, in a copy of the current context: asgiref's
    ``sync_to_async`` costs about twice as much CPU, for what only user code may need (an
    ``async_to_sync`` inside reaching back to this loop), so user code keeps it
    (:func:`call_user_code`).
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(_with_fresh_connections, function, *args, **kwargs)
    return await loop.run_in_executor(None, contextvars.copy_context().run, call)


async def call_user_code(function: Callable, *args: Any, **kwargs: Any) -> Any:
    if is_async_callable(function):
        return await function(*args, **kwargs)
    result = await _in_thread(function, *args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def is_async_callable(function: Any) -> bool:
    if type(function) is types.FunctionType and function.__code__.co_flags & inspect.CO_COROUTINE:
        return True  # an ``async def`` function (a tool's handler, usually): known at once
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


async def call_with_params(handler: Callable, params: dict | list, server_context: Any) -> Any:
    """Call a ``handler(params, server_context=...)`` hook; the context only if it asks for it."""
    if accepts_keyword(handler, "server_context"):
        return await call_user_code(handler, params, server_context=server_context)
    return await call_user_code(handler, params)


@functools.lru_cache(maxsize=4096)
def accepts_keyword(function: Callable, keyword: str) -> bool:
    """Whether ``function`` takes ``keyword`` by name, or any keyword through ``**kwargs``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == keyword and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
        for p in parameters
    )
