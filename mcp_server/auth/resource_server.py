"""The endpoint as an OAuth 2.1 resource server: who sent a request, and the Bearer challenges.

A :class:`ResourceServer` runs the classes of ``AUTHENTICATION_CLASSES`` in order (the first
principal found wins), then applies the policy: a request with no credential is refused when
``AUTHENTICATION_REQUIRED`` (401 with ``resource_metadata`` and ``scope``), a bad credential always
is (401 ``invalid_token``), and one lacking ``REQUIRED_SCOPES`` gets 403 ``insufficient_scope``
(RFC 6750, RFC 9728 and the MCP authorization spec). With the default settings the endpoint
builds none (:func:`from_settings` returns None) and a request pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from mcp_protocol.errors import INTERNAL_ERROR, INVALID_REQUEST

from ..http.errors import HTTPError
from ..invoke import call_user_code
from ..primitives.base import check_scope
from ..telemetry import metrics
from .base import AuthenticationFailed, AuthenticationUnavailable, BaseAuthentication, Principal
from .resource_uri import request_uri

if TYPE_CHECKING:
    from ..http.request import Request

DEFAULT_CLASSES = ["mcp_server.auth.SessionAuthentication"]
WELL_KNOWN = "/.well-known/oauth-protected-resource"
# The body of a refusal says this much and no more; the challenge header carries the details a
# client needs (never which check a token failed).
MESSAGES = {401: "Unauthorized", 400: "Bad Request: invalid authorization request",
            403: "Forbidden: insufficient scope"}


class ResourceServer:
    def __init__(self, authenticators: Iterable[BaseAuthentication], *, required: bool = False,
                 resource: str | None = None, authorization_servers: Iterable[str] = (),
                 scopes_supported: Iterable[str] = (), required_scopes: Iterable[str] = (),
                 resource_name: str | None = None):
        self.authenticators = list(authenticators)
        self.required = required
        self.resource = resource
        self.authorization_servers = list(authorization_servers)
        self.scopes_supported = list(scopes_supported)
        self.required_scopes = frozenset(required_scopes)
        self.resource_name = resource_name
        for scope in (*self.scopes_supported, *self.required_scopes):
            check_scope(scope, "RESOURCE_SERVER scopes")

    @classmethod
    def from_settings(cls, *, always: bool = False) -> ResourceServer | None:
        """The resource server of ``MCP_SERVER``; None when the settings keep the endpoint as it is
        without one (the session cookie alone, nothing required), unless ``always``."""
        from ..settings import mcp_settings

        names = mcp_settings.AUTHENTICATION_CLASSES
        options = mcp_settings.RESOURCE_SERVER
        if not isinstance(names, list | tuple) or not all(isinstance(name, str) for name in names):
            raise ImproperlyConfigured("MCP_SERVER['AUTHENTICATION_CLASSES'] must be a list of dotted paths")
        default = list(names) == DEFAULT_CLASSES and not mcp_settings.AUTHENTICATION_REQUIRED \
            and not options["REQUIRED_SCOPES"]
        if default and not always:
            return None
        return cls([authentication_class(name) for name in names],
                   required=bool(mcp_settings.AUTHENTICATION_REQUIRED), resource=options["RESOURCE"],
                   authorization_servers=options["AUTHORIZATION_SERVERS"],
                   scopes_supported=options["SCOPES_SUPPORTED"],
                   required_scopes=options["REQUIRED_SCOPES"], resource_name=options["RESOURCE_NAME"])

    # Authentication --------------------------------------------------------------------------
    async def authenticate(self, request: Request) -> Principal | None:
        """The request's principal (None: anonymous, allowed); raises :class:`HTTPError`."""
        if b"access_token=" in request.scope.get("query_string", b""):
            # RFC 6750 2.3 is not supported, and the MCP spec forbids it: a token in a URL leaks.
            metrics.auth_failed("invalid_request")
            raise self.refusal(request, 400, "invalid_request",
                               "Access tokens are accepted in the Authorization header only")
        principal = None
        for authenticator in self.authenticators:
            try:
                # A plain def runs on a worker thread (ORM queries work); async def is awaited.
                principal = await call_user_code(authenticator.authenticate, request)
            except AuthenticationFailed as failed:
                metrics.auth_failed(failed.error or "invalid_token")
                status = 403 if failed.error == "insufficient_scope" else \
                    400 if failed.error == "invalid_request" else 401
                raise self.refusal(request, status, failed.error, failed.description,
                                   failed.scopes) from None
            except AuthenticationUnavailable:
                metrics.auth_failed("unavailable")
                raise HTTPError(503, "Service Unavailable: the credential cannot be checked now; try "
                                "again later", code=INTERNAL_ERROR,
                                headers=[(b"retry-after", b"5")]) from None
            if principal is not None:
                break
        if principal is None:
            if self.required:
                metrics.auth_failed("missing_credential")
                raise self.refusal(request, 401, scopes=self.required_scopes or self.scopes_supported)
            return None
        if self.required_scopes and not principal.has_scopes(self.required_scopes):
            metrics.auth_failed("insufficient_scope")
            raise self.insufficient_scope(request, self.required_scopes)
        return principal

    # Challenges ------------------------------------------------------------------------------
    def refusal(self, request: Request, status: int, error: str | None = None,
                description: str | None = None, scopes: Iterable[str] | None = None) -> HTTPError:
        challenge = www_authenticate(self.metadata_url(request), error, description, scopes)
        headers = [(b"www-authenticate", challenge.encode("latin-1"))]
        if status == 401 and error is None:
            # No credential: every class may ask for its own kind (DRF's "Token", "Basic realm=").
            headers += [(b"www-authenticate", other.encode("latin-1"))
                        for other in self._other_schemes(request)]
        return HTTPError(status, MESSAGES.get(status, "Unauthorized"), code=INVALID_REQUEST, headers=headers)

    def _other_schemes(self, request: Request) -> list[str]:
        schemes = []
        for authenticator in self.authenticators:
            scheme = authenticator.authenticate_header(request)
            if scheme and not scheme.lower().startswith("bearer") and scheme not in schemes:
                schemes.append(scheme)
        return schemes

    def insufficient_scope(self, request: Request, scopes: Iterable[str]) -> HTTPError:
        """403 asking for ``scopes`` (step-up: the client asks its authorization server for them)."""
        return self.refusal(request, 403, "insufficient_scope",
                            "The access token lacks a scope this request needs", scopes)

    # Protected Resource Metadata (RFC 9728) ---------------------------------------------------
    def resource_of(self, request: Request) -> str:
        """The canonical URI of the endpoint: the setting, else this request's origin and path."""
        return self.resource or request_uri(request)

    def metadata_url(self, request: Request) -> str:
        return metadata_url_of(self.resource_of(request))

    def metadata(self, resource: str) -> dict[str, Any]:
        document: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": list(self.authorization_servers),
            "scopes_supported": list(self.scopes_supported),
            "bearer_methods_supported": ["header"],
        }
        if self.resource_name:
            document["resource_name"] = self.resource_name
        return document


