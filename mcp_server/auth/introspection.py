"""``IntrospectionAuthentication``: opaque access tokens checked by RFC 7662 token introspection.

An active answer is kept (per process, by a hash of the token) for ``CACHE_SECONDS`` at most and
never past the token's ``exp``: a token revoked at the authorization server is refused here within
``CACHE_SECONDS``. Inactive answers are not kept, so a token becomes usable as soon as it is.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

import httpx
from django.core.exceptions import ImproperlyConfigured

from .base import AuthenticationFailed, AuthenticationUnavailable, BaseAuthentication, Principal
from .bearer import audiences_of, bearer_token, principal_from_claims

if TYPE_CHECKING:
    from ..http.request import Request

logger = logging.getLogger("mcp_server.auth")


class IntrospectionAuthentication(BaseAuthentication):
    """Settings: ``MCP_SERVER["RESOURCE_SERVER"]["INTROSPECTION"]`` (docs/authentication.md)."""

    method = "introspection"

    def __init__(self) -> None:
        from ..settings import mcp_settings

        resource_server = mcp_settings.RESOURCE_SERVER
        options = resource_server["INTROSPECTION"]
        if not options["ENDPOINT"]:
            raise ImproperlyConfigured("IntrospectionAuthentication needs MCP_SERVER['RESOURCE_SERVER']"
                                       "['INTROSPECTION']['ENDPOINT']")
        self.audience = options["AUDIENCE"] or resource_server["RESOURCE"]
        if not self.audience:
            raise ImproperlyConfigured(
                "IntrospectionAuthentication needs the audience its tokens must name: set "
                "MCP_SERVER['RESOURCE_SERVER']['RESOURCE'] (or ['INTROSPECTION']['AUDIENCE'])")
        if bool(options["CLIENT_ID"]) != bool(options["CLIENT_SECRET"]):
            raise ImproperlyConfigured("MCP_SERVER['RESOURCE_SERVER']['INTROSPECTION'] needs both "
                                       "CLIENT_ID and CLIENT_SECRET, or neither")
        self.endpoint = options["ENDPOINT"]
        self.credentials = (options["CLIENT_ID"], options["CLIENT_SECRET"]) if options["CLIENT_ID"] else None
        self.cache_seconds = float(options["CACHE_SECONDS"])
        self.cache_size = int(options["CACHE_SIZE"])
        self.timeout = options["TIMEOUT"]
        # sha256(token) -> (monotonic deadline, principal): the token itself is never kept.
        self._cache: dict[bytes, tuple[float, Principal]] = {}
        self.requests = 0

    async def authenticate(self, request: Request) -> Principal | None:
        token = bearer_token(request)
        if token is None:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            if cached[0] > time.monotonic():
                return cached[1]
            self._cache.pop(digest, None)
        answer = await self.introspect(token)
        if answer.get("active") is not True:
            raise AuthenticationFailed()
        exp = answer.get("exp")
        now = time.time()
        if isinstance(exp, int | float) and exp <= now:
            raise AuthenticationFailed()
        if self.audience not in audiences_of(answer):
            logger.info("introspected token refused: audience %r is not %r", answer.get("aud"), self.audience)
            raise AuthenticationFailed()
        principal = await principal_from_claims(answer, self.method)
        lifetime = self.cache_seconds
        if isinstance(exp, int | float):
            lifetime = min(lifetime, exp - now)  # never past the token's expiry
        if lifetime > 0:
            self._remember(digest, time.monotonic() + lifetime, principal)
        return principal

    async def introspect(self, token: str) -> dict[str, Any]:
        self.requests += 1
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(
                    self.endpoint, data={"token": token, "token_type_hint": "access_token"},
                    auth=self.credentials, headers={"accept": "application/json"})
            response.raise_for_status()
            answer = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            logger.warning("token introspection at %s failed: %s", self.endpoint, exc)
            raise AuthenticationUnavailable("the token introspection endpoint does not answer") from exc
        if not isinstance(answer, dict):
            raise AuthenticationUnavailable("the token introspection endpoint answered with no object")
        return answer

    def _remember(self, digest: bytes, deadline: float, principal: Principal) -> None:
        if len(self._cache) >= self.cache_size:
            # Bounded: expired answers go, then the oldest half (dicts keep insertion order).
            now = time.monotonic()
            for key in [key for key, (until, _p) in self._cache.items() if until <= now]:
                del self._cache[key]
            if len(self._cache) >= self.cache_size:
                for key in list(self._cache)[: max(1, len(self._cache) // 2)]:
                    del self._cache[key]
        self._cache[digest] = (deadline, principal)

    def authenticate_header(self, request: Request) -> str | None:
        return "Bearer"
