"""The Celery tasks of the MCP server (Celery's ``app.autodiscover_tasks()`` finds this module by
its name): background tool calls, the deletion of expired Tasks-extension tasks and of
finished background calls past their retention, and of audit rows past theirs."""

from __future__ import annotations

from celery import shared_task

from .audit.retention import CLEAN_AUDIT_TASK, delete_expired, summary
from .background.runner import TASK_NAME
from .extensions.tasks.cleanup import CLEAN_TASKS_TASK, clean


# acks_late=False: acknowledged when a worker takes it, so a worker that dies does not get it run
# again (an idempotent call is queued again by the process that finds its worker dead).
@shared_task(name=TASK_NAME, ignore_result=True, acks_late=False)
def run_tool_call(call_id: str) -> str:
    """Run the background call ``call_id`` (its ``ToolCall`` record says what to run and where its
    messages go); returns how it ended, for the worker's log."""
    from .background.worker import run_call
    from .site import get_transport

    return run_call(call_id, get_transport())


@shared_task(name=CLEAN_TASKS_TASK, ignore_result=True)
def clean_tasks() -> str:
    """Delete finished Tasks-extension tasks older than ``MCP_SERVER["TASK_TTL_MS"]``, and other
    background calls finished longer than ``BACKGROUND_CALL_RETENTION`` ago (the beat entry
    ``mcp_server.extensions.tasks.cleanup.CLEAN_TASKS_SCHEDULE`` runs it)."""
    return clean().summary()


@shared_task(name=CLEAN_AUDIT_TASK, ignore_result=True)
def clean_audit() -> str:
    """Delete audit rows older than ``MCP_SERVER["AUDIT_RETENTION_DAYS"]`` (the beat entry
    ``mcp_server.audit.retention.CLEAN_AUDIT_SCHEDULE`` runs it)."""
    return summary(delete_expired())
