"""Calling the application's handlers and callbacks, whichever kind they are."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


def call_handler(handler: Callable, params: dict) -> Any:
    """``handler(params)``: a coroutine function is called on the loop; a plain one may block (a
    person answering), so it runs on a worker thread and the event loop stays free."""
    if inspect.iscoroutinefunction(handler):
        return handler(params)
    return asyncio.to_thread(handler, params)


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def run_handler(handler: Callable, params: dict) -> Any:
    return await maybe_await(call_handler(handler, params))
