"""How long audit rows are kept (``AUDIT_RETENTION_DAYS``): ``manage.py mcp_clean_audit`` and the
Celery beat entry (``CLEAN_AUDIT_SCHEDULE``, the task ``mcp_server.clean_audit``) delete older rows.
Deleting is the only change an audit row ever sees."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from ..models import AuditRecord
from ..settings import mcp_settings

# The Celery beat entry a project adds to ``CELERY_BEAT_SCHEDULE`` (once an hour).
CLEAN_AUDIT_TASK = "mcp_server.clean_audit"
CLEAN_AUDIT_SCHEDULE = {"mcp-clean-audit": {"task": CLEAN_AUDIT_TASK, "schedule": 3600.0}}


def retention_days() -> int | float | None:
    """``AUDIT_RETENTION_DAYS``, checked: days a row is kept (None: forever)."""
    days = mcp_settings.AUDIT_RETENTION_DAYS
    if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or days <= 0):
        raise ImproperlyConfigured("MCP_SERVER['AUDIT_RETENTION_DAYS'] must be a positive number of days "
                                   f"or None, not {days!r}")
    return days


def delete_expired() -> int | None:
    """Delete the rows older than the retention: how many (None when rows are kept forever)."""
    days = retention_days()
    if days is None:
        return None
    deleted, _ = AuditRecord.objects.filter(time__lt=timezone.now() - timedelta(days=days)).delete()
    return deleted


def summary(deleted: int | None) -> str:
    if deleted is None:
        return "audit rows are kept forever (AUDIT_RETENTION_DAYS is None)"
    days = mcp_settings.AUDIT_RETENTION_DAYS
    return f"deleted {deleted} audit row(s) older than AUDIT_RETENTION_DAYS ({days} days)"
