from __future__ import annotations

from django.apps import AppConfig


class AuthorizationServerConfig(AppConfig):
    name = "mcp_server.authorization_server"
    label = "mcp_authorization_server"
    verbose_name = "MCP authorization server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, client_secrets, conf  # noqa: F401 - checks registers the system checks

        conf.apply()
        conf.connect()
        client_secrets.connect()
