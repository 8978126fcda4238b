"""The database record of each background call (``ToolCall``): every write of it, in one place.

State moves one way: queued -> running -> completed | failed | cancelled (or queued -> failed |
cancelled). Each move is one conditional UPDATE, so two processes that race (a worker starting
the call, a web process cancelling it) cannot both win.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

from django.db import connections, router, transaction
from django.db.models import F
from django.utils import timezone

from mcp_protocol import methods

from .. import audit, log_context
from ..invoke import run_in_thread
from ..models import ToolCall
from ..telemetry import metrics

State = ToolCall.State
FINAL_STATES = (State.COMPLETED, State.FAILED, State.CANCELLED)
IN_FLIGHT_STATES = (State.QUEUED, State.RUNNING, State.INPUT_REQUIRED)


def new_call_id() -> str:
    """Unguessable: the id names the call to admin, and later to Tasks clients."""
    return uuid.uuid4().hex


def _create(**fields: Any) -> ToolCall:
    return ToolCall.objects.create(id=new_call_id(), **fields)


def _in_flight(principal_key: str) -> int:
    """The calls of a principal queued or running (tasks waiting for input included)."""
    return ToolCall.objects.filter(principal_key=principal_key, state__in=IN_FLIGHT_STATES).count()


def _admit(limit: int | None, **fields: Any) -> ToolCall | None:
    """Store a new call unless its principal (``principal_key``) has ``limit`` in flight; None then."""
    if limit is None:
        return _create(**fields)
    key = fields["principal_key"]
    alias = router.db_for_write(ToolCall)
    if connections[alias].vendor == "postgresql":
        # The admissions of one principal take turns, on every process (a lock held until the
        # transaction ends): counting and then inserting is exact.
        with transaction.atomic(using=alias):
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_id(key)])
            if _in_flight(key) >= limit:
                return None
            return _create(**fields)
    # Without such a lock: inserted first (committed, so every process counts it), then counted.
    # Calls racing may all be refused, but never all admitted past the limit.
    call = _create(**fields)
    if _in_flight(key) > limit:
        ToolCall.objects.filter(id=call.id).delete()
        return None
    return call


def _lock_id(principal_key: str) -> int:
    """The principal's PostgreSQL advisory lock: a signed 64-bit number of its own."""
    digest = hashlib.sha256(f"mcp_server.background:{principal_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def log_ids(call: ToolCall) -> log_context.serving:
    """Log records written inside carry the ids of the call's request, as the web process that
    took it had them (request, session, the trace id of its ``_meta``), wherever they are written."""
    return log_context.serving(method=methods.TOOLS_CALL, request_id=call.request_id,
                               session_id=call.session_id or None, params=call.params)


def request_params(call: ToolCall) -> dict:
    """The ``tools/call`` params of the call's request: its params as kept, with its arguments
    (kept once, in their own field)."""
    return {**(call.params or {}), "name": call.tool, "arguments": call.arguments}


def _start(call_id: str, runner: str, worker: str) -> ToolCall | None:
    """queued -> running, unless it was cancelled or ended meanwhile (then None: do not run it)."""
    now = timezone.now()
    started = ToolCall.objects.filter(id=call_id, state=State.QUEUED, cancel_requested=False).update(
        state=State.RUNNING, runner=runner, worker=worker, started_at=now, updated_at=now,
        attempts=F("attempts") + 1)
    call = ToolCall.objects.filter(id=call_id).first() if started else None
    if call is not None:
        metrics.background_call_started(call.tool, call.created_at, call.started_at)
    return call


def _requeue(call_id: str, dead_runner: str, retries: int) -> bool:
    """running -> queued for an idempotent call whose runner died, while it has runs left."""
    return bool(ToolCall.objects.filter(
        id=call_id, state=State.RUNNING, runner=dead_runner, idempotent=True, cancel_requested=False,
        attempts__lte=retries,
    ).update(state=State.QUEUED, runner="", worker="", updated_at=timezone.now()))


def _ended(call_id: str, moved: int) -> bool:
    """Whether this process moved the call to its final state; if so its audit row is queued
    (once per call: only one conditional update wins), when the move is committed."""
    if moved:
        transaction.on_commit(lambda: audit.call_ended(call_id))
    return bool(moved)


def _finish(call_id: str, state: str, response: dict | None = None, error: str = "",
            from_states: tuple[str, ...] = (State.QUEUED, State.RUNNING, State.INPUT_REQUIRED)) -> bool:
    now = timezone.now()
    return _ended(call_id, ToolCall.objects.filter(id=call_id, state__in=from_states).update(
        state=state, response=response, error=error, finished_at=now, updated_at=now))


def _expire_queued(call_id: str, seconds: float, response: dict, error: str) -> bool:
    """queued -> failed for a call that has waited ``seconds`` or more for a worker since it was
    queued (its last write); False when a worker took it, or it ended, meanwhile."""
    now = timezone.now()
    return _ended(call_id, ToolCall.objects.filter(
        id=call_id, state=State.QUEUED, updated_at__lte=now - timedelta(seconds=seconds),
    ).update(state=State.FAILED, response=response, error=error, finished_at=now, updated_at=now))


def _record_progress(call_id: str, progress: float, total: float | None, message: str | None) -> None:
    ToolCall.objects.filter(id=call_id).update(progress=progress, total=total, message=message or "",
                                               updated_at=timezone.now())


def _request_cancel(call_id: str) -> ToolCall | None:
    """Set the call's flag; a queued call is cancelled at once. The record as it is then."""
    with transaction.atomic():
        ToolCall.objects.filter(id=call_id).exclude(state__in=FINAL_STATES).update(
            cancel_requested=True, updated_at=timezone.now())
        _finish(call_id, State.CANCELLED, from_states=(State.QUEUED,))
        return ToolCall.objects.filter(id=call_id).first()


def _cancel_requested(call_id: str) -> bool:
    return ToolCall.objects.filter(id=call_id, cancel_requested=True).exists()


def _of_request(session_id: str, request_key: str) -> ToolCall | None:
    """The newest call of a session's request (an id may be sent again once its call ended)."""
    return (ToolCall.objects.filter(session_id=session_id, request_key=request_key)
            .order_by("-created_at").first())


def _get(call_id: str) -> ToolCall | None:
    return ToolCall.objects.filter(id=call_id).first()


# The same, from async code (on a worker thread with fresh connections).
def _owner(call: ToolCall) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=call.owner_id).first()


