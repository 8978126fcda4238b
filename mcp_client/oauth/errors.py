"""What can go wrong in the OAuth flow, each as its own exception class."""

from __future__ import annotations

from ..errors import ClientError


class OAuthError(ClientError):
    """Base class of the OAuth client's errors."""


class InsecureURL(OAuthError):
    """A URL is neither https nor loopback, points into a refused address range, or changed."""


class InsecureRedirectURI(OAuthError, ValueError):
    """The redirect URI is neither https nor loopback."""


class UnregisteredRedirectURI(OAuthError, ValueError):
    """The redirect URI is not one of ``client_metadata["redirect_uris"]``."""


class InvalidClientIDMetadataDocumentURL(OAuthError, ValueError):
    """A ``client_id_metadata_document_url`` that a client id may not be."""


class InvalidCredentials(OAuthError, ValueError):
    """Client credentials that cannot work: missing, contradictory, or an unsupported method."""


class DiscoveryError(OAuthError):
    """Protected resource or authorization server metadata missing, unreadable or not matching."""


class AuthorizationError(OAuthError):
    """The authorization step failed: no code, a state or issuer that does not match."""


class TokenError(OAuthError):
    """The token endpoint refused (``error`` holds the OAuth error code) or answered nonsense."""

    def __init__(self, message: str, error: str | None = None, status: int | None = None):
        super().__init__(message)
        self.error = error
        self.status = status


class RegistrationError(OAuthError):
    """Dynamic client registration failed, or the client cannot be registered."""
