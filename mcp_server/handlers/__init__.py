"""The method table: JSON-RPC method name to handler, the same for every transport."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp_protocol import methods

from . import completion, lifecycle, prompts, resources, tools
from .discover import discover

Handler = Callable[[Any], Awaitable[Any]]

# method -> (handler, capability path the server must declare, or None)
BUILTIN_METHODS: dict[str, tuple[Handler, str | None]] = {
    methods.INITIALIZE: (lifecycle.initialize, None),
    methods.PING: (lifecycle.ping, None),
    methods.SERVER_DISCOVER: (discover, None),
    methods.LOGGING_SET_LEVEL: (lifecycle.set_level, "logging"),
    methods.TOOLS_LIST: (tools.list_tools, "tools"),
    methods.TOOLS_CALL: (tools.call_tool, "tools"),
    methods.PROMPTS_LIST: (prompts.list_prompts, "prompts"),
    methods.PROMPTS_GET: (prompts.get_prompt, "prompts"),
    methods.RESOURCES_LIST: (resources.list_resources, "resources"),
    methods.RESOURCES_READ: (resources.read_resource, "resources"),
    methods.RESOURCES_TEMPLATES_LIST: (resources.list_templates, "resources"),
    methods.RESOURCES_SUBSCRIBE: (resources.subscribe, "resources.subscribe"),
    methods.RESOURCES_UNSUBSCRIBE: (resources.unsubscribe, "resources.subscribe"),
    methods.COMPLETION_COMPLETE: (completion.complete, "completions"),
}

# Methods an extension adds (the Tasks extension's ``tasks/*``), registered by the extension when
# the site is installed: the engine never imports an extension.
EXTENSION_METHODS: dict[str, tuple[Handler, str | None]] = {}


def register_extension_method(method: str, handler: Handler, capability: str | None = None) -> None:
    """Answer ``method`` with ``handler`` on every server; ``capability``: the path the server
    must declare, or None when the handler checks that itself."""
    if method in BUILTIN_METHODS:
        raise ValueError(f"{method} is a method of the protocol itself, not of an extension")
    EXTENSION_METHODS[method] = (handler, capability)


def method_entry(method: str) -> tuple[Handler, str | None] | None:
    """The handler of a built-in or extension method, and the capability it needs."""
    return BUILTIN_METHODS.get(method) or EXTENSION_METHODS.get(method)


def declares(capabilities: dict, path: str) -> bool:
    """Whether ``capabilities`` declares ``path`` (``"resources.subscribe"`` needs a true flag)."""
    head, _, flag = path.partition(".")
    section = capabilities.get(head)
    if not isinstance(section, dict):
        return False
    return bool(section.get(flag)) if flag else True
