"""Protocol extensions: MCP Apps (``mcp_apps``) and Tasks (``tasks``); ``Apps`` and ``Tasks``
are their entries for ``Capabilities.support_extensions``, loaded when first used (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Apps", "Tasks"]


def __getattr__(name: str) -> Any:
    if name == "Apps":
        from .mcp_apps import Apps

        return Apps
    if name == "Tasks":
        from .tasks import Tasks

        return Tasks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .mcp_apps import Apps
    from .tasks import Tasks
