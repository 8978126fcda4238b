"""Your Django code as MCP tools (docs/django_tools.md)."""

from .viewsets import viewset_tools

__all__ = ["viewset_tools"]
