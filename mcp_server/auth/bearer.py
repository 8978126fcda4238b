"""What bearer-token classes share: reading the token, and a principal from a token's claims."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..invoke import call_user_code
from .base import AuthenticationFailed, Principal

if TYPE_CHECKING:
    from ..http.request import Request

# RFC 6750 b64token: what a bearer token may be made of.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header (scheme in any case); None without one.

    Only the header is read: a token in the query string is never looked at (the endpoint refuses
    such requests before any class runs).
    """
    header = request.header("authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not _B64TOKEN.fullmatch(token):
        # Two Authorization headers arrive joined by ", ", which no token contains.
        raise AuthenticationFailed("invalid_request", "The Authorization header is malformed")
    return token


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """``scope`` (space separated, RFC 8693/9068) or ``scp`` (a list, or a string)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list | tuple):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def client_id_of(claims: Mapping[str, Any]) -> str | None:
    value = claims.get("client_id", claims.get("azp"))
    return value if isinstance(value, str) else None


def audiences_of(claims: Mapping[str, Any]) -> list[str]:
    value = claims.get("aud")
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


async def principal_from_claims(claims: Mapping[str, Any], method: str) -> Principal:
    """The principal of verified claims; its user from ``sub`` through ``USER_RESOLVER``."""
    from ..settings import mcp_settings

    resolver = mcp_settings.RESOURCE_SERVER["USER_RESOLVER"]
    user = None
    sub = claims.get("sub")
    if resolver is not None and isinstance(sub, str):
        if isinstance(resolver, str):
            resolver = _import(resolver)
        # A plain def runs on a worker thread (it may query the ORM); async def is awaited.
        user = await call_user_code(resolver, sub, claims)
    exp = claims.get("exp")
    return Principal(user=user, scopes=scopes_of(claims), client_id=client_id_of(claims),
                     expires_at=float(exp) if isinstance(exp, int | float) else None,
                     claims=dict(claims), method=method)


def _import(path: str) -> Any:
    from django.core.exceptions import ImproperlyConfigured
    from django.utils.module_loading import import_string

    try:
        return import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"MCP_SERVER['RESOURCE_SERVER']['USER_RESOLVER'] = {path!r} cannot be imported: {exc}") from exc
