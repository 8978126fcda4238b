"""The method table: JSON-RPC method name to handler, the same for every transport."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp_protocol import methods

from ..modern.discover import discover
from . import completion, lifecycle, prompts, resources, tasks, tools

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
    # The Tasks extension: each checks that the server and the request declare it.
    "tasks/get": (tasks.get_task, None),
    "tasks/update": (tasks.update_task, None),
    "tasks/cancel": (tasks.cancel_task, None),
}


def declares(capabilities: dict, path: str) -> bool:
    """Whether ``capabilities`` declares ``path`` (``"resources.subscribe"`` needs a true flag)."""
    head, _, flag = path.partition(".")
    section = capabilities.get(head)
    if not isinstance(section, dict):
        return False
    return bool(section.get(flag)) if flag else True
