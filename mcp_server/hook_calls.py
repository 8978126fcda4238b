"""Calling the observability hooks (exception reporter, instrumentation callback) from anywhere.

A hook may use the ORM: a plain function never runs on the event loop's thread, where Django
refuses synchronous queries. It runs on a worker thread with fresh connections; an ``async def``
hook is awaited on the loop. :func:`call_hook` is for code that can await (the call is done when it
returns); :func:`fire_hook` for code that cannot, which on the loop's thread hands a plain hook to
a thread pool of its own (outliving the loop, so nothing is lost when a loop ends) and an
``async def`` hook to a task kept referenced until done. Hook failures are logged, never raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.db import connections

from . import log_context
from .invoke import _with_fresh_connections, call_user_code, is_async_callable

logger = logging.getLogger("mcp_server")

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-hook")
_tasks: set[asyncio.Task] = set()


async def call_hook(hook: Callable, name: str, *args: Any) -> None:
    """Call ``hook(*args)`` off the event loop (or awaited on it, when it is ``async def``)."""
    try:
        await call_user_code(hook, *args)
    except Exception:
        logger.exception("%s failed", name)


def fire_hook(hook: Callable, name: str, *args: Any) -> None:
    """Call ``hook(*args)`` from code that cannot await, never blocking an event loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        if is_async_callable(hook):
            task = loop.create_task(call_hook(hook, name, *args))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)
        else:
            _pool.submit(log_context.carried().run, _call_in_pool, hook, name, *args)
        return
    _call_logged(hook, name, *args)  # already off any event loop: a worker thread, a command


async def settle() -> None:
    """Wait for the ``async def`` hook calls fired on this event loop: a transport calls it before
    its loop ends (ending a loop cancels its tasks)."""
    loop = asyncio.get_running_loop()
    mine = [task for task in _tasks if task.get_loop() is loop]
    if mine:
        await asyncio.gather(*mine, return_exceptions=True)


def _call_in_pool(hook: Callable, name: str, *args: Any) -> None:
    try:
        _call_logged(hook, name, *args)
    finally:
        connections.close_all()  # a pool thread keeps no connection between the rare calls


def _call_logged(hook: Callable, name: str, *args: Any) -> None:
    try:
        if is_async_callable(hook):
            async_to_sync(hook)(*args)
            return
        result = _with_fresh_connections(hook, *args)
        if inspect.isawaitable(result):
            async_to_sync(_awaited)(result)
    except Exception:
        logger.exception("%s failed", name)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
