"""The MCP server as a Django app: add ``mcp_server`` to ``INSTALLED_APPS``.

Declare tools, prompts and resources in any installed app's ``mcp.py``; they reach the default
server (:func:`get_server`), which the stdio command and the HTTP endpoint serve.

Each public name is loaded when first used (PEP 562), so that what imports the package without
using it (Django reading ``INSTALLED_APPS``, a settings module, a management command) loads
nothing more.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the module defining it ("Content" is the module mcp_protocol.content itself).
_EXPORTS = {
    "Apps": "mcp_server.extensions.mcp_apps",
    "AskDeclinedError": "mcp_server.asks",
    "Audio": "mcp_protocol.content",
    "BlobContents": "mcp_protocol.content",
    "Cancellation": "mcp_protocol.cancellation",
    "CancelledError": "mcp_protocol.cancellation",
    "Capabilities": "mcp_server.capabilities",
    "Configuration": "mcp_server.configuration",
    "ConfigurationError": "mcp_server.configuration",
    "Content": "mcp_protocol.content",
    "Elicit": "mcp_server.asks",
    "ElicitURL": "mcp_server.asks",
    "ElicitationResult": "mcp_server.asks",
    "EmbeddedResource": "mcp_protocol.content",
    "Image": "mcp_protocol.content",
    "InputRequiredResult": "mcp_server.input_required",
    "InputSchema": "mcp_server.primitives",
    "ListRoots": "mcp_server.asks",
    "MCPError": "mcp_protocol.errors",
    "MethodAlreadyDefinedError": "mcp_server.errors",
    "OutputSchema": "mcp_server.primitives",
    "Prompt": "mcp_server.primitives",
    "PromptArgument": "mcp_server.primitives",
    "PromptMessage": "mcp_server.primitives",
    "PromptResult": "mcp_server.primitives",
    "RequestStateSecurity": "mcp_server.request_state",
    "RequestTimeoutError": "mcp_protocol.errors",
    "Resolve": "mcp_server.asks",
    "Resource": "mcp_server.primitives",
    "ResourceLink": "mcp_protocol.content",
    "ResourceNotFoundError": "mcp_server.errors",
    "ResourceTemplate": "mcp_server.primitives",
    "Sample": "mcp_server.asks",
    "SchemaValidationError": "mcp_server.errors",
    "Server": "mcp_server.server",
    "ServerContext": "mcp_server.context",
    "ServerSession": "mcp_server.session",
    "StdioTransport": "mcp_server.transports.stdio",
    "Text": "mcp_protocol.content",
    "TextContents": "mcp_protocol.content",
    "Tool": "mcp_server.primitives",
    "ToolResponse": "mcp_server.primitives",
    "URLElicitationRequiredError": "mcp_protocol.errors",
    "ValidationError": "mcp_server.errors",
    "configure": "mcp_server.configuration",
    "curate": "mcp_server.primitives.curated",
    "get_server": "mcp_server.site",
    "prompt": "mcp_server.site",
    "register": "mcp_server.site",
    "resource": "mcp_server.site",
    "resource_template": "mcp_server.site",
    "tool": "mcp_server.site",
}

__all__ = [
    "Apps", "AskDeclinedError", "Audio", "BlobContents", "Cancellation", "CancelledError",
    "Capabilities", "Configuration", "ConfigurationError", "Content", "Elicit", "ElicitURL",
    "ElicitationResult", "EmbeddedResource", "Image", "InputRequiredResult", "InputSchema", "ListRoots",
    "MCPError", "MethodAlreadyDefinedError", "OutputSchema", "Prompt", "PromptArgument",
    "PromptMessage", "PromptResult", "RequestStateSecurity", "RequestTimeoutError", "Resolve",
    "Resource", "ResourceLink", "ResourceNotFoundError", "ResourceTemplate", "Sample",
    "SchemaValidationError", "Server", "ServerContext", "ServerSession", "StdioTransport", "Text",
    "TextContents", "Tool", "ToolResponse", "URLElicitationRequiredError", "ValidationError",
    "configure", "curate", "get_server", "prompt", "register", "resource", "resource_template", "tool",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name == "Content" else getattr(module, name)
    globals()[name] = value  # the next use finds it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from mcp_protocol import content as Content
    from mcp_protocol.cancellation import Cancellation, CancelledError
    from mcp_protocol.content import (
        Audio,
        BlobContents,
        EmbeddedResource,
        Image,
        ResourceLink,
        Text,
        TextContents,
    )
    from mcp_protocol.errors import MCPError, RequestTimeoutError, URLElicitationRequiredError

    from .asks import (
        AskDeclinedError,
        Elicit,
        ElicitationResult,
        ElicitURL,
        ListRoots,
        Resolve,
        Sample,
    )
    from .capabilities import Capabilities
    from .configuration import Configuration, ConfigurationError, configure
    from .context import ServerContext
    from .errors import (
        MethodAlreadyDefinedError,
        ResourceNotFoundError,
        SchemaValidationError,
        ValidationError,
    )
    from .extensions.mcp_apps import Apps
    from .input_required import InputRequiredResult
    from .primitives import (
        InputSchema,
        OutputSchema,
        Prompt,
        PromptArgument,
        PromptMessage,
        PromptResult,
        Resource,
        ResourceTemplate,
        Tool,
        ToolResponse,
    )
    from .request_state import RequestStateSecurity
    from .server import Server
    from .session import ServerSession
    from .site import get_server, prompt, register, resource, resource_template, tool
    from .transports.stdio import StdioTransport
