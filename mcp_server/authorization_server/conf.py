"""django-oauth-toolkit's settings, derived from ``MCP_SERVER["AUTHORIZATION_SERVER"]``.

The toolkit reads ``OAUTH2_PROVIDER``; this module hands it the values an MCP authorization server
needs (OAuth 2.1: PKCE S256 required, refresh tokens rotated with reuse detection, no implicit or
password grant, tokens stored hashed, ``iss`` on authorization responses), overlaid with whatever
the project's own ``OAUTH2_PROVIDER`` sets.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from ..settings import mcp_settings

PACKAGE = "mcp_server.authorization_server"


def derived() -> dict[str, Any]:
    """The ``OAUTH2_PROVIDER`` dict that ``MCP_SERVER["AUTHORIZATION_SERVER"]`` stands for."""
    conf = mcp_settings.AUTHORIZATION_SERVER
    cache_timeout = int(conf["CIMD_CACHE_TIMEOUT"])
    return {
        "SCOPES": dict(conf["SCOPES"]),
        "DEFAULT_SCOPES": list(conf["DEFAULT_SCOPES"]),
        "ACCESS_TOKEN_EXPIRE_SECONDS": conf["ACCESS_TOKEN_LIFETIME"],
        "REFRESH_TOKEN_EXPIRE_SECONDS": conf["REFRESH_TOKEN_LIFETIME"],
        "AUTHORIZATION_CODE_EXPIRE_SECONDS": conf["AUTHORIZATION_CODE_LIFETIME"],
        "OIDC_ISS_ENDPOINT": conf["ISSUER"] or "",
        "PKCE_REQUIRED": True,
        "ROTATE_REFRESH_TOKEN": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
        # Every RFC 9700 gate enforced: plain PKCE, implicit and password grants refused, tokens
        # stored as checksums only, `iss` on authorization responses, no token in a query string.
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
        # http redirect URIs stay allowed, for loopback only (redirect_uris.problem refuses the
        # rest, RFC 8252): the toolkit's deploy check warns (W) about it instead of failing (E).
        "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": False,
        "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
        "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
        # http stays allowed for loopback redirect URIs (RFC 8252); redirect_uris.problem refuses it
        # for every other host.
        "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
        "REQUEST_APPROVAL_PROMPT": "force",
        "OAUTH2_SERVER_CLASS": f"{PACKAGE}.oauth.Server",
        "OAUTH2_VALIDATOR_CLASS": f"{PACKAGE}.oauth.Validator",
        "OAUTH2_BACKEND_CLASS": f"{PACKAGE}.oauth.Backend",
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
        "DCR_ENABLED": bool(conf["DYNAMIC_CLIENT_REGISTRATION"]),
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        "CIMD_ENABLED": bool(conf["CLIENT_ID_METADATA_DOCUMENTS"]),
        "CIMD_METADATA_FETCHER": f"{PACKAGE}.cimd.MetadataFetcher",
        "CIMD_FETCH_TIMEOUT_SECONDS": conf["CIMD_FETCH_TIMEOUT"],
        "CIMD_MAX_DOCUMENT_SIZE": conf["CIMD_MAX_DOCUMENT_BYTES"],
        "CIMD_METADATA_MIN_AGE_SECONDS": min(60, cache_timeout),
        "CIMD_METADATA_MAX_AGE_SECONDS": cache_timeout,
    }


def apply() -> None:
    """Hand the toolkit the derived settings under the project's own ``OAUTH2_PROVIDER``."""
    from oauth2_provider.settings import oauth2_settings

    oauth2_settings.reload()
    oauth2_settings._user_settings = {**derived(), **(getattr(settings, "OAUTH2_PROVIDER", None) or {})}
    # Each view class keeps the oauthlib server it built (with the lifetimes of its time).
    from . import views

    views.forget_servers()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    # After the toolkit's own receiver (connected first), which re-reads OAUTH2_PROVIDER alone.
    if setting in ("MCP_SERVER", "OAUTH2_PROVIDER"):
        apply()


def connect() -> None:
    setting_changed.connect(_on_setting_changed, dispatch_uid=f"{PACKAGE}.conf")
