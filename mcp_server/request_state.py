"""Sealing the ``requestState`` of input_required results (MRTR-09/10).

The client echoes the state back verbatim, so it is attacker-controlled input. On the 2026-07-28
wire it travels sealed with AES-256-GCM: ``"v1." + base64url(iv[12] || ciphertext || tag[16])``,
with ``"v1."`` as additional authenticated data. Inside are the handler's state and what binds it
to one request: expiry, method, target (tool or prompt name, or resource URI), a digest of the
arguments and an audience. Opening fails closed: any mismatch is the same -32602.

Every process of a deployment must hold the same keys (``MCP_SERVER["REQUEST_STATE_KEYS"]``), so
that a round answered by one process can be continued by any other. The first key seals; every
key opens, so keys rotate by putting a new one first and dropping the old one after the TTL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcp_protocol.errors import INVALID_PARAMS, MCPError

PREFIX = "v1."
_AAD = PREFIX.encode()
_IV_BYTES = 12
_TAG_BYTES = 16
KEY_BYTES = 32
DEFAULT_TTL = 300
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class InvalidRequestStateError(MCPError):
    """A ``requestState`` that does not open: tampered, expired, malformed or bound elsewhere.

    The client learns nothing about which check failed.
    """

    code = INVALID_PARAMS
    default_message = "Invalid or expired requestState"


class RequestStateKeysMissing(RuntimeError):
    """A handler returned a request state for the 2026-07-28 wire, and no key is configured."""

    def __init__(self) -> None:
        super().__init__(
            "an input_required result carries a request_state, but no key seals it: set "
            "MCP_SERVER['REQUEST_STATE_KEYS'] (the same list on every process) or pass "
            "Server(request_state_security=RequestStateSecurity(key=...))"
        )


def decode_key(key: bytes | str) -> bytes:
    """A 32-byte key, given as bytes or as base64 (standard or URL-safe, padding optional)."""
    if isinstance(key, str):
        text = key.strip()
        try:
            raw = base64.b64decode(text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4),
                                   validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a request state key must be base64 of 32 bytes") from exc
    elif isinstance(key, bytes | bytearray):
        raw = bytes(key)
    else:
        raise TypeError(f"a request state key must be bytes or a base64 string, not {type(key).__name__}")
    if len(raw) != KEY_BYTES:
        raise ValueError(f"a request state key must be {KEY_BYTES} bytes (AES-256), not {len(raw)}")
    return raw


def arguments_digest(arguments: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``arguments``: sorted keys, no spaces, UTF-8."""
    canonical = json.dumps(arguments if arguments is not None else {}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class RequestStateSecurity:
    """Seals and opens request states with AES-256-GCM (the ``cryptography`` package).

    ``key`` is one 32-byte key; ``keys`` a list of them for rotation (the first seals, all open).
    Keys are bytes or base64 text. ``ttl`` is in seconds; ``audience`` (any string, such as the
    endpoint's public URL) keeps a state from being replayed to another deployment sharing keys.
    """

    def __init__(self, key: bytes | str | None = None, *, keys: Sequence[bytes | str] | None = None,
                 ttl: float = DEFAULT_TTL, audience: str | None = None):
        if (key is None) == (keys is None):
            raise ValueError("pass exactly one of key= or keys=")
        given = [key] if key is not None else list(keys or [])
        if not given:
            raise ValueError("keys= needs at least one key")
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        if audience is not None and not isinstance(audience, str):
            raise TypeError("audience must be a string or None")
        self._ciphers = [AESGCM(decode_key(k)) for k in given]
        self.ttl = ttl
        self.audience = audience

    def seal(self, state: str, *, method: str, target: str, arguments: Any) -> str:
        """The wire form of ``state``, bound to this request and valid for ``ttl`` seconds."""
        claims = {
            "v": 1, "exp": time.time() + self.ttl, "m": method, "t": target,
            "a": arguments_digest(arguments), "aud": self.audience, "s": state,
        }
        plaintext = json.dumps(claims, separators=(",", ":"), ensure_ascii=False).encode()
        iv = os.urandom(_IV_BYTES)
        sealed = iv + self._ciphers[0].encrypt(iv, plaintext, _AAD)
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, token: Any, *, method: str, target: str, arguments: Any) -> str:
        """The state sealed in ``token``; raises :class:`InvalidRequestStateError` unless it
        opens under one of the keys, has not expired, and was sealed for this very request."""
        claims = self._claims(token)
        bound = (
            claims.get("v") == 1
            and isinstance(claims.get("exp"), int | float) and claims["exp"] > time.time()
            and claims.get("m") == method and claims.get("t") == target
            and claims.get("a") == arguments_digest(arguments)
            and claims.get("aud") == self.audience
            and isinstance(claims.get("s"), str)
        )
        if not bound:
            raise InvalidRequestStateError()
        return claims["s"]

    def _claims(self, token: Any) -> dict:
        if not isinstance(token, str) or not token.startswith(PREFIX):
            raise InvalidRequestStateError()
        body = token[len(PREFIX):]
        if not _BASE64URL.match(body) or len(body) % 4 == 1:
            raise InvalidRequestStateError()
        sealed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        if len(sealed) < _IV_BYTES + _TAG_BYTES:
            raise InvalidRequestStateError()
        iv, ciphertext = sealed[:_IV_BYTES], sealed[_IV_BYTES:]
        for cipher in self._ciphers:
            try:
                plaintext = cipher.decrypt(iv, ciphertext, _AAD)
            except InvalidTag:
                continue
            try:
                claims = json.loads(plaintext)
            except ValueError:
                break
            if isinstance(claims, dict):
                return claims
            break
        raise InvalidRequestStateError()

    def __repr__(self) -> str:  # never the keys
        return f"<RequestStateSecurity keys={len(self._ciphers)} ttl={self.ttl} audience={self.audience!r}>"


