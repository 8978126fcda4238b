"""A background call whose runner died mid-call: it ends with an error, or, when its tool is
idempotent and has runs left (``BACKGROUND_RETRIES``), it is queued again and its client waits."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..http.event_store import request_key
from ..invoke import run_in_thread
from ..models import ToolCall
from ..settings import mcp_settings
from . import records
from .runner import celery_enabled, enqueue

if TYPE_CHECKING:
    from ..http.transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.background")


async def run_again(transport: StreamableHTTPTransport, call: ToolCall) -> bool:
    """Queue ``call`` again after its runner died; True when it was (no error for the client).

    Called by the one process that found the runner dead (the take-over of its claim is atomic,
    and the record moves back to ``queued`` only from that runner): a run is never started twice
    for one death. That process holds the request until a worker takes it.
    """
    if not call.idempotent or call.delivery == "local" or not celery_enabled():
        return False
    if not await records.requeue(call.id, call.runner, mcp_settings.BACKGROUND_RETRIES):
        return False
    if call.delivery == "stream":
        await transport.take_request(call.session_id, call.request_id)
    try:
        # A task id of its own: a worker remembers revoked and finished ids.
        await run_in_thread(enqueue, call.id, f"{call.id}.{call.attempts}")
    except Exception as exc:
        with records.log_ids(call):
            logger.warning("queueing %s again failed: %s", call.id, exc)
        return False
    with records.log_ids(call):
        logger.info("the worker running %s (%s) stopped; it runs again (run %d)", call.id, call.tool,
                    call.attempts + 1)
    return True


async def settle_stopped_request(transport: StreamableHTTPTransport, session_id: str,
                                 request_id: Any) -> bool:
    """The process serving a request died: whether its client gets its error now. Not when it is a
    background call still queued on the broker or started by a live worker meanwhile (a worker
    answers it on its stream), or one queued again (an idempotent tool's); otherwise its record
    ends failed."""
    call = await records.of_request(session_id, request_key(request_id))
    if call is None or call.finished:
        return call is None
    if call.state == records.State.QUEUED and call.delivery == "stream" and celery_enabled():
        # No worker took it yet: the one that does writes on the request's stream, which the
        # client resumes on any process. This process holds the request until then, as after
        # run_again(); a rolling restart (or a crash) of the web process that received it loses
        # no call.
        await transport.take_request(call.session_id, call.request_id)
        return False
    if call.state == records.State.RUNNING:
        if not await transport.liveness.holds_dead(call.runner, transport.runtime.channel_key):
            return False
        if await run_again(transport, call):
            return False
    return await records.finish(call.id, records.State.FAILED, error="its process stopped")
