"""The MCP server as a Django app: add ``mcp_server`` to ``INSTALLED_APPS``.

Declare tools, prompts and resources in any installed app's ``mcp.py``; they reach the default
server (:func:`get_server`), which the stdio command and the HTTP endpoint serve.
"""

from mcp_protocol import Cancellation, CancelledError, MCPError, RequestTimeoutError
from mcp_protocol import content as Content
from mcp_protocol.content import (
    Audio,
    BlobContents,
    EmbeddedResource,
    Image,
    ResourceLink,
    Text,
    TextContents,
)
from mcp_protocol.errors import URLElicitationRequiredError

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

__all__ = [
    "Apps",
    "Audio",
    "BlobContents",
    "Cancellation",
    "CancelledError",
    "Capabilities",
    "Configuration",
    "ConfigurationError",
    "Content",
    "EmbeddedResource",
    "Image",
    "InputRequiredResult",
    "InputSchema",
    "MCPError",
    "MethodAlreadyDefinedError",
    "OutputSchema",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptResult",
    "RequestStateSecurity",
    "RequestTimeoutError",
    "Resource",
    "ResourceLink",
    "ResourceNotFoundError",
    "ResourceTemplate",
    "SchemaValidationError",
    "Server",
    "ServerContext",
    "ServerSession",
    "StdioTransport",
    "Text",
    "TextContents",
    "Tool",
    "ToolResponse",
    "URLElicitationRequiredError",
    "ValidationError",
    "configure",
    "get_server",
    "prompt",
    "register",
    "resource",
    "resource_template",
    "tool",
]
