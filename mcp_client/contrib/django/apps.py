from __future__ import annotations

from django.apps import AppConfig


class MCPClientConfig(AppConfig):
    name = "mcp_client.contrib.django"
    label = "mcp_client"  # not "django", which the last part of the name would give
    verbose_name = "MCP client"
    default_auto_field = "django.db.models.BigAutoField"
