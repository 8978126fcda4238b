"""DPoP (RFC 9449): proofs of possession of the client's key, for token and resource requests.

A :class:`DPoPKey` is an ES256 (P-256) key: generated when the provider is made, or a PEM the
caller gives to keep tokens bound to it usable across restarts (the key is never written to the
token storage; the tokens remember its thumbprint). Each proof is a fresh JWT (``typ: dpop+jwt``,
the public key as ``jwk``) naming the request's method and URL (RFC 9449 §4.2), the access token's
hash as ``ath`` on resource requests (§7), and the latest nonce the server sent (§8, §9).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import httpx

from .challenge import token_challenge
from .errors import InvalidCredentials, TokenError
from .pkce import code_challenge

ALGORITHM = "ES256"
NONCE_ERROR = "use_dpop_nonce"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def access_token_hash(token: str) -> str:
    """``ath``: base64url of the SHA-256 of the access token's ASCII (RFC 9449 §4.2), the transform
    of PKCE's S256."""
    return code_challenge(token)


def target_uri(url: str) -> str:
    """``htu``: the request URL without its query and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def origin(url: str) -> str:
    """Nonces are kept per server: scheme, host and port."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def dpop_for_tokens(mode: bool | None, metadata: dict, issuer: str) -> bool:
    """Whether token requests to an authorization server with this metadata carry proofs: when it
    lists ES256 (``mode`` None), always (True; refused when it lists algorithms without ES256)."""
    algorithms = metadata.get("dpop_signing_alg_values_supported")
    listed = isinstance(algorithms, list) and ALGORITHM in algorithms
    if mode is None:
        return listed
    if mode and isinstance(algorithms, list) and not listed:
        raise TokenError(f"dpop=True, and the authorization server {issuer} lists DPoP algorithms "
                         f"{algorithms!r} without {ALGORITHM}, the one proofs are signed with")
    return bool(mode)


class DPoPKey:
    """The client's DPoP key and the nonces its servers asked for.

    ``DPoPKey()`` generates a P-256 key; ``DPoPKey(pem)`` loads one (an EC P-256 private key in PEM,
    without a password)."""

    def __init__(self, private_key: str | bytes | None = None):
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        if private_key is None:
            key = ec.generate_private_key(ec.SECP256R1())
        else:
            try:
                key = load_pem_private_key(private_key.encode() if isinstance(private_key, str)
                                           else private_key, None)
            except (ValueError, TypeError) as exc:
                raise InvalidCredentials(f"dpop_key is not a PEM private key without a password: {exc}"
                                         ) from None
            if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
                raise InvalidCredentials("dpop_key must be an EC P-256 private key (DPoP proofs are ES256)")
        self._key = key
        numbers = key.public_key().public_numbers()
        self.public_jwk = {"kty": "EC", "crv": "P-256",
                           "x": _b64(numbers.x.to_bytes(32, "big")), "y": _b64(numbers.y.to_bytes(32, "big"))}
        # RFC 7638: the required members in lexicographic order, no whitespace.
        canonical = json.dumps({k: self.public_jwk[k] for k in ("crv", "kty", "x", "y")},
                               separators=(",", ":"))
        self.thumbprint = _b64(hashlib.sha256(canonical.encode()).digest())
        self._nonces: dict[str, str] = {}

    def proof(self, method: str, url: str, *, access_token: str | None = None) -> str:
        """A fresh proof for one request (a new ``jti`` each time), with the server's nonce if it sent one."""
        import jwt  # PyJWT

        claims: dict[str, object] = {"jti": str(uuid.uuid4()), "htm": method.upper(),
                                     "htu": target_uri(url), "iat": int(time.time())}
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        nonce = self._nonces.get(origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(claims, self._key, algorithm=ALGORITHM,
                          headers={"typ": "dpop+jwt", "jwk": self.public_jwk})

    def remember_nonce(self, url: str, nonce: str | None) -> bool:
        """Keep the ``DPoP-Nonce`` a server at ``url`` sent; True when it is new (worth a retry)."""
        if not nonce:
            return False
        key = origin(url)
        if self._nonces.get(key) == nonce:
            return False
        self._nonces[key] = nonce
        return True

    def nonce_retry(self, request: httpx.Request, response: httpx.Response) -> bool:
        """Keep a ``DPoP-Nonce`` the MCP server sent to a request with a proof; True when its answer
        is a ``use_dpop_nonce`` challenge with a nonce the proof did not carry (worth one retry, §9)."""
        if "dpop" not in request.headers:
            return False
        fresh = self.remember_nonce(str(request.url), response.headers.get("dpop-nonce"))
        if response.status_code != 401 or not fresh:
            return False
        challenge = token_challenge(response.headers.get_list("www-authenticate"), ("dpop",))
        return challenge is not None and challenge.error == NONCE_ERROR
