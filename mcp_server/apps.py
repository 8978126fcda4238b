from __future__ import annotations

from django.apps import AppConfig


class MCPServerConfig(AppConfig):
    name = "mcp_server"
    verbose_name = "MCP server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401 - importing it registers the system checks
            signals,
            site,
        )

        site.install()
        signals.connect()
        site.autodiscover()
