"""``Provider``: the authorization code flow with PKCE, for a user at a browser."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from . import pkce
from .discovery import Discovery
from .errors import (
    AuthorizationError,
    DiscoveryError,
    InsecureRedirectURI,
    RegistrationError,
    UnregisteredRedirectURI,
)
from .flow import OAuthFlow, maybe_await
from .registration import check_cimd_url, register, registration_metadata
from .urls import InsecureURL, redact, require_public, require_secure

RedirectHandler = Callable[[str], Awaitable[None] | None]
CallbackHandler = Callable[[], Awaitable[Sequence[str | None]] | Sequence[str | None]]


class Provider(OAuthFlow):
    """The authorization code grant with PKCE S256 (OAuth 2.1), as the MCP authorization spec asks.

    ``redirect_handler(url)`` sends the user to the authorization URL (opens a browser);
    ``callback_handler()`` waits for the redirect back and returns ``(code, state)`` or
    ``(code, state, iss)``. ``client_metadata`` is what Dynamic Client Registration posts (it needs
    ``redirect_uris``); ``client_id_metadata_document_url`` is used as the client id instead when the
    authorization server supports it; ``client_information`` is a pre-registered client
    (``{"client_id": ..., "client_secret": ...}``).
    """

    grant_types = ("authorization_code", "refresh_token")

    def __init__(self, *, client_metadata: Mapping[str, Any], redirect_handler: RedirectHandler,
                 callback_handler: CallbackHandler, redirect_uri: str | None = None,
                 client_id_metadata_document_url: str | None = None,
                 client_information: Mapping[str, Any] | None = None, **options: Any):
        super().__init__(**options)
        if "client_id" in client_metadata:
            raise ValueError("client_metadata may not contain client_id: the authorization server assigns "
                             "it (pass client_information for a pre-registered client)")
        uris = client_metadata.get("redirect_uris")
        if not isinstance(uris, list | tuple) or not uris or not all(isinstance(u, str) for u in uris):
            raise ValueError("client_metadata needs redirect_uris, a non-empty list of URLs")
        self.redirect_uri = redirect_uri or uris[0]
        try:
            require_secure(self.redirect_uri, "redirect URI")
        except InsecureURL as exc:
            raise InsecureRedirectURI(str(exc)) from None
        if self.redirect_uri not in uris:
            raise UnregisteredRedirectURI(f"the redirect URI {redact(self.redirect_uri)} is not one of "
                                          "client_metadata['redirect_uris']")
        grants = client_metadata.get("grant_types")
        if grants is not None:
            self.grant_types = tuple(grants)
        self.client_metadata = dict(client_metadata)
        self.cimd_url = check_cimd_url(client_id_metadata_document_url) \
            if client_id_metadata_document_url is not None else None
        if client_information is not None and not client_information.get("client_id"):
            raise ValueError("client_information needs a client_id")
        self.client_information = dict(client_information) if client_information else None
        self.redirect_handler = redirect_handler
        self.callback_handler = callback_handler

    # The client at this authorization server ---------------------------------------------------
    async def _client(self, discovery: Discovery) -> dict:
        """Pre-registered, else CIMD when the AS supports it, else stored, else registered now."""
        if self.client_information is not None:
            return dict(self.client_information)
        if self.cimd_url and discovery.metadata.get("client_id_metadata_document_supported") is True:
            return {"client_id": self.cimd_url, "token_endpoint_auth_method": "none"}
        stored = await self.storage.client_information()
        if stored and stored.get("issuer") == discovery.issuer:
            return stored
        endpoint = discovery.metadata.get("registration_endpoint")
        if not isinstance(endpoint, str):
            raise RegistrationError(f"the authorization server {discovery.issuer} offers no dynamic client "
                                    "registration; pass client_information (a pre-registered client) or "
                                    "client_id_metadata_document_url")
        metadata = registration_metadata(self.client_metadata, self.grant_types,
                                         discovery.metadata.get("token_endpoint_auth_methods_supported"))
        client = await register(self.http, endpoint, metadata, self.server_url)
        client.setdefault("token_endpoint_auth_method", metadata["token_endpoint_auth_method"])
        client["issuer"] = discovery.issuer
        await self.storage.save_client_information(client)
        return client

    async def _client_for_refresh(self, discovery: Discovery) -> dict:
        return await self._client(discovery)

    async def _prepare(self, discovery: Discovery) -> None:
        await self._client(discovery)  # registered under the storage's lock, once for every process

    # The grant ---------------------------------------------------------------------------------------
    async def _grant(self, discovery: Discovery, scope: str | None) -> dict:
        metadata = discovery.metadata
        if not discovery.defaults and "S256" not in (metadata.get("code_challenge_methods_supported") or []):
            raise DiscoveryError(f"the authorization server {discovery.issuer} does not list S256 in "
                                 "code_challenge_methods_supported; PKCE cannot be used, so it is refused")
        client = await self._client(discovery)
        verifier, state = pkce.code_verifier(), pkce.new_state()
        params = {"response_type": "code", "client_id": client["client_id"],
                  "redirect_uri": self.redirect_uri,
                  "state": state, "code_challenge": pkce.code_challenge(verifier),
                  "code_challenge_method": "S256", "resource": discovery.resource}
        if scope:
            params["scope"] = scope
        endpoint = require_public(metadata["authorization_endpoint"], "authorization endpoint",
                                  self.server_url)
        await maybe_await(self.redirect_handler(_with_query(endpoint, params)))
        code = self._check_callback(await maybe_await(self.callback_handler()), state, discovery)
        data = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "redirect_uri": self.redirect_uri, "resource": discovery.resource}
        return await self._token_request(discovery, data, client)

    @staticmethod
    def _check_callback(answer: Sequence[str | None], state: str, discovery: Discovery) -> str:
        if not isinstance(answer, list | tuple) or len(answer) not in (2, 3):
            raise AuthorizationError("callback_handler must return (code, state) or (code, state, iss)")
        code, returned_state = answer[0], answer[1]
        if not code:
            raise AuthorizationError("the authorization server redirected back without a code")
        if not isinstance(returned_state, str) or not hmac.compare_digest(returned_state.encode(),
                                                                           state.encode()):
            raise AuthorizationError("the state of the redirect back does not match the authorization "
                                     "request's; refused (possible CSRF)")
        if len(answer) == 3:
            iss = answer[2]
            if iss is not None and iss != discovery.issuer:
                raise AuthorizationError(f"the redirect back names issuer {iss!r}, not {discovery.issuer!r}; "
                                         "refused (possible mix-up attack)")
            promised = discovery.metadata.get("authorization_response_iss_parameter_supported") is True
            if iss is None and promised:
                raise AuthorizationError("the authorization server promises an iss parameter, and the "
                                         "redirect back has none; refused")
        return code


def _with_query(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
