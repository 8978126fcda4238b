"""Encryption at rest of the stored OAuth credentials: Fernet (AES-128-CBC with HMAC-SHA256) under
the keys of ``MCP_CLIENT["OAUTH_ENCRYPTION_KEYS"]``, the first encrypting, every one decrypting."""

from __future__ import annotations

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.core.exceptions import ImproperlyConfigured

from .conf import client_settings

SETTING = "MCP_CLIENT['OAUTH_ENCRYPTION_KEYS']"


def cipher() -> MultiFernet:
    """The keys of the settings; ImproperlyConfigured, saying what to set, when there are none or
    one is not a Fernet key."""
    keys = client_settings()["OAUTH_ENCRYPTION_KEYS"]
    if isinstance(keys, str | bytes) or not isinstance(keys, list | tuple):
        raise ImproperlyConfigured(f"{SETTING} must be a list of Fernet keys, not {type(keys).__name__}")
    if not keys:
        raise ImproperlyConfigured(
            f"{SETTING} is empty: the database token storage of mcp_client.contrib.django encrypts the "
            "registrations and tokens it keeps with these keys. Set it to a list of Fernet keys, the "
            "same on every process, e.g. the output of python -c 'from cryptography.fernet import "
            "Fernet; print(Fernet.generate_key().decode())'")
    fernets = []
    for index, key in enumerate(keys):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(f"{SETTING}[{index}] is not a Fernet key (urlsafe base64 of 32 "
                                       f"bytes): {exc}") from None
    return MultiFernet(fernets)


def encrypt(fernet: MultiFernet, value: dict) -> str:
    return fernet.encrypt(json.dumps(value, separators=(",", ":")).encode()).decode()


def decrypt(fernet: MultiFernet, token: str, what: str) -> dict:
    """The dict ``token`` holds; ImproperlyConfigured when no configured key opens it."""
    try:
        return json.loads(fernet.decrypt(token.encode()))
    except InvalidToken:
        raise ImproperlyConfigured(f"the stored {what} cannot be decrypted with any key of {SETTING}: "
                                   "the key that encrypted it was removed (or the data altered)") from None


def rotate(fernet: MultiFernet, token: str) -> str:
    """``token`` encrypted again under the first key."""
    try:
        return fernet.rotate(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(f"a stored value cannot be decrypted with any key of {SETTING}") from None
