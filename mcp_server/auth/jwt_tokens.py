"""``JWTAuthentication``: access tokens that are JWTs, verified against the issuer's JWKS.

The checks (RFC 9068 and the MCP authorization spec): a signature by a key of the JWKS with an
algorithm of the allow-list (asymmetric only: never ``none``, never HS* with a public key), the
issuer, the audience (this resource: a token minted for another is refused), and expiry with
leeway. What failed is logged, never told to the client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from .base import AuthenticationFailed, BaseAuthentication, Principal
from .bearer import bearer_token, principal_from_claims
from .jwks import JWKSCache

if TYPE_CHECKING:
    from ..http.request import Request

logger = logging.getLogger("mcp_server.auth")
ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES256K",
                        "ES384", "ES512", "EdDSA"})


class JWTAuthentication(BaseAuthentication):
    """Settings: ``MCP_SERVER["RESOURCE_SERVER"]["JWT"]`` (docs/authentication.md)."""

    method = "jwt"

    def __init__(self) -> None:
        from ..settings import mcp_settings

        resource_server = mcp_settings.RESOURCE_SERVER
        options = resource_server["JWT"]
        if not options["JWKS_URL"]:
            raise ImproperlyConfigured("JWTAuthentication needs MCP_SERVER['RESOURCE_SERVER']['JWT']"
                                       "['JWKS_URL']")
        self.audience = options["AUDIENCE"] or resource_server["RESOURCE"]
        if not self.audience:
            raise ImproperlyConfigured("JWTAuthentication needs the audience its tokens must name: set "
                                       "MCP_SERVER['RESOURCE_SERVER']['RESOURCE'] (or ['JWT']['AUDIENCE'])")
        algorithms = list(options["ALGORITHMS"])
        refused = [name for name in algorithms if name not in ASYMMETRIC]
        if refused or not algorithms:
            raise ImproperlyConfigured(
                f"MCP_SERVER['RESOURCE_SERVER']['JWT']['ALGORITHMS'] may name asymmetric algorithms "
                f"only ({', '.join(sorted(ASYMMETRIC))}), not {refused or 'none at all'}")
        self.algorithms = algorithms
        self.issuer = options["ISSUER"]
        self.leeway = options["LEEWAY"]
        self.keys = JWKSCache(options["JWKS_URL"], cache_seconds=options["JWKS_CACHE_SECONDS"],
                              refetch_interval=options["JWKS_REFETCH_INTERVAL"],
                              timeout=options["TIMEOUT"])

    async def authenticate(self, request: Request) -> Principal | None:
        token = bearer_token(request)
        if token is None or token.count(".") != 2:
            return None  # not a JWT: an opaque token is another class's (introspection)
        claims = await self.verify(token)
        return await principal_from_claims(claims, self.method)

    async def verify(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationFailed() from None
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            logger.info("JWT refused: algorithm %r is not allowed", algorithm)
            raise AuthenticationFailed()
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            logger.info("JWT refused: no key %r in the JWKS", kid)
            raise AuthenticationFailed()
        options: dict[str, Any] = {"require": ["exp", "aud"] + (["iss"] if self.issuer else [])}
        try:
            claims = jwt.decode(token, key.key, algorithms=[algorithm], audience=self.audience,
                                issuer=self.issuer, leeway=self.leeway, options=options)
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            # Signature, audience, issuer or expiry: which one is for the log, not the client.
            logger.info("JWT refused: %s", exc)
            raise AuthenticationFailed() from None
        return claims

    def authenticate_header(self, request: Request) -> str | None:
        return "Bearer"
