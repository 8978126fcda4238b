"""The MCP client: ``Client`` (blocking) and ``AsyncClient`` over stdio or Streamable HTTP.

    from mcp_client import Client, StdioTransport

    with Client(StdioTransport("python", ["manage.py", "mcp_stdio"])) as client:
        print(client.call_tool("echo", {"message": "hi"}).text)

It needs no Django.
"""

from mcp_protocol.cancellation import Cancellation, CancelledError

from .async_client import AsyncClient
from .client import Client
from .elicitation import apply_defaults
from .errors import (
    BadRequestError,
    ClientError,
    ConnectionClosedError,
    ForbiddenError,
    NotConnectedError,
    NotFoundError,
    PaginationLimitError,
    ServerError,
    ServerRequestError,
    SessionExpiredError,
    TransportError,
    UnauthorizedError,
    ValidationError,
)
from .transports.http import HTTPTransport
from .transports.stdio import StdioTransport
from .types import CallToolResult, Page, Prompt, Resource, ResourceTemplate, Tool

__all__ = [
    "AsyncClient",
    "BadRequestError",
    "CallToolResult",
    "Cancellation",
    "CancelledError",
    "Client",
    "ClientError",
    "ConnectionClosedError",
    "ForbiddenError",
    "HTTPTransport",
    "NotConnectedError",
    "NotFoundError",
    "Page",
    "PaginationLimitError",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "ServerError",
    "ServerRequestError",
    "SessionExpiredError",
    "StdioTransport",
    "Tool",
    "TransportError",
    "UnauthorizedError",
    "ValidationError",
    "apply_defaults",
]
