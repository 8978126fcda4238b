"""The OAuth flow as an ``httpx.Auth``: bearer injection, the 401 flow, refresh, step-up on 403.

Subclasses say how a token is first obtained (``_grant``): the authorization code flow
(:class:`~mcp_client.oauth.provider.Provider`), client credentials, or a JWT bearer assertion.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

import httpx

from . import client_auth
from .challenge import Challenge, token_challenge
from .discovery import Discovery, discover, select_scope
from .dpop import NONCE_ERROR, DPoPKey, dpop_for_tokens
from .errors import InsecureURL, OAuthError, TokenError
from .http import MAX_BODY_BYTES, OAuthHTTP, is_redirect, json_object
from .storage import InMemoryTokenStorage, TokenStorage
from .urls import canonical_resource, redact, require_public, require_secure

EXPIRY_MARGIN = 30  # seconds: refresh a token this long before it expires
# An httpx request extension: a 401 to the request is its answer; no authorization runs for it.
NO_RENEWAL = "mcp_client.oauth.no_renewal"


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class OAuthFlow(httpx.Auth):
    """What every provider shares. Give it to ``HTTPTransport(url, oauth=provider)``.

    ``http_client_factory()`` makes the ``httpx.AsyncClient`` of the flow's own requests (discovery,
    registration, tokens); redirects are never followed whatever its setting, and bodies over
    ``max_body_bytes`` (4 MiB) are refused.

    DPoP (RFC 9449): with ``dpop=None`` (the default) tokens are requested DPoP-bound when the
    authorization server lists ES256 in ``dpop_signing_alg_values_supported``, and a Bearer token it
    issues anyway is used as one; ``dpop=True`` sends proofs whatever the metadata says and refuses
    Bearer tokens; ``dpop=False`` never sends proofs. ``dpop_key`` (an EC P-256 PEM) is the key the
    tokens are bound to; without it a key is generated for the provider, so DPoP-bound tokens a
    shared or file storage keeps are usable only by the provider that obtained them.
    """

    requires_response_body = False
    grant_types: tuple[str, ...] = ()
    step_up = True  # a 403 insufficient_scope runs a fresh grant for the wider scope

    def __init__(self, *, storage: TokenStorage | None = None, scope: str | None = None,
                 server_url: str | None = None,
                 http_client_factory: Callable[[], httpx.AsyncClient] | None = None,
                 timeout: float = 30.0, max_body_bytes: int = MAX_BODY_BYTES,
                 dpop: bool | None = None, dpop_key: str | bytes | None = None):
        if dpop not in (None, True, False):
            raise ValueError(f"dpop must be None (when the authorization server supports it), True or False, "
                             f"not {dpop!r}")
        if dpop is False and dpop_key is not None:
            raise ValueError("dpop_key is the key of DPoP proofs, and dpop=False sends none: "
                             "pass one or the other")
        self.dpop = dpop
        self.dpop_key = DPoPKey(dpop_key) if dpop is not False else None
        self.storage = storage if storage is not None else InMemoryTokenStorage()
        self.scope = scope
        self.http = OAuthHTTP(http_client_factory, timeout, max_body_bytes)
        self.server_url: str | None = None
        self._snapshot: str | None = None
        self._discovery: Discovery | None = None
        self._lock: asyncio.Lock | None = None
        if server_url is not None:
            self.bind(server_url)

    # Binding to one MCP server ---------------------------------------------------------------
    def bind(self, server_url: str) -> None:
        """Tie the provider to the MCP server URL (HTTPTransport does it); its canonical form is
        the snapshot every request is checked against (OAUTH-27)."""
        require_secure(server_url, "MCP server URL")
        snapshot = canonical_resource(server_url)
        if self._snapshot is not None and snapshot != self._snapshot:
            raise ValueError(f"this OAuth provider is bound to {redact(self._snapshot)}; make another "
                             f"one for {redact(server_url)}")
        self.server_url, self._snapshot = server_url, snapshot

    def _guard(self, request: httpx.Request) -> None:
        if self._snapshot is None:
            raise OAuthError("the OAuth provider is not bound to a server: pass it as "
                             "HTTPTransport(url, oauth=provider)")
        if canonical_resource(str(request.url)) != self._snapshot:
            raise InsecureURL(f"a request to {redact(str(request.url))} is not to the MCP server this "
                              f"provider authorizes for ({redact(self._snapshot)}); not sent with its token")

    async def check_request(self, request: httpx.Request) -> None:
        """An httpx request event hook: HTTPTransport adds it after any of the client factory's, so
        a hook that rewrites the URL cannot send the token elsewhere."""
        self._guard(request)

    # httpx.Auth --------------------------------------------------------------------------------
    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("OAuth providers work with httpx.AsyncClient (Client and AsyncClient use one)")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        self._guard(request)
        async with self._locked():
            tokens = await self._valid_tokens()
        sent = self._authorize_request(request, tokens)
        response = yield request
        if self._nonce_retry(request, response):
            self._authorize_request(request, tokens)  # a fresh proof carrying the resource server's nonce
            response = yield request
        if response.status_code == 401 and request.extensions.get(NO_RENEWAL):
            return  # a request not worth asking anyone to authorize for (a closing DELETE)
        if response.status_code == 401:
            challenge = token_challenge(response.headers.get_list("www-authenticate"))
            async with self._locked():
                current = await self._renew(challenge, sent)
            sent = self._authorize_request(request, current)
            response = yield request
            if self._nonce_retry(request, response):
                self._authorize_request(request, current)
                response = yield request
            if response.status_code == 401:
                raise OAuthError(f"the MCP server still answers 401 to the token the authorization server "
                                 f"{self._issuer()} issued; giving up (no retry loop)")
        if response.status_code == 403 and self.step_up:
            challenge = token_challenge(response.headers.get_list("www-authenticate"))
            if challenge is not None and challenge.error == "insufficient_scope":
                async with self._locked():
                    current = await self._step_up(challenge, sent)
                self._authorize_request(request, current)
                yield request  # a second 403 goes back to the caller as it is

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _authorize_request(self, request: httpx.Request, tokens: dict | None) -> str | None:
        token = _access(tokens)
        if token and self.dpop_key is not None and (tokens or {}).get("token_type") == "DPoP":
            request.headers["authorization"] = f"DPoP {token}"
            request.headers["dpop"] = self.dpop_key.proof(request.method, str(request.url),
                                                          access_token=token)
        elif token:
            request.headers["authorization"] = f"Bearer {token}"
            request.headers.pop("dpop", None)
        return token

    def _nonce_retry(self, request: httpx.Request, response: httpx.Response) -> bool:
        return self.dpop_key is not None and self.dpop_key.nonce_retry(request, response)

    def _uses_dpop(self, discovery: Discovery) -> bool:
        """Whether token requests to this authorization server carry DPoP proofs."""
        return self.dpop_key is not None and dpop_for_tokens(self.dpop, discovery.metadata, discovery.issuer)

    def _issuer(self) -> str:
        return self._discovery.issuer if self._discovery else "(not discovered)"

    # Tokens --------------------------------------------------------------------------------------
    async def _stored_tokens(self) -> dict | None:
        """The stored tokens, unless they are DPoP-bound to a key this provider does not hold."""
        tokens = await self.storage.tokens()
        if tokens and tokens.get("token_type") == "DPoP" and (
                self.dpop_key is None or tokens.get("dpop_jkt") != self.dpop_key.thumbprint):
            return None
        return tokens

    async def _valid_tokens(self) -> dict | None:
        """The stored tokens; refreshed first when they have expired and can be."""
        tokens = await self._stored_tokens()
        if _expiring(tokens) and self._discovery is not None:
            async with self.storage.locked():
                tokens = await self._stored_tokens()  # another process may have refreshed them
                if _expiring(tokens):
                    refreshed = await self._refresh(self._discovery, tokens)
                    if refreshed is not None:
                        return refreshed
        return tokens

    async def _renew(self, challenge: Challenge | None, sent: str | None) -> dict:
        """After a 401 to the token ``sent``: discover, refresh if we can (OAUTH-18), else run the
        grant. Under the storage's lock up to the grant: tokens renewed meanwhile (by this process
        or another sharing the storage) are used as they are, and a client is registered once."""
        async with self.storage.locked():
            current = await self._stored_tokens()
            if current is not None and _access(current) != sent:
                return current
            discovery = await self._discover(challenge)
            tokens = await self._stored_tokens()
            if tokens and tokens.get("refresh_token"):
                refreshed = await self._refresh(discovery, tokens)
                if refreshed is not None:
                    return refreshed
            await self._prepare(discovery)
        scope = self._select_scope(challenge.scope if challenge else None, discovery)
        return await self._obtain(discovery, scope)

    async def _step_up(self, challenge: Challenge, sent: str | None) -> dict | None:
        """403 insufficient_scope: a fresh grant for the granted and the challenged scopes (OAUTH-19)."""
        async with self.storage.locked():
            tokens = await self._stored_tokens()
            if _access(tokens) != sent:
                return tokens  # stepped up meanwhile
            discovery = await self._discover(challenge)
            await self._prepare(discovery)
        granted = ((tokens or {}).get("scope") or "").split()
        wanted = " ".join(dict.fromkeys(granted + (challenge.scope or "").split()))
        scope = self._select_scope(wanted or None, discovery)
        return await self._obtain(discovery, scope)

    async def _prepare(self, discovery: Discovery) -> None:
        """What the grant needs from storage, made under its lock (a registration)."""

    def _select_scope(self, challenge_scope: str | None, discovery: Discovery) -> str | None:
        return select_scope(challenge_scope, discovery, self.scope, self.grant_types)

    async def _obtain(self, discovery: Discovery, scope: str | None) -> dict:
        response = await self._grant(discovery, scope)
        return await self._save(discovery, response, scope)

    async def _grant(self, discovery: Discovery, scope: str | None) -> dict:
        """Obtain a token response (a dict) from the authorization server."""
        raise NotImplementedError

    async def _discover(self, challenge: Challenge | None) -> Discovery:
        discovery = await discover(self.http, self.server_url, challenge)
        await self._bind_issuer(discovery)
        self._discovery = discovery
        return discovery

    async def _bind_issuer(self, discovery: Discovery) -> None:
        """Stored tokens and registrations of another authorization server are discarded (OAUTH-22)."""
        tokens = await self.storage.tokens()
        if tokens and tokens.get("issuer") not in (None, discovery.issuer):
            await self.storage.save_tokens(None)
        client = await self.storage.client_information()
        if client and client.get("issuer") not in (None, discovery.issuer):
            await self.storage.save_client_information(None)
            await self.storage.save_tokens(None)

    async def _refresh(self, discovery: Discovery, tokens: dict) -> dict | None:
        """The refresh grant; None when the caller should fall back to a full grant. ``invalid_grant``
        forgets the tokens; other failures keep the refresh token for later."""
        data = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                "resource": discovery.resource}
        try:
            response = await self._token_request(discovery, data, await self._client_for_refresh(discovery))
        except TokenError as exc:
            if exc.error == "invalid_grant":
                await self.storage.save_tokens(None)
            return None
        except OAuthError:
            return None
        if not response.get("refresh_token"):
            response["refresh_token"] = tokens["refresh_token"]  # the AS did not rotate it
        return await self._save(discovery, response, tokens.get("scope"))

    async def _client_for_refresh(self, discovery: Discovery) -> dict:
        raise NotImplementedError

    async def _save(self, discovery: Discovery, response: dict, requested_scope: str | None) -> dict:
        tokens = {"access_token": response["access_token"], "token_type": "Bearer",
                  "issuer": discovery.issuer}
        if str(response.get("token_type")).lower() == "dpop" and self.dpop_key is not None:
            tokens.update(token_type="DPoP", dpop_jkt=self.dpop_key.thumbprint)
        if isinstance(response.get("refresh_token"), str):
            tokens["refresh_token"] = response["refresh_token"]
        scope = response.get("scope") if isinstance(response.get("scope"), str) else requested_scope
        if scope:
            tokens["scope"] = scope
        expires_in = response.get("expires_in")
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            tokens["expires_at"] = time.time() + expires_in
        await self.storage.save_tokens(tokens)
        return tokens

    async def _token_request(self, discovery: Discovery, data: dict[str, str], client: dict | None, *,
                             method: str | None = None, private_key: str | bytes | None = None,
                             algorithm: str = "ES256") -> dict:
        """POST a grant to the token endpoint with the client's authentication; the token response."""
        url = require_public(discovery.metadata["token_endpoint"], "token endpoint", self.server_url)
        use_dpop = self._uses_dpop(discovery)
        for attempt in (1, 2):
            headers: dict[str, str] = {}
            if client is not None:  # made again for a retry: an assertion's jti is not reused
                chosen = method or client_auth.choose_method(
                    client, discovery.metadata.get("token_endpoint_auth_methods_supported"))
                client_auth.apply(chosen, client, data, headers, audience=discovery.issuer,
                                  private_key=private_key, algorithm=algorithm)
            if use_dpop and self.dpop_key is not None:
                headers["dpop"] = self.dpop_key.proof("POST", url)
            response, body = await self.http.request("POST", url, data=data, headers=headers)
            if not use_dpop or self.dpop_key is None:
                break
            fresh = self.dpop_key.remember_nonce(url, response.headers.get("dpop-nonce"))
            # RFC 9449 §8: a use_dpop_nonce error with a new nonce is answered by one retry carrying it.
            if not (attempt == 1 and fresh and response.status_code == 400
                    and _oauth_error(body)[0] == NONCE_ERROR):
                break
        if is_redirect(response):
            raise TokenError(f"the token endpoint {redact(url)} answered with a redirect "
                             f"(HTTP {response.status_code}), which is not followed",
                             status=response.status_code)
        if response.status_code != 200:
            error, description = _oauth_error(body)
            raise TokenError(f"the token endpoint {redact(url)} refused the {data.get('grant_type')} grant "
                             f"(HTTP {response.status_code}" + (f", {error}" if error else "")
                             + (f": {description}" if description else "") + ")",
                             error=error, status=response.status_code)
        tokens = json_object(body, "token response", url)
        if not isinstance(tokens.get("access_token"), str) or not tokens["access_token"]:
            raise TokenError(f"the token response of {redact(url)} has no access_token")
        token_type = tokens.get("token_type")
        kind = token_type.lower() if isinstance(token_type, str) else None
        if kind == "dpop" and not use_dpop:
            raise TokenError(f"the token endpoint {redact(url)} issued a DPoP token to a request without a "
                             "DPoP proof; refused")
        if kind == "bearer" and use_dpop and self.dpop is True:
            raise TokenError(f"the token endpoint {redact(url)} issued a Bearer token, and dpop=True accepts "
                             "only DPoP-bound tokens")
        if kind not in ("bearer", "dpop"):
            raise TokenError(f"the token endpoint {redact(url)} issued a {token_type!r} token; only Bearer "
                             "and DPoP tokens are supported")
        return tokens


def _expiring(tokens: dict | None) -> bool:
    """Tokens that expire within EXPIRY_MARGIN and carry a refresh token."""
    expires_at = (tokens or {}).get("expires_at")
    return bool(tokens and isinstance(expires_at, int | float) and tokens.get("refresh_token")
                and expires_at - EXPIRY_MARGIN <= time.time())


def _access(tokens: dict | None) -> str | None:
    token = (tokens or {}).get("access_token")
    return token if isinstance(token, str) and token else None


def _oauth_error(body: bytes) -> tuple[str | None, str | None]:
    try:
        error = json_object(body, "error", "")
    except OAuthError:
        return None, None
    code, description = error.get("error"), error.get("error_description")
    return (code if isinstance(code, str) else None,
            description[:300] if isinstance(description, str) else None)
