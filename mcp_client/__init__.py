"""The MCP client: ``Client`` (blocking) and ``AsyncClient`` over stdio or Streamable HTTP.

    from mcp_client import Client, StdioTransport

    with Client("python manage.py mcp_stdio") as client:      # or Client("http://127.0.0.1:8000/mcp")
        print(client.call_tool("echo", {"message": "hi"}).text)

It needs no Django. OAuth 2.1 (``HTTPTransport(url, oauth=Provider(...))``) is in ``mcp_client.oauth``.
"""

from mcp_protocol.cancellation import Cancellation, CancelledError

from .async_client import AsyncClient
from .client import Client
from .elicitation import apply_defaults
from .errors import (
    AlreadyConnectedError,
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
from .input_required import COMPLETE, INPUT_REQUIRED, InputRequiredError
from .skills import Skill, SkillFileEntry
from .subscriptions import ListenError
from .transports.http import HTTPTransport
from .transports.stdio import StdioTransport
from .types import CallToolResult, DiscoverResult, Page, Prompt, Resource, ResourceTemplate, Tool

__all__ = [
    "COMPLETE",
    "INPUT_REQUIRED",
    "AlreadyConnectedError",
    "AsyncClient",
    "AuthorizationError",
    "BadRequestError",
    "CallToolResult",
    "Cancellation",
    "CancelledError",
    "Client",
    "ClientCredentialsProvider",
    "ClientError",
    "ConnectionClosedError",
    "CrossAppAccessProvider",
    "DiscoverResult",
    "DiscoveryError",
    "FileTokenStorage",
    "ForbiddenError",
    "HTTPTransport",
    "IDJAGTokenExchange",
    "InMemoryTokenStorage",
    "InputRequiredError",
    "InsecureRedirectURI",
    "InsecureURL",
    "InvalidClientIDMetadataDocumentURL",
    "InvalidCredentials",
    "ListenError",
    "NotConnectedError",
    "NotFoundError",
    "OAuthError",
    "Page",
    "PaginationLimitError",
    "Prompt",
    "Provider",
    "RegistrationError",
    "Resource",
    "ResourceTemplate",
    "ServerError",
    "ServerRequestError",
    "SessionExpiredError",
    "Skill",
    "SkillFileEntry",
    "StdioTransport",
    "TokenError",
    "TokenStorage",
    "Tool",
    "TransportError",
    "UnauthorizedError",
    "UnregisteredRedirectURI",
    "ValidationError",
    "WorkloadIdentityProvider",
    "apply_defaults",
]

# The OAuth providers need httpx, which a stdio-only client may not have: imported when first named.
_OAUTH = frozenset({
    "AuthorizationError",
    "ClientCredentialsProvider",
    "CrossAppAccessProvider",
    "DiscoveryError",
    "FileTokenStorage",
    "IDJAGTokenExchange",
    "InMemoryTokenStorage",
    "InsecureRedirectURI",
    "InsecureURL",
    "InvalidClientIDMetadataDocumentURL",
    "InvalidCredentials",
    "OAuthError",
    "Provider",
    "RegistrationError",
    "TokenError",
    "TokenStorage",
    "UnregisteredRedirectURI",
    "WorkloadIdentityProvider",
})


def __getattr__(name: str) -> object:
    if name in _OAUTH:
        from . import oauth

        return getattr(oauth, name)
    raise AttributeError(f"module 'mcp_client' has no attribute {name!r}")
