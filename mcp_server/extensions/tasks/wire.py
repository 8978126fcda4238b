"""A call record as the extension's ``Task`` (SEP-2663): the seed of ``CreateTaskResult``, and the
``DetailedTask`` of ``tasks/get`` and ``notifications/tasks``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from mcp_protocol.errors import INTERNAL_ERROR

from ...models import ToolCall
from ...settings import mcp_settings

State = ToolCall.State
STATUS = {State.QUEUED: "working", State.RUNNING: "working", State.INPUT_REQUIRED: "input_required",
          State.COMPLETED: "completed", State.FAILED: "failed", State.CANCELLED: "cancelled"}


def _positive_ms(name: str, allow_none: bool) -> int | None:
    value = getattr(mcp_settings, name)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ImproperlyConfigured(f"MCP_SERVER[{name!r}] must be a positive integer of milliseconds"
                                   f"{' or None' if allow_none else ''}, not {value!r}")
    return value


def ttl_ms() -> int | None:
    return _positive_ms("TASK_TTL_MS", allow_none=True)


def poll_interval_ms() -> int:
    return _positive_ms("TASK_POLL_INTERVAL_MS", allow_none=False)


def expired(call: ToolCall, now: datetime | None = None) -> bool:
    ttl = ttl_ms()
    return ttl is not None and call.created_at + timedelta(milliseconds=ttl) < (now or timezone.now())


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC, to the millisecond: ``2026-12-02T14:30:00.123Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def task(call: ToolCall) -> dict[str, Any]:
    """The ``Task`` fields every shape carries."""
    status = STATUS[call.state]
    entry: dict[str, Any] = {
        "taskId": call.id, "status": status, "createdAt": timestamp(call.created_at),
        "lastUpdatedAt": timestamp(call.updated_at), "ttlMs": ttl_ms(),
        "pollIntervalMs": poll_interval_ms(),
    }
    message = _status_message(call, status)
    if message:
        entry["statusMessage"] = message
    return entry


def detailed(call: ToolCall) -> dict[str, Any]:
    """The ``DetailedTask``: with ``inputRequests``, ``result`` or ``error`` as its status has."""
    entry = task(call)
    status = entry["status"]
    if status == "input_required":
        entry["inputRequests"] = call.input_requests or {}
    elif status == "completed":
        entry["result"] = (call.response or {}).get("result", {})
    elif status == "failed":
        entry["error"] = error_of(call)
    return entry


def error_of(call: ToolCall) -> dict[str, Any]:
    """The JSON-RPC error a failed call ended with (an internal error when only its text is kept:
    the client learns that it failed, never the exception's text)."""
    response = call.response or {}
    if isinstance(response.get("error"), dict):
        return response["error"]
    return {"code": INTERNAL_ERROR, "message": "Internal error"}


def _status_message(call: ToolCall, status: str) -> str:
    if status == "working":
        return call.message
    if status == "failed":
        return str(error_of(call).get("message", ""))
    if status == "input_required":
        return "waiting for the client's input"
    return ""
