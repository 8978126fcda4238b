"""Template tags of the MCP server app: ``{% load mcp_server_tags %}``."""

from __future__ import annotations

from django import template

from ..site import get_server

register = template.Library()


@register.simple_tag
def mcp_server_title() -> str:
    """The default server's title, else its name (``MCP_SERVER["TITLE"]``, ``["NAME"]``)."""
    server = get_server()
    return server.title or server.name
