"""``notifications/tasks``: each change of a task's status, offered to the ``subscriptions/listen``
streams of every process (a listen stream delivers it when it asked for that task id)."""

from __future__ import annotations

import logging
from typing import Any

from mcp_protocol import jsonrpc

from ...background import records
from . import NOTIFICATIONS_TASKS
from .wire import detailed

logger = logging.getLogger("mcp_server.tasks")


def notification(call: Any) -> dict:
    return jsonrpc.notification(NOTIFICATIONS_TASKS, detailed(call))


async def publish(call_id: str, transport: Any = None) -> None:
    """Tell every process's listen streams what the task is now (from a web process or a worker;
    ``transport`` defaults to the default server's). A failure is logged, never raised: polling
    with ``tasks/get`` still works."""
    try:
        call = await records.get(call_id)
        if call is None or not call.task:
            return
        if transport is None:
            from ...site import get_transport

            transport = get_transport()
        await transport.tell_listen_streams(notification(call))
    except Exception as exc:  # a lost notification must not fail the task
        logger.warning("notifications/tasks for %s not sent: %s", call_id, exc)
