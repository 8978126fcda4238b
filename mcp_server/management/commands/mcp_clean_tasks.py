"""``python manage.py mcp_clean_tasks``: delete finished tasks older than their TTL.

``MCP_SERVER["TASK_TTL_MS"]`` says how long a task stays readable; past it ``tasks/get`` answers
"expired" and this deletes the record. The Celery beat entry ``mcp_server.clean_tasks`` runs the
same cleanup periodically (see the README).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_server.extensions.tasks.cleanup import clean_expired_tasks


class Command(BaseCommand):
    help = "Delete finished tasks (Tasks extension) created longer than MCP_SERVER['TASK_TTL_MS'] ago."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = clean_expired_tasks()
        if deleted is None:
            self.stdout.write("MCP_SERVER['TASK_TTL_MS'] is None: tasks never expire; nothing deleted.")
        else:
            self.stdout.write(f"Deleted {deleted} expired task(s).")
