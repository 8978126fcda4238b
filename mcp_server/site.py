"""The project's default server, and decorators that register onto it from ``mcp.py`` modules."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .configuration import Configuration
from .server import Server
from .settings import mcp_settings

_lock = threading.Lock()
_default: Server | None = None


def get_server() -> Server:
    """The server built from ``settings.MCP_SERVER``, which every ``mcp.py`` registers onto."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = build_server()
    return _default


def build_server() -> Server:
    s = mcp_settings
    configuration = Configuration(
        exception_reporter=s.EXCEPTION_REPORTER,
        around_request=s.AROUND_REQUEST,
        instrumentation_callback=s.INSTRUMENTATION_CALLBACK,
        instrument_server_context=s.INSTRUMENT_SERVER_CONTEXT,
        protocol_version=s.PROTOCOL_VERSION,
        validate_tool_call_arguments=s.VALIDATE_TOOL_CALL_ARGUMENTS,
        validate_tool_call_results=s.VALIDATE_TOOL_CALL_RESULTS,
    )
    return s.SERVER_CLASS(
        s.NAME, title=s.TITLE, version=s.VERSION, description=s.DESCRIPTION,
        instructions=s.INSTRUCTIONS, website_url=s.WEBSITE_URL, icons=s.ICONS,
        capabilities=s.CAPABILITIES, page_size=s.PAGE_SIZE, ttl_ms=s.TTL_MS,
        cache_scope=s.CACHE_SCOPE, configuration=configuration,
    )


def reset() -> None:
    """Forget the default server (after settings change); ``mcp.py`` modules are re-run."""
    global _default
    with _lock:
        _default = None
    from .apps import autodiscover

    autodiscover(force=True)


def register(item: Any) -> Any:
    """Class decorator (or call) adding a Tool, Prompt, Resource or ResourceTemplate."""
    return get_server().register(item)


def tool(function: Callable | None = None, **fields: Any) -> Any:
    """``@mcp_server.tool`` makes a function with typed keyword arguments a tool."""
    return get_server().tool(function, **fields)


def prompt(function: Callable | None = None, **fields: Any) -> Any:
    return get_server().prompt(function, **fields)


def resource(uri: str, **fields: Any) -> Callable:
    return get_server().resource(uri, **fields)


def resource_template(uri_template: str, **fields: Any) -> Callable:
    return get_server().resource_template(uri_template, **fields)