def metadata_url_of(resource: str) -> str:
    """RFC 9728 3.1: the well-known path inserted between the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def www_authenticate(metadata_url: str, error: str | None = None, description: str | None = None,
                     scopes: Iterable[str] | None = None) -> str:
    """A ``Bearer`` challenge: ``resource_metadata`` first when there is no error (the spec's
    example), after the error and its scope otherwise."""
    scope = " ".join(sorted(scopes)) if scopes else None
    parts: list[tuple[str, str | None]] = [("error", error), ("error_description", description)]
    if error is None:
        parts += [("resource_metadata", metadata_url), ("scope", scope)]
    else:
        parts += [("scope", scope), ("resource_metadata", metadata_url)]
    return "Bearer " + ", ".join(f'{name}="{_quoted(value)}"' for name, value in parts if value)


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def authentication_class(path: str) -> BaseAuthentication:
    """An instance of the class at ``path``: ours, or a DRF class wrapped as it is."""
    try:
        cls = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"MCP_SERVER['AUTHENTICATION_CLASSES'] names {path!r}, which cannot be "
                                   f"imported: {exc}") from exc
    if isinstance(cls, type) and issubclass(cls, BaseAuthentication):
        return cls()
    try:
        from rest_framework.authentication import BaseAuthentication as DRFBase
    except ImportError:  # pragma: no cover - DRF is a dependency
        DRFBase = None
    if DRFBase is not None and isinstance(cls, type) and issubclass(cls, DRFBase):
        from .drf import DRFAuthentication

        return DRFAuthentication(cls)
    raise ImproperlyConfigured(f"MCP_SERVER['AUTHENTICATION_CLASSES'] names {path!r}, which is neither a "
                               "mcp_server.auth.BaseAuthentication nor a DRF authentication class")
