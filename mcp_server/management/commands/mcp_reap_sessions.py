"""``python manage.py mcp_reap_sessions``: remove expired sessions and old stored events.

The endpoint does this by itself in the background; run this from cron when no process serves
traffic for long stretches, or to clean up after changing ``SESSION_IDLE_TIMEOUT``.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from mcp_server.site import get_transport


class Command(BaseCommand):
    help = "Remove MCP sessions idle for longer than MCP_SERVER['SESSION_IDLE_TIMEOUT'] and old events."

    def handle(self, *args: Any, **options: Any) -> None:
        expired = async_to_sync(get_transport().reap)()
        self.stdout.write(f"Removed {len(expired)} expired session(s).")
