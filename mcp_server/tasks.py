"""The Celery task of background tool calls (found by ``app.autodiscover_tasks()``)."""

from __future__ import annotations

from celery import shared_task

from .background.runner import TASK_NAME


@shared_task(name=TASK_NAME, ignore_result=True)
def run_tool_call(call_id: str) -> str:
    """Run the background call ``call_id`` (its ``ToolCall`` record says what to run and where its
    messages go); returns how it ended, for the worker's log."""
    from .background.worker import run_call

    return run_call(call_id)
