"""``notifications/tasks``: each change of a task's status, offered to the ``subscriptions/listen``
streams of every process (a listen stream delivers it when it asked for that task id)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp_protocol import jsonrpc, methods

from ...background import records
from ...telemetry import metrics
from .wire import STATUS, detailed

logger = logging.getLogger("mcp_server.tasks")


def notification(call: Any) -> dict:
    return jsonrpc.notification(methods.NOTIFICATIONS_TASKS, detailed(call))


# What tells the listen streams when a change is not made through an HTTP transport (stdio, in
# process): the default server's, which ``install`` gives.
default_transport: Callable[[], Any] | None = None


async def publish(call_id: str, transport: Any = None) -> None:
    """Tell every process's listen streams what the task is now (from a web process or a worker;
    ``transport`` defaults to :data:`default_transport`'s). A failure is logged, never raised:
    polling with ``tasks/get`` still works."""
    try:
        call = await records.get(call_id)
        if call is None or not call.task:
            return
        metrics.task_changed(STATUS[call.state])
        if transport is None and default_transport is not None:
            transport = default_transport()
        if transport is None:
            return
        await transport.tell_listen_streams(notification(call))
    except Exception as exc:  # a lost notification must not fail the task
        logger.warning("notifications/tasks for %s not sent: %s", call_id, exc)
