"""Deleting finished background calls once their retention (``BACKGROUND_CALL_RETENTION``) is over.

Tasks are not deleted here: a task stays readable for its ``TASK_TTL_MS`` (the Tasks extension's
cleanup, which runs this one too: ``manage.py mcp_clean_tasks`` and the Celery beat entry).
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from ..models import ToolCall
from ..settings import mcp_settings
from .records import FINAL_STATES


def retention() -> float | None:
    """``BACKGROUND_CALL_RETENTION`` in seconds, checked (None: calls are kept forever)."""
    value = mcp_settings.BACKGROUND_CALL_RETENTION
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
        raise ImproperlyConfigured("MCP_SERVER['BACKGROUND_CALL_RETENTION'] must be a positive number of "
                                   f"seconds or None, not {value!r}")
    return value


def delete_finished_calls() -> int | None:
    """Delete the background calls (not tasks) that finished longer than the retention ago: how
    many (None when they are kept forever)."""
    seconds = retention()
    if seconds is None:
        return None
    cutoff = timezone.now() - timedelta(seconds=seconds)
    deleted, _ = ToolCall.objects.filter(task=False, state__in=FINAL_STATES, finished_at__lt=cutoff).delete()
    return deleted
