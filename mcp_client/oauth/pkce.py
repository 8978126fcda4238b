"""PKCE S256 (RFC 7636) and the authorization request's ``state``."""

from __future__ import annotations

import base64
import hashlib
import secrets


def code_verifier() -> str:
    """43 to 128 characters of [A-Za-z0-9-._~]: 32 random bytes, base64url without padding (43)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def code_challenge(verifier: str) -> str:
    """BASE64URL(SHA256(ASCII(verifier))), no padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


def new_state() -> str:
    """32 random bytes, base64url."""
    return secrets.token_urlsafe(32)
