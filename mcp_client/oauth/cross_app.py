"""Cross-app access (SEP-990, Enterprise-Managed Authorization): an identity provider issues an
ID-JAG (RFC 8693 token exchange), which the MCP server's authorization server takes as a JWT bearer
grant (RFC 7523)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .client_auth import basic_header
from .discovery import Discovery, select_scope
from .errors import InvalidCredentials, TokenError
from .flow import OAuthFlow, maybe_await
from .http import MAX_BODY_BYTES, OAuthHTTP, is_redirect, json_object
from .urls import redact, require_secure

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"

AssertionProvider = Callable[..., Awaitable[str] | str]


class IDJAGTokenExchange:
    """An ``assertion_provider``: exchanges the user's ID token at the IdP's token endpoint for an
    ID-JAG for the given audience and resource (RFC 8693)."""

    def __init__(self, *, token_endpoint: str, client_id: str, id_token: str,
                 client_secret: str | None = None, http_client_factory: Any = None, timeout: float = 30.0,
                 max_body_bytes: int = MAX_BODY_BYTES):
        self.token_endpoint = require_secure(token_endpoint, "identity provider token endpoint")
        if not client_id or not id_token:
            raise InvalidCredentials("IDJAGTokenExchange needs client_id and id_token")
        self.client_id, self.id_token, self._secret = client_id, id_token, client_secret
        self.http = OAuthHTTP(http_client_factory, timeout, max_body_bytes)

    async def __call__(self, *, audience: str, resource: str) -> str:
        data = {"grant_type": TOKEN_EXCHANGE, "subject_token": self.id_token, "subject_token_type": ID_TOKEN,
                "requested_token_type": ID_JAG, "audience": audience, "resource": resource,
                "client_id": self.client_id}
        headers = {"authorization": basic_header(self.client_id, self._secret)} if self._secret else {}
        response, body = await self.http.request("POST", self.token_endpoint, data=data, headers=headers)
        url = redact(self.token_endpoint)
        if is_redirect(response):
            raise TokenError(f"the identity provider's token endpoint {url} answered with a redirect, "
                             "which is not followed", status=response.status_code)
        answer = json_object(body, "token exchange response", self.token_endpoint)
        if response.status_code != 200:
            raise TokenError(f"the identity provider {url} refused the token exchange (HTTP "
                             f"{response.status_code}, {answer.get('error')}: "
                             f"{answer.get('error_description')})",
                             error=answer.get("error"), status=response.status_code)
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise TokenError(f"the token exchange response of {url} has no access_token")
        if answer.get("issued_token_type") not in (None, ID_JAG):
            raise TokenError(f"the identity provider {url} issued a {answer.get('issued_token_type')}, "
                             "not an ID-JAG")
        return token


class JWTBearerFlow(OAuthFlow):
    """A flow whose grant is a JWT that ``assertion_provider(audience=<AS issuer>, resource=<MCP
    server>)`` returns, sent as a JWT bearer grant (RFC 7523). No PKCE, registration or
    offline_access. Subclasses say how the client authenticates the grant."""

    grant_types = (JWT_BEARER,)
    assertion_name = "JWT"  # what the provider must return, for the error that says it did not
    grant_method = "none"   # the token endpoint authentication of the grant

    def __init__(self, *, assertion_provider: AssertionProvider, **options: Any):
        super().__init__(**options)
        if not callable(assertion_provider):
            raise InvalidCredentials("assertion_provider must be callable")
        self.assertion_provider = assertion_provider

    def _grant_client(self) -> dict | None:
        raise NotImplementedError

    async def _client_for_refresh(self, discovery: Discovery) -> dict | None:
        return self._grant_client()

    def _select_scope(self, challenge_scope: str | None, discovery: Discovery) -> str | None:
        return select_scope(challenge_scope, discovery, self.scope, offline=False)

    async def _grant(self, discovery: Discovery, scope: str | None) -> dict:
        assertion = await maybe_await(self.assertion_provider(audience=discovery.issuer,
                                                              resource=discovery.resource))
        if not isinstance(assertion, str) or not assertion:
            raise TokenError(f"assertion_provider returned no {self.assertion_name}")
        data = {"grant_type": JWT_BEARER, "assertion": assertion, "resource": discovery.resource}
        if scope:
            data["scope"] = scope
        return await self._token_request(discovery, data, self._grant_client(), method=self.grant_method)


class CrossAppAccessProvider(JWTBearerFlow):
    """``CrossAppAccessProvider(client_id=, client_secret=, assertion_provider=)``:
    ``assertion_provider(audience=<AS issuer>, resource=<MCP server URL>)`` returns an ID-JAG (for
    example an :class:`IDJAGTokenExchange`), sent as a JWT bearer grant with client_secret_basic.
    No PKCE, registration or offline_access."""

    assertion_name = "ID-JAG"
    grant_method = "client_secret_basic"

    def __init__(self, *, client_id: str, client_secret: str, assertion_provider: AssertionProvider,
                 **options: Any):
        if not client_id or not client_secret:
            raise InvalidCredentials("CrossAppAccessProvider needs client_id and client_secret")
        super().__init__(assertion_provider=assertion_provider, **options)
        self.client_id, self._secret = client_id, client_secret

    def _grant_client(self) -> dict:
        return {"client_id": self.client_id, "client_secret": self._secret}