def from_settings() -> RequestStateSecurity | None:
    """The security the ``MCP_SERVER`` settings describe: ``REQUEST_STATE_KEYS``, else keys
    derived from Django's ``SECRET_KEY`` (and ``SECRET_KEY_FALLBACKS``, which open only), which
    every process of a deployment shares already. None when there is neither (or Django is not
    configured at all, as in a script serving stdio without settings)."""
    from django.core.exceptions import ImproperlyConfigured

    try:
        from .settings import mcp_settings

        keys = mcp_settings.REQUEST_STATE_KEYS or derived_keys()
        ttl, audience = mcp_settings.REQUEST_STATE_TTL, mcp_settings.REQUEST_STATE_AUDIENCE
    except ImproperlyConfigured:
        return None
    if not keys:
        return None
    signature = (tuple(keys), ttl, audience)
    cached = _from_settings_cache.get("security")
    if cached is not None and cached[0] == signature:
        return cached[1]
    security = RequestStateSecurity(keys=list(keys), ttl=ttl, audience=audience)
    _from_settings_cache["security"] = (signature, security)
    return security


_from_settings_cache: dict[str, tuple[tuple, RequestStateSecurity]] = {}
# What makes a key derived from SECRET_KEY this module's alone (HKDF's "info"): no other use of the
# secret (Django's signing, sessions) can produce or open it.
_DERIVATION_INFO = b"django-mcp-sdk input_required request state v1"


def derived_keys() -> list[bytes]:
    """Keys derived (HKDF-SHA256) from ``SECRET_KEY`` then each of ``SECRET_KEY_FALLBACKS``: the
    first seals, the fallbacks open states sealed before the secret was rotated."""
    from django.conf import settings

    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return [HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                 info=_DERIVATION_INFO).derive(secret.encode("utf-8") if isinstance(secret, str) else secret)
            for secret in secrets if secret]


def settings_errors(keys: Any, ttl: Any, audience: Any) -> list[str]:
    """What is wrong with the three settings (for the system check), as messages."""
    errors = []
    if keys is not None and not isinstance(keys, list | tuple):
        errors.append("REQUEST_STATE_KEYS must be a list of keys (base64 of 32 bytes each)")
    else:
        for index, key in enumerate(keys or []):
            try:
                decode_key(key)
            except (TypeError, ValueError) as exc:
                errors.append(f"REQUEST_STATE_KEYS[{index}]: {exc}")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
        errors.append(f"REQUEST_STATE_TTL must be a positive number of seconds, not {ttl!r}")
    if audience is not None and not isinstance(audience, str):
        errors.append("REQUEST_STATE_AUDIENCE must be a string or None")
    return errors
