from __future__ import annotations

from django.apps import AppConfig


class MCPServerConfig(AppConfig):
    name = "mcp_server"
    verbose_name = "MCP server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401 - importing it registers the system checks
            log_context,
            signals,
            site,
        )

        log_context.install()  # after Django's LOGGING, which keeps a logger's filters
        site.install()
        signals.connect()
        site.autodiscover()
