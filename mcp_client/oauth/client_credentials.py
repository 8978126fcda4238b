"""``ClientCredentialsProvider``: a machine client with its own credentials (RFC 6749 §4.4, SEP-1046)."""

from __future__ import annotations

from typing import Any

from .client_auth import JWT_ALGORITHMS
from .discovery import Discovery, select_scope
from .errors import InvalidCredentials
from .flow import OAuthFlow

SECRET_METHODS = ("client_secret_basic", "client_secret_post")


class ClientCredentialsProvider(OAuthFlow):
    """``ClientCredentialsProvider(client_id=, client_secret=)`` (``client_secret_basic`` by default,
    or ``token_endpoint_auth_method="client_secret_post"``), or ``client_id=, private_key=PEM,
    signing_algorithm="ES256" | "RS256"`` for ``private_key_jwt``. No PKCE, redirect or
    offline_access; the same discovery and checks as :class:`Provider`."""

    grant_types = ("client_credentials",)

    def __init__(self, *, client_id: str, client_secret: str | None = None,
                 private_key: str | bytes | None = None, signing_algorithm: str = "ES256",
                 token_endpoint_auth_method: str | None = None, **options: Any):
        super().__init__(**options)
        if not isinstance(client_id, str) or not client_id:
            raise InvalidCredentials("client_id is required")
        if private_key is not None:
            if client_secret is not None:
                raise InvalidCredentials("private_key_jwt authenticates with the key: do not also set "
                                         "client_secret")
            if signing_algorithm not in JWT_ALGORITHMS:
                raise InvalidCredentials(f"signing_algorithm must be one of {', '.join(JWT_ALGORITHMS)}, "
                                         f"not {signing_algorithm!r}")
            method = token_endpoint_auth_method or "private_key_jwt"
            if method != "private_key_jwt":
                raise InvalidCredentials(f"a private_key means private_key_jwt, not {method}")
            _load_key(private_key)
        else:
            method = token_endpoint_auth_method or "client_secret_basic"
            if method == "none":
                raise InvalidCredentials("the client credentials grant needs client authentication; "
                                         "token_endpoint_auth_method 'none' cannot be used")
            if method not in SECRET_METHODS:
                raise InvalidCredentials(f"token_endpoint_auth_method must be one of "
                                         f"{', '.join(SECRET_METHODS)} (or pass private_key), not {method!r}")
            if not client_secret:
                raise InvalidCredentials("client_secret is required (or pass private_key for "
                                         "private_key_jwt)")
        self.client_id = client_id
        self.method = method
        self.signing_algorithm = signing_algorithm
        # The key stays in this object only: it is never written to storage.
        self._secret = client_secret
        self._private_key = private_key

    def _client(self) -> dict:
        client = {"client_id": self.client_id}
        if self._secret:
            client["client_secret"] = self._secret
        return client

    async def _client_for_refresh(self, discovery: Discovery) -> dict:
        return self._client()

    def _select_scope(self, challenge_scope: str | None, discovery: Discovery) -> str | None:
        return select_scope(challenge_scope, discovery, self.scope, offline=False)

    async def _token_request(self, discovery: Discovery, data: dict[str, str], client: dict | None, **_: Any
                             ) -> dict:
        return await super()._token_request(discovery, data, client, method=self.method,
                                            private_key=self._private_key, algorithm=self.signing_algorithm)

    async def _grant(self, discovery: Discovery, scope: str | None) -> dict:
        data = {"grant_type": "client_credentials", "resource": discovery.resource}
        if scope:
            data["scope"] = scope
        return await self._token_request(discovery, data, self._client())


def _load_key(private_key: str | bytes) -> None:
    """Fail at construction on a key that cannot be read, not at the first 401."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(private_key.encode() if isinstance(private_key, str) else private_key, None)
    except (ValueError, TypeError) as exc:
        raise InvalidCredentials(f"private_key is not a PEM private key without a password: {exc}") from None
