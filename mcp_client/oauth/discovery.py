"""Finding the authorization server: protected resource metadata (RFC 9728), authorization server
metadata (RFC 8414 and OpenID Connect Discovery), and the 2025-03-26 fallback; scope selection."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .challenge import Challenge
from .errors import DiscoveryError, InsecureURL
from .http import OAuthHTTP, is_redirect, json_object
from .urls import canonical_resource, covers, origin, redact, require_public, require_secure

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "registration_endpoint")


@dataclass(frozen=True)
class Discovery:
    """What the flow learned about the server it authorizes for."""

    resource: str            # the ``resource`` parameter (RFC 8707): the PRM's, else the canonical URL
    issuer: str              # the authorization server (its metadata's issuer; the origin in legacy)
    metadata: dict           # authorization server metadata (the defaults in the legacy fallback)
    prm: dict | None = None  # protected resource metadata; None in the legacy fallback
    legacy: bool = False     # no PRM: the 2025-03-26 rules apply
    defaults: bool = False   # no metadata at all: the default endpoints, PKCE S256 assumed

    @property
    def scopes_supported(self) -> list[str] | None:
        scopes = (self.prm or {}).get("scopes_supported")
        return [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else None


def prm_urls(server_url: str, challenge: Challenge | None) -> list[str]:
    """The PRM locations to try, in order (OAUTH-04); a challenge's ``resource_metadata`` on another
    origin than the server's is refused before any request (OAUTH-05)."""
    urls = []
    if challenge is not None and challenge.resource_metadata:
        named = challenge.resource_metadata
        require_secure(named, "resource_metadata URL")
        if origin(named) != origin(server_url):
            raise InsecureURL(f"the server's challenge names resource_metadata {redact(named)}, on another "
                              f"origin than the MCP server ({origin(server_url)}); refused")
        urls.append(named)
    path = urlsplit(server_url).path.rstrip("/")
    if path:
        urls.append(origin(server_url) + PRM_WELL_KNOWN + path)
    urls.append(origin(server_url) + PRM_WELL_KNOWN)
    return list(dict.fromkeys(urls))


def metadata_urls(issuer: str) -> list[str]:
    """Authorization server metadata locations for an issuer, in the spec's order (OAUTH-07)."""
    base, path = origin(issuer), urlsplit(issuer).path.rstrip("/")
    if not path:
        return [base + OAUTH_WELL_KNOWN, base + OIDC_WELL_KNOWN]
    return [base + OAUTH_WELL_KNOWN + path, base + OIDC_WELL_KNOWN + path, base + path + OIDC_WELL_KNOWN]


async def _first_document(http: OAuthHTTP, urls: Iterable[str], what: str) -> tuple[str, dict] | None:
    """The first URL that answers 200 with a JSON object; 4xx, 5xx and redirects (never followed)
    move on to the next."""
    for url in urls:
        response, body = await http.request("GET", url)
        if response.status_code == 200:
            return url, json_object(body, what, url)
        if not (is_redirect(response) or response.status_code >= 400):
            raise DiscoveryError(f"the {what} at {redact(url)} answered HTTP {response.status_code}")
    return None


async def discover_prm(http: OAuthHTTP, server_url: str, challenge: Challenge | None) -> dict | None:
    found = await _first_document(http, prm_urls(server_url, challenge), "protected resource metadata")
    if found is None:
        return None
    url, prm = found
    resource = prm.get("resource")
    if not isinstance(resource, str) or not resource:
        raise DiscoveryError(f"the protected resource metadata at {redact(url)} has no resource")
    if not covers(resource, server_url):
        raise DiscoveryError(f"the protected resource metadata at {redact(url)} is for {redact(resource)}, "
                             f"not for this MCP server ({redact(canonical_resource(server_url))}); refused")
    servers = prm.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) for s in servers):
        raise DiscoveryError(f"the protected resource metadata at {redact(url)} names no "
                             "authorization_servers")
    return prm


def _check_endpoints(metadata: dict, server_url: str, where: str) -> None:
    for name in ENDPOINTS:
        value = metadata.get(name)
        if value is None and name == "registration_endpoint":
            continue
        if not isinstance(value, str):
            raise DiscoveryError(f"the authorization server metadata at {where} has no {name}")
        require_public(value, name, server_url)


async def discover(http: OAuthHTTP, server_url: str, challenge: Challenge | None) -> Discovery:
    """PRM, then the metadata of its first authorization server, checked; or the legacy fallback."""
    resource = canonical_resource(server_url)
    prm = await discover_prm(http, server_url, challenge)
    if prm is None:
        return await _legacy(http, server_url, resource)
    issuer = prm["authorization_servers"][0]
    require_public(issuer, "authorization server", server_url)
    found = await _first_document(http, metadata_urls(issuer), "authorization server metadata")
    if found is None:
        raise DiscoveryError(f"no authorization server metadata found for {redact(issuer)} (tried "
                             + ", ".join(redact(u) for u in metadata_urls(issuer)) + ")")
    url, metadata = found
    # The resource identifier exactly as the PRM publishes it (it covers this server: checked), so
    # the authorization server sees the audience it knows, not a re-spelled one.
    resource = prm["resource"]
    if metadata.get("issuer") != issuer:
        raise DiscoveryError(f"the authorization server metadata at {redact(url)} says issuer "
                             f"{metadata.get('issuer')!r}, not {issuer!r} as discovered; refused")
    _check_endpoints(metadata, server_url, redact(url))
    return Discovery(resource, issuer, metadata, prm)


async def _legacy(http: OAuthHTTP, server_url: str, resource: str) -> Discovery:
    """2025-03-26: the server's origin is the authorization base; its metadata needs no issuer match,
    and without metadata the default endpoints apply."""
    base = origin(server_url)
    found = await _first_document(http, [base + OAUTH_WELL_KNOWN], "authorization server metadata")
    if found is not None:
        url, metadata = found
        _check_endpoints(metadata, server_url, redact(url))
        issuer = metadata.get("issuer") if isinstance(metadata.get("issuer"), str) else base
        return Discovery(resource, issuer, metadata, legacy=True)
    metadata = {"issuer": base, "authorization_endpoint": base + "/authorize",
                "token_endpoint": base + "/token",
                "registration_endpoint": base + "/register", "code_challenge_methods_supported": ["S256"],
                "response_types_supported": ["code"]}
    return Discovery(resource, base, metadata, legacy=True, defaults=True)


def select_scope(challenge_scope: str | None, discovery: Discovery, configured: str | None,
                 grant_types: Iterable[str] = (), offline: bool = True) -> str | None:
    """The scope to request (OAUTH-20, OAUTH-21): the challenge's, else the PRM's scopes_supported, else
    the configured one. ``offline_access`` is added when the client may refresh and the AS lists it,
    and removed from every source when the AS does not list it."""
    if challenge_scope:
        scopes = challenge_scope.split()
    elif discovery.scopes_supported:
        scopes = list(discovery.scopes_supported)
    else:
        scopes = (configured or "").split()
    listed = discovery.metadata.get("scopes_supported")
    as_offers = isinstance(listed, list) and "offline_access" in listed
    if not as_offers:
        scopes = [s for s in scopes if s != "offline_access"]
    elif offline and "refresh_token" in grant_types and "offline_access" not in scopes:
        scopes.append("offline_access")
    return " ".join(dict.fromkeys(scopes)) or None
