"""Deleting expired tasks: from ``manage.py mcp_clean_tasks`` and the Celery beat entry
(``CLEAN_TASKS_SCHEDULE``, the task ``mcp_server.clean_tasks``)."""

from __future__ import annotations

from .store import delete_expired
from .wire import ttl_ms

# The Celery beat entry a project adds to ``CELERY_BEAT_SCHEDULE`` (every 10 minutes).
CLEAN_TASKS_TASK = "mcp_server.clean_tasks"
CLEAN_TASKS_SCHEDULE = {"mcp-clean-tasks": {"task": CLEAN_TASKS_TASK, "schedule": 600.0}}


def clean_expired_tasks() -> int | None:
    """Delete finished tasks older than ``TASK_TTL_MS``: how many (None when tasks never expire)."""
    ttl = ttl_ms()
    if ttl is None:
        return None
    return delete_expired(ttl)
