from .mcp_apps import Apps

__all__ = ["Apps"]
