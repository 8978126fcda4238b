"""``input_required`` inside a task: the tool's questions go on the task (``tasks/get`` shows them
as ``inputRequests``), and the tool runs again once ``tasks/update`` brought every answer. The
client can be on any process; the record is where the two meet."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_protocol.cancellation import CancelledError

from ...input_required import InputRequiredResult
from ...mrtr import check_declared
from . import store
from .notify import publish

# Seconds between two looks at the record while the task waits for its answers.
ANSWER_POLL_INTERVAL = 0.25


async def fulfil(ctx: Any, value: InputRequiredResult) -> dict[str, Any] | None:
    """The answers to ``value``'s requests, by the handler's keys (None for a state-only result:
    the handler runs again at once). Raises CancelledError when the task is cancelled meanwhile."""
    if not value.input_requests:
        return None
    check_declared(ctx, value)
    wire_keys = await store.ask(ctx.call_id, value.input_requests)
    if not wire_keys:
        raise CancelledError(ctx.request_id, "cancelled")
    await publish(ctx.call_id, ctx.task_transport)
    while True:
        if ctx.cancellation.cancelled:
            raise CancelledError(ctx.request_id, "cancelled")
        answers = await store.take_answers(ctx.call_id)
        if answers is not None:
            return {wire_keys[wire]: answer for wire, answer in answers.items() if wire in wire_keys}
        await asyncio.sleep(ANSWER_POLL_INTERVAL)
