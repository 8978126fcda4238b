"""An authentication class of the MCP endpoint for the access tokens this server issues.

    MCP_SERVER = {"AUTHENTICATION_CLASSES": [
        "mcp_server.authorization_server.authentication.LocalTokenAuthentication"]}

The tokens are opaque: the class looks their SHA-256 up in the database (all the toolkit keeps of
them) and accepts one that exists (revoked ones are deleted), has not expired, and whose audience
(the RFC 8707 resource it was issued for) is this endpoint.

A token with no user of a dynamically registered client is counted, for the endpoint's fair
share of sessions, with the tokens of every client registered from the same address
(``Principal.fair_share``): anyone may register as often as the registration limit allows, so a
share per client would be a new share per registration. The registering address, rather than one
share for all such clients, keeps one registrant from crowding out the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ObjectDoesNotExist
from oauth2_provider.models import get_access_token_model
from oauth2_provider.settings import oauth2_settings

from ..auth.base import AuthenticationFailed, BaseAuthentication, Principal
from ..auth.resource_uri import canonical, request_uri
from ..settings import mcp_settings
from .tokens import digest

if TYPE_CHECKING:
    from ..http.request import Request

def endpoint_resource(request: Request) -> str:
    """This endpoint's canonical URI: the configured RESOURCE, else where the request came to."""
    return canonical(mcp_settings.AUTHORIZATION_SERVER["RESOURCE"] or request_uri(request))


class LocalTokenAuthentication(BaseAuthentication):
    """Bearer access tokens of this site's authorization server (mcp_server.authorization_server)."""

    def authenticate(self, request: Request) -> Principal | None:
        value = request.header("authorization")
        if not value:
            return None
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = token.strip()
        if not token:
            raise AuthenticationFailed("invalid_request", "The Bearer credential is empty")
        access_token = (get_access_token_model().objects
                        .select_related("user", "application", "application__mcp_registration")
                        .filter(token_checksum=digest(token)).first())
        if access_token is None or access_token.is_expired():
            raise AuthenticationFailed()
        scopes = frozenset(access_token.scope.split())
        # A registration access token (RFC 7592) manages a registration and is not for MCP.
        if oauth2_settings.DCR_REGISTRATION_SCOPE in scopes:
            raise AuthenticationFailed()
        user = access_token.user
        if user is not None and not user.is_active:
            raise AuthenticationFailed()
        audience = [canonical(uri) for uri in access_token.resource or []]
        if endpoint_resource(request) not in audience:
            raise AuthenticationFailed()
        application = access_token.application
        return Principal(
            user=user, scopes=scopes,
            client_id=application.client_id if application is not None else None,
            expires_at=access_token.expires.timestamp(),
            claims={"aud": list(access_token.resource), "scope": access_token.scope},
            method="local_token", fair_share=fair_share(application) if user is None else None,
        )

    def authenticate_header(self, request: Request) -> str | None:
        return "Bearer"


def fair_share(application: Any) -> str | None:
    """The group a token with no user of ``application`` is counted in: the address its client
    was registered from, for a dynamically registered client; None (its own) for the others."""
    if application is None or application.registration_source != application.RegistrationSource.DCR:
        return None
    try:
        address = application.mcp_registration.address
    except ObjectDoesNotExist:  # registered before addresses were kept: one group for all of those
        address = "unknown"
    return f"registered-from:{address}"
