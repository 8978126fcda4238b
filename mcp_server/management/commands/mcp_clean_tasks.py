"""``python manage.py mcp_clean_tasks``: delete finished tasks older than their TTL, and finished
background calls older than their retention.

``MCP_SERVER["TASK_TTL_MS"]`` says how long a task stays readable; past it ``tasks/get`` answers
"expired" and this deletes the record. ``MCP_SERVER["BACKGROUND_CALL_RETENTION"]`` says how long
the record of another background call is kept once it finished. The Celery beat entry
``mcp_server.clean_tasks`` runs the same cleanup periodically (docs/background.md).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_server.extensions.tasks.cleanup import clean


class Command(BaseCommand):
    help = ("Delete finished tasks (Tasks extension) created longer than MCP_SERVER['TASK_TTL_MS'] ago, and "
            "other finished background calls older than MCP_SERVER['BACKGROUND_CALL_RETENTION'].")

    def handle(self, *args: Any, **options: Any) -> None:
        cleaned = clean()
        summary = cleaned.summary()
        self.stdout.write(summary[0].upper() + summary[1:] + ".")
