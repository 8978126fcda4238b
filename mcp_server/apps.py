from __future__ import annotations

import importlib
import sys

from django.apps import AppConfig, apps
from django.utils.module_loading import module_has_submodule


class MCPServerConfig(AppConfig):
    name = "mcp_server"
    verbose_name = "MCP server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
        from .registry import changes
        from .settings import mcp_settings

        changes.connect()

        if mcp_settings.AUTODISCOVER:
            autodiscover()


def autodiscover(*, force: bool = False) -> None:
    """Import every installed app's ``mcp.py``, as admin imports ``admin.py``.

    With ``force`` the modules run again, re-registering onto a freshly built default server.
    """
    for app_config in apps.get_app_configs():
        if not module_has_submodule(app_config.module, "mcp"):
            continue
        name = f"{app_config.name}.mcp"
        if force and name in sys.modules:
            importlib.reload(sys.modules[name])
        else:
            importlib.import_module(name)
