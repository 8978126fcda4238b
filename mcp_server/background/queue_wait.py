"""A background call that no worker takes fails after ``BACKGROUND_CALL_QUEUE_TIMEOUT`` seconds in
the queue, with an error that says so, instead of leaving its client waiting until it gives up.

The move from queued to failed is one conditional UPDATE (``records.expire_queued``), so a worker
that takes the call at the same moment either runs it or finds it failed, never both. Whoever
watches the call then gives the client the error: the web process that holds the request (relay
and stream deliveries), or the process asked about the task (the Tasks extension).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from mcp_protocol import jsonrpc
from mcp_protocol.errors import InternalError

from ..models import ToolCall
from ..settings import mcp_settings
from . import records
from .runner import broker_url

logger = logging.getLogger("mcp_server.background")


def queue_timeout() -> float | None:
    """``MCP_SERVER["BACKGROUND_CALL_QUEUE_TIMEOUT"]``, checked: seconds, or None (no bound)."""
    value = mcp_settings.BACKGROUND_CALL_QUEUE_TIMEOUT
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ImproperlyConfigured(f"MCP_SERVER['BACKGROUND_CALL_QUEUE_TIMEOUT'] must be a positive number "
                                   f"of seconds or None, not {value!r}")
    return value


def untaken_message(seconds: float) -> str:
    return (f"No worker took this background call within {seconds:g} s; is a Celery worker running for "
            f"the broker {broker_url()}? (MCP_SERVER['BACKGROUND_CALL_QUEUE_TIMEOUT'] bounds the wait)")


async def expire_if_untaken(call: ToolCall) -> InternalError | None:
    """Fail ``call`` when it has waited past the bound for a worker: the error its client gets
    (the record keeps it, and the response it stands for), or None when it is not due, or was
    taken or ended meanwhile (by a worker, or by another process that expired it first)."""
    seconds = queue_timeout()
    if seconds is None or call.state != records.State.QUEUED:
        return None
    error = InternalError(untaken_message(seconds))
    response = jsonrpc.error_from(call.request_id, error)
    if not await records.expire_queued(call.id, seconds, response, str(error)):
        return None
    with records.log_ids(call):
        logger.warning("background call %s (%s) failed: %s", call.id, call.tool, error)
    return error


def wait_before_check(call: Any, interval: float) -> float:
    """Seconds to wait before looking at ``call`` again: ``interval``, or less when its bound passes
    sooner (so the client hears of it when it passes, not up to an interval later)."""
    seconds = queue_timeout()
    if seconds is None or call is None or call.state != records.State.QUEUED or call.updated_at is None:
        return interval
    from django.utils import timezone

    due = seconds - (timezone.now() - call.updated_at).total_seconds()
    return max(0.05, min(interval, due + 0.05))
