"""How long a test waits for an event, and the polling waits every test module shares.

A wait ends as soon as its event comes; the deadline only fires when something is really broken,
so it is generous: a loaded CI machine may take many times longer than a laptop to get there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

PATIENCE = 60.0  # seconds any single wait for an event may take before the test fails
# Steps of a slow_count at 0.1 s a step, for a call that must still be running whenever the test
# stops it (a cancel, a DELETE, a reaped session): a minute, so a slow machine does not finish it.
SLOW_STEPS = 600


def wait_until(condition: Callable[[], Any], timeout: float = PATIENCE, what: str = "",
               interval: float = 0.05) -> Any:
    """Poll ``condition`` until it is truthy (and return it); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(interval)


async def eventually(condition: Callable[[], Any], timeout: float = PATIENCE, what: str = "") -> Any:
    """``wait_until`` without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        await asyncio.sleep(0.02)
    return value