async def owner(call: ToolCall) -> Any:
    """The Django user who made the call (None when the row is gone)."""
    return await run_in_thread(_owner, call)


async def admit(limit: int | None, **fields: Any) -> ToolCall | None:
    return await run_in_thread(_admit, limit, **fields)


async def in_flight(principal_key: str) -> int:
    return await run_in_thread(_in_flight, principal_key)


async def start(call_id: str, runner: str, worker: str) -> ToolCall | None:
    return await run_in_thread(_start, call_id, runner, worker)


async def finish(call_id: str, state: str, response: dict | None = None, error: str = "") -> bool:
    return await run_in_thread(_finish, call_id, state, response, error)


async def requeue(call_id: str, dead_runner: str, retries: int) -> bool:
    return await run_in_thread(_requeue, call_id, dead_runner, retries)


async def expire_queued(call_id: str, seconds: float, response: dict, error: str) -> bool:
    return await run_in_thread(_expire_queued, call_id, seconds, response, error)


async def record_progress(call_id: str, progress: float, total: float | None, message: str | None) -> None:
    await run_in_thread(_record_progress, call_id, progress, total, message)


async def request_cancel(call_id: str) -> ToolCall | None:
    return await run_in_thread(_request_cancel, call_id)


async def cancel_requested(call_id: str) -> bool:
    return await run_in_thread(_cancel_requested, call_id)


async def of_request(session_id: str, request_key: str) -> ToolCall | None:
    return await run_in_thread(_of_request, session_id, request_key)


async def get(call_id: str) -> ToolCall | None:
    return await run_in_thread(_get, call_id)


def fail_if_queued(call_id: str, error: str) -> bool:
    """A queued call whose web process died: it will not run (sync)."""
    return _finish(call_id, State.FAILED, error=error, from_states=(State.QUEUED,))
