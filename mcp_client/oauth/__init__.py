"""OAuth 2.1 for the MCP client: providers that ``HTTPTransport(url, oauth=provider)`` runs as an
``httpx.Auth`` flow.

    provider = Provider(client_metadata={"redirect_uris": ["http://127.0.0.1:8765/callback"]},
                        redirect_handler=open_browser, callback_handler=wait_for_redirect)
    client = AsyncClient(HTTPTransport("https://mcp.example.com/mcp", oauth=provider))
"""

from .challenge import Challenge, parse_www_authenticate
from .client_credentials import ClientCredentialsProvider
from .cross_app import CrossAppAccessProvider, IDJAGTokenExchange
from .discovery import Discovery, metadata_urls, prm_urls, select_scope
from .errors import (
    AuthorizationError,
    DiscoveryError,
    InsecureRedirectURI,
    InsecureURL,
    InvalidClientIDMetadataDocumentURL,
    InvalidCredentials,
    OAuthError,
    RegistrationError,
    TokenError,
    UnregisteredRedirectURI,
)
from .file_storage import FileTokenStorage
from .flow import OAuthFlow
from .provider import Provider
from .storage import InMemoryTokenStorage, TokenStorage
from .urls import canonical_resource
from .workload import WorkloadIdentityProvider

__all__ = [
    "AuthorizationError",
    "Challenge",
    "ClientCredentialsProvider",
    "CrossAppAccessProvider",
    "Discovery",
    "DiscoveryError",
    "FileTokenStorage",
    "IDJAGTokenExchange",
    "InMemoryTokenStorage",
    "InsecureRedirectURI",
    "InsecureURL",
    "InvalidClientIDMetadataDocumentURL",
    "InvalidCredentials",
    "OAuthError",
    "OAuthFlow",
    "Provider",
    "RegistrationError",
    "TokenError",
    "TokenStorage",
    "UnregisteredRedirectURI",
    "WorkloadIdentityProvider",
    "canonical_resource",
    "metadata_urls",
    "parse_www_authenticate",
    "prm_urls",
    "select_scope",
]
