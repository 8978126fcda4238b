"""Deleting expired tasks, and with them the background calls past their retention: from
``manage.py mcp_clean_tasks`` and the Celery beat entry (``CLEAN_TASKS_SCHEDULE``, the task
``mcp_server.clean_tasks``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...background.cleanup import delete_finished_calls
from .store import delete_expired
from .wire import ttl_ms

# The Celery beat entry a project adds to ``CELERY_BEAT_SCHEDULE`` (every 10 minutes).
CLEAN_TASKS_TASK = "mcp_server.clean_tasks"
CLEAN_TASKS_SCHEDULE = {"mcp-clean-tasks": {"task": CLEAN_TASKS_TASK, "schedule": 600.0}}


@dataclass(frozen=True)
class Cleaned:
    """How many records a cleanup deleted; None where the settings keep them forever."""

    tasks: int | None
    calls: int | None

    def summary(self) -> str:
        tasks = "tasks never expire (TASK_TTL_MS is None)" if self.tasks is None else \
            f"deleted {self.tasks} expired task(s)"
        calls = "finished background calls are kept (BACKGROUND_CALL_RETENTION is None)" \
            if self.calls is None else f"deleted {self.calls} finished background call(s) past retention"
        return f"{tasks}; {calls}"


def clean_expired_tasks() -> int | None:
    """Delete finished tasks older than ``TASK_TTL_MS``: how many (None when tasks never expire)."""
    ttl = ttl_ms()
    if ttl is None:
        return None
    return delete_expired(ttl)


def clean() -> Cleaned:
    """The periodic cleanup: expired tasks, and finished background calls past their retention."""
    return Cleaned(tasks=clean_expired_tasks(), calls=delete_finished_calls())
