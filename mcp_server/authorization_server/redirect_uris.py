"""Which redirect URIs a client may register: https, or http on a loopback host (RFC 8252), with
no fragment (RFC 6749 section 3.1.2) and no user information."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost",)


def is_loopback_host(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def problem(uri: object, max_length: int) -> str | None:
    """Why ``uri`` cannot be a redirect URI, or None when it can."""
    if not isinstance(uri, str) or not uri:
        return "each redirect URI must be a non-empty string"
    if len(uri) > max_length:
        return f"a redirect URI is longer than {max_length} characters"
    if any(character.isspace() or not character.isprintable() for character in uri):
        return f"{uri!r} contains whitespace or control characters"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - an out-of-range port raises here
    except ValueError:
        return f"{uri!r} is not a valid URI"
    if parts.fragment or "#" in uri:
        return f"{uri!r} has a fragment, which a redirect URI must not have"
    if not parts.hostname:
        return f"{uri!r} is not an absolute URI with a host"
    if parts.username is not None or parts.password is not None:
        return f"{uri!r} has user information, which a redirect URI must not have"
    scheme = parts.scheme.lower()
    if scheme == "https":
        return None
    if scheme == "http":
        if is_loopback_host(parts.hostname):
            return None
        return f"{uri!r} uses http on a host that is not loopback: use https (http only on loopback)"
    return f"{uri!r} uses the scheme {parts.scheme!r}: a redirect URI must use https, or http on loopback"


def problems(uris: object, *, max_count: int, max_length: int) -> list[str]:
    """Every reason the list ``uris`` (a registration's redirect_uris) cannot be registered."""
    if not isinstance(uris, list) or not uris:
        return ["redirect_uris must be a non-empty array of URIs"]
    if len(uris) > max_count:
        return [f"a client may register at most {max_count} redirect URIs, not {len(uris)}"]
    return [reason for uri in uris if (reason := problem(uri, max_length)) is not None]
