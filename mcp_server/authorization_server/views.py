"""The authorization server's pages and endpoints, on the toolkit's views."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from oauth2_provider import views as dot
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from ..settings import mcp_settings
from ..telemetry import metrics
from .checks import CONSENT_TEMPLATE
from .client_authentication import client_secret_throttle, presented_client_id
from .redirect_uris import is_loopback_host
from .registration import check_registration, too_many_registrations
from .throttle import client_address

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


def effective_approval_prompt(asked: str) -> str:
    """The consent rule for a request asking ``asked``: "auto" (scopes the user approved, with a
    live token, skip the page) only when both the server and the request say so, else "force"."""
    return "auto" if oauth2_settings.REQUEST_APPROVAL_PROMPT == asked == "auto" else "force"


class AuthorizationView(dot.AuthorizationView):
    """The consent page: a logged-in user approves or denies a client's request."""

    template_name = CONSENT_TEMPLATE

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # The toolkit lets the request's approval_prompt override REQUEST_APPROVAL_PROMPT: with
        # "auto", a client the user approved once would skip the consent page (and get a code at
        # any loopback port). The server's "force" wins; a client may only ask for more consent.
        asked = request.GET.get("approval_prompt")
        if asked is not None:
            request.GET = request.GET.copy()
            request.GET["approval_prompt"] = effective_approval_prompt(asked)
        return super().get(request, *args, **kwargs)

    def get_login_url(self) -> str:
        return mcp_settings.AUTHORIZATION_SERVER["LOGIN_URL"] or reverse("oauth2_provider:login")

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
        refused = too_many_registrations(request) or check_registration(request)
        if refused is not None:
            return refused
        with transaction.atomic():
            response = super().post(request, *args, **kwargs)
            if response.status_code == 201:
                record_registration(json.loads(response.content)["client_id"], request)
        return _issued_secret_expiry(response)


def record_registration(client_id: str, request: HttpRequest) -> None:
    """Remember the address a client was registered from (its fair share on the endpoint)."""
    from .models import ClientRegistration

    application = get_application_model().objects.get(client_id=client_id)
    ClientRegistration.objects.create(application=application, address=client_address(request)[:64])


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = check_registration(request)
        return refused or super().put(request, client_id, *args, **kwargs)


class ClientSecretThrottled:
    """Wrong client secrets at this endpoint are counted per client id and client address
    (``CLIENT_SECRET_FAILURE_RATE``), and past the limit the client is refused (429) before its
    secret is checked, the right one included, until the period ends."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        client_id = presented_client_id(request)
        if client_id is None:
            return super().post(request, *args, **kwargs)
        throttle = client_secret_throttle()
        retry_after = throttle.blocked(client_id, client_address(request))
        if retry_after is not None:
            metrics.refused("client_secret_failure_rate", 429)
            answer = JsonResponse({"error": "invalid_client", "error_description":
                                   f"too many failed authentications of this client from this address; "
                                   f"try again in {retry_after} s"}, status=429)
            answer["Retry-After"] = str(retry_after)
            answer["Cache-Control"] = "no-store"
            return answer
        response = super().post(request, *args, **kwargs)
        if response.status_code == 401:  # invalid_client: the secret (or the client) was wrong
            throttle.record(client_id, client_address(request))
        return response


class TokenView(ClientSecretThrottled, dot.TokenView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().post(request, *args, **kwargs)
        # Some errors raised while tokens are saved (invalid_target, say) come back from oauthlib
        # without their JSON media type; RFC 6749 section 5.2 answers every error as JSON.
        if not response.get("content-type", "").startswith("application/json"):
            response["Content-Type"] = "application/json"
            response["Cache-Control"] = "no-store"
        return response


class RevokeTokenView(ClientSecretThrottled, dot.RevokeTokenView):
    pass


def forget_servers() -> None:
    """Drop the oauthlib servers the views built, so they are rebuilt with the current settings."""
    for view in (AuthorizationView, TokenView, RevokeTokenView):
        if "_oauthlib_core" in view.__dict__:
            delattr(view, "_oauthlib_core")
