"""``WorkloadIdentityProvider``: a workload's platform-issued JWT as an RFC 7523 authorization grant
(workload identity federation, SEP-1933)."""

from __future__ import annotations

from typing import Any

from .cross_app import JWT_BEARER, AssertionProvider
from .discovery import Discovery, select_scope
from .errors import InvalidCredentials, TokenError
from .flow import OAuthFlow, maybe_await


class WorkloadIdentityProvider(OAuthFlow):
    """``WorkloadIdentityProvider(assertion_provider=, client_id=None)``:
    ``assertion_provider(audience=<AS issuer>, resource=<MCP server>)`` returns the workload's JWT
    (read the file the platform rotates, ask its metadata service...), sent as
    ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with ``assertion``; the client id, if
    any, goes in the body (no client secret). A refused grant raises ``TokenError``: it is not
    retried, nor another grant type tried."""

    grant_types = (JWT_BEARER,)

    def __init__(self, *, assertion_provider: AssertionProvider, client_id: str | None = None,
                 **options: Any):
        super().__init__(**options)
        if not callable(assertion_provider):
            raise InvalidCredentials("assertion_provider must be callable")
        self.assertion_provider, self.client_id = assertion_provider, client_id

    async def _client_for_refresh(self, discovery: Discovery) -> dict | None:
        return {"client_id": self.client_id} if self.client_id else None

    def _select_scope(self, challenge_scope: str | None, discovery: Discovery) -> str | None:
        return select_scope(challenge_scope, discovery, self.scope, offline=False)

    async def _grant(self, discovery: Discovery, scope: str | None) -> dict:
        assertion = await maybe_await(self.assertion_provider(audience=discovery.issuer,
                                                              resource=discovery.resource))
        if not isinstance(assertion, str) or not assertion:
            raise TokenError("assertion_provider returned no JWT")
        data = {"grant_type": JWT_BEARER, "assertion": assertion, "resource": discovery.resource}
        if scope:
            data["scope"] = scope
        client = {"client_id": self.client_id} if self.client_id else None
        return await self._token_request(discovery, data, client, method="none")
