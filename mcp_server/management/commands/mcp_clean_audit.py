"""``python manage.py mcp_clean_audit``: delete audit rows older than
``MCP_SERVER["AUDIT_RETENTION_DAYS"]``. The Celery beat entry ``mcp_server.clean_audit`` runs the
same deletion periodically (docs/audit.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_server.audit.retention import delete_expired, summary


class Command(BaseCommand):
    help = "Delete audit rows (AuditRecord) older than MCP_SERVER['AUDIT_RETENTION_DAYS']."

    def handle(self, *args: Any, **options: Any) -> None:
        text = summary(delete_expired())
        self.stdout.write(text[0].upper() + text[1:] + ".")
