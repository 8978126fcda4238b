"""Who the client is at the authorization server: client metadata, Dynamic Client Registration
(RFC 7591) and Client ID Metadata Documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from .errors import InvalidClientIDMetadataDocumentURL, RegistrationError
from .http import OAuthHTTP, is_redirect, json_object
from .urls import is_loopback, redact, require_public

PREFERRED_METHODS = ("none", "client_secret_basic", "client_secret_post")


def check_cimd_url(url: str) -> str:
    """A client id URL must be https with a path below the root, and no fragment, userinfo, query
    or dot segments (OAUTH-13)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidClientIDMetadataDocumentURL(f"not a URL: {url!r}") from exc
    problems = []
    if parts.scheme != "https" or not parts.hostname:
        problems.append("it must be an https URL")
    if parts.path in ("", "/"):
        problems.append("it needs a path below the root")
    if parts.fragment or "#" in url:
        problems.append("it may not have a fragment")
    if parts.username is not None or parts.password is not None:
        problems.append("it may not have userinfo")
    if parts.query or "?" in url:
        problems.append("it may not have a query string")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        problems.append("it may not have . or .. segments")
    if problems:
        raise InvalidClientIDMetadataDocumentURL(
            f"client_id_metadata_document_url {redact(url)} cannot be a client id: " + "; ".join(problems))
    return url


def application_type(redirect_uris: Sequence[str]) -> str:
    """``native`` when every redirect URI is loopback or a custom scheme, ``web`` otherwise (OAUTH-12)."""
    def native(uri: str) -> bool:
        scheme = urlsplit(uri).scheme
        return scheme not in ("http", "https") or is_loopback(uri)
    return "native" if redirect_uris and all(native(uri) for uri in redirect_uris) else "web"


def registration_metadata(client_metadata: Mapping, grant_types: Sequence[str],
                          supported_methods: Sequence[str] | None) -> dict:
    """What to POST to the registration endpoint: the given metadata with the required fields filled."""
    metadata = dict(client_metadata)
    metadata.setdefault("grant_types", list(grant_types))
    metadata.setdefault("response_types", ["code"])
    if "token_endpoint_auth_method" not in metadata:
        listed = [m for m in PREFERRED_METHODS if m in (supported_methods or ())]
        metadata["token_endpoint_auth_method"] = listed[0] if listed else "client_secret_basic"
    metadata.setdefault("application_type", application_type(metadata.get("redirect_uris") or []))
    return metadata


async def register(http: OAuthHTTP, endpoint: str, metadata: dict, server_url: str) -> dict:
    """POST the metadata; the registered client (``client_id`` and whatever the AS returned)."""
    require_public(endpoint, "registration endpoint", server_url)
    response, body = await http.request("POST", endpoint, json_body=metadata)
    if is_redirect(response):
        raise RegistrationError(f"the registration endpoint {redact(endpoint)} answered with a redirect "
                                f"(HTTP {response.status_code}), which is not followed")
    if response.status_code not in (200, 201):
        raise RegistrationError(f"the registration endpoint {redact(endpoint)} refused the client "
                                f"(HTTP {response.status_code}): {body[:300].decode('utf-8', 'replace')}")
    client = json_object(body, "registration response", endpoint)
    if not isinstance(client.get("client_id"), str) or not client["client_id"]:
        raise RegistrationError(f"the registration response of {redact(endpoint)} has no client_id")
    return client
