"""Which runner background calls use, and how they are handed to Celery.

``MCP_SERVER["BACKGROUND_CALLS"]``: ``"auto"`` (the default) uses Celery when the project sets
``CELERY_BROKER_URL``, else runs them in the web process; ``"celery"`` and ``"local"`` force one.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from mcp_protocol.errors import InternalError

from ..settings import mcp_settings

CHOICES = ("auto", "celery", "local")
TASK_NAME = "mcp_server.run_tool_call"


def runner_name() -> str:
    """``"celery"`` or ``"local"``, as configured."""
    choice = mcp_settings.BACKGROUND_CALLS
    if choice not in CHOICES:
        raise ImproperlyConfigured(f"MCP_SERVER['BACKGROUND_CALLS'] must be one of {CHOICES}, not {choice!r}")
    if choice == "auto":
        return "celery" if getattr(settings, "CELERY_BROKER_URL", None) else "local"
    return choice


def celery_enabled() -> bool:
    return runner_name() == "celery"


def enqueue(call_id: str, task_id: str | None = None) -> None:
    """Queue the call's Celery task (blocking: it talks to the broker), by the name the workers
    know it by (``mcp_server.tasks``). At most once: the task is acknowledged when a worker takes
    it, so a worker that dies does not get it run again (an idempotent call is queued again by the
    process that finds its worker dead: recovery.py)."""
    from celery import current_app

    try:
        current_app.send_task(TASK_NAME, (call_id,), task_id=task_id or call_id, ignore_result=True)
    except Exception as exc:  # the broker refused or did not answer
        raise InternalError(f"The background call could not be queued: {type(exc).__name__}") from exc


def revoke(call_id: str) -> None:
    """Tell the workers to drop the queued task (blocking). A worker that took it anyway finds its
    record cancelled and does not run it."""
    from celery import current_app

    current_app.control.revoke(call_id)
