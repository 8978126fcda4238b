"""The authorization server's pages and endpoints, on the toolkit's views."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from oauth2_provider import views as dot
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from ..settings import mcp_settings
from .checks import CONSENT_TEMPLATE
from .redirect_uris import is_loopback_host, problems

# Grant types a client may register: OAuth 2.1 has no implicit or password grant.
REGISTRABLE_GRANT_TYPES = {"authorization_code", "refresh_token", "client_credentials"}
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
WELL_KNOWN = "/.well-known/oauth-authorization-server"


def issuer(request: HttpRequest) -> str:
    configured = mcp_settings.AUTHORIZATION_SERVER["ISSUER"]
    return configured.rstrip("/") if configured else request.build_absolute_uri("/").rstrip("/")


class ServerMetadataView(dot.OAuthServerMetadataView):
    """RFC 8414 metadata, at the one URL RFC 8414 gives the issuer: ``/.well-known/oauth-
    authorization-server`` followed by the issuer's path, if it has one."""

    def get(self, request: HttpRequest, *args: Any, issuer_path: str = "", **kwargs: Any) -> HttpResponse:
        expected = urlsplit(issuer(request)).path.strip("/")
        if issuer_path.strip("/") != expected:
            raise Http404("No authorization server has this issuer path")
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["issuer"] = issuer(request)
        data["code_challenge_methods_supported"] = ["S256"]
        data["client_id_metadata_document_supported"] = bool(oauth2_settings.CIMD_ENABLED)
        data.pop("introspection_endpoint_auth_methods_supported", None)
        answer = JsonResponse(data)
        answer["Access-Control-Allow-Origin"] = "*"
        return answer


def with_issuer(uri: str, iss: str) -> str:
    """``uri`` with exactly one ``iss`` parameter (RFC 9207), on errors as on success."""
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "iss"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("iss", iss)])))


class AuthorizationView(dot.AuthorizationView):
    """The consent page: a logged-in user approves or denies a client's request."""

    template_name = CONSENT_TEMPLATE

    def get_login_url(self) -> str:
        return mcp_settings.AUTHORIZATION_SERVER["LOGIN_URL"] or settings.LOGIN_URL

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        return super().redirect(with_issuer(redirect_to, issuer(self.request)), application)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        redirect_uri = context.get("redirect_uri") or ""
        host = urlsplit(redirect_uri).hostname or ""
        context["redirect_host"] = host
        # The spec asks for a warning: a loopback redirect URI can be claimed by any local program.
        context["loopback_redirect"] = bool(host) and is_loopback_host(host)
        scopes, descriptions = context.get("scopes") or [], context.get("scopes_descriptions") or []
        context["scope_items"] = list(zip(scopes, descriptions, strict=False))
        context["resource_list"] = (context.get("resource") or "").split()
        return context


def _error(error: str, description: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=400)


def check_registration(body: bytes) -> JsonResponse | None:
    """What the toolkit's registration does not check for MCP: redirect URIs (https, or http on
    loopback; no fragment), grant types OAuth 2.1 keeps, and auth methods that fit them."""
    try:
        data = json.loads(body)
    except ValueError:
        return None  # the toolkit answers it
    if not isinstance(data, dict):
        return None
    grant_types = data.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
        return _error("invalid_client_metadata", "grant_types must be an array of strings")
    unknown = sorted(set(grant_types) - REGISTRABLE_GRANT_TYPES)
    if unknown:
        return _error("invalid_client_metadata",
                      f"unsupported grant_types {unknown}: use authorization_code (with refresh_token) "
                      "or client_credentials")
    method = data.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        return _error("invalid_client_metadata",
                      f"unsupported token_endpoint_auth_method {method!r}: "
                      f"use one of {', '.join(AUTH_METHODS)}")
    if "client_credentials" in grant_types and method == "none":
        return _error("invalid_client_metadata",
                      "client_credentials needs a confidential client: token_endpoint_auth_method "
                      "client_secret_basic or client_secret_post")
    # A client_credentials client needs none, but any it names must still be valid ones.
    if "authorization_code" in grant_types or data.get("redirect_uris"):
        reasons = problems(data.get("redirect_uris"))
        if reasons:
            return _error("invalid_redirect_uri", "; ".join(reasons))
    return None


def _issued_secret_expiry(response: HttpResponse) -> HttpResponse:
    """RFC 7591 section 3.2.1: client_secret_expires_at comes with every issued secret (0: never)."""
    if response.status_code in (200, 201) and response.get("content-type", "").startswith("application/json"):
        data = json.loads(response.content)
        if "client_secret" in data:
            data["client_secret_expires_at"] = 0
            return JsonResponse(data, status=response.status_code)
    return response


class RegistrationView(DynamicClientRegistrationView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = check_registration(request.body)
        return refused or _issued_secret_expiry(super().post(request, *args, **kwargs))


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = check_registration(request.body)
        return refused or super().put(request, client_id, *args, **kwargs)


class TokenView(dot.TokenView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().post(request, *args, **kwargs)
        # Some errors raised while tokens are saved (invalid_target, say) come back from oauthlib
        # without their JSON media type; RFC 6749 section 5.2 answers every error as JSON.
        if not response.get("content-type", "").startswith("application/json"):
            response["Content-Type"] = "application/json"
            response["Cache-Control"] = "no-store"
        return response


class RevokeTokenView(dot.RevokeTokenView):
    pass


def forget_servers() -> None:
    """Drop the oauthlib servers the views built, so they are rebuilt with the current settings."""
    for view in (AuthorizationView, TokenView, RevokeTokenView):
        if "_oauthlib_core" in view.__dict__:
            delattr(view, "_oauthlib_core")
