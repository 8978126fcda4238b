"""Every setting of the ``MCP_CLIENT`` dict, with its default, read in this module alone.

    MCP_CLIENT = {"OAUTH_ENCRYPTION_KEYS": ["<Fernet key>", "<the previous one>"]}
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    # Fernet keys (urlsafe base64 of 32 random bytes: Fernet.generate_key()) encrypting the stored
    # registrations and tokens, the same list on every process. The first encrypts, all decrypt:
    # put a new key first, run manage.py mcp_client_rotate_keys, then drop the old one.
    "OAUTH_ENCRYPTION_KEYS": [],
}


def client_settings() -> dict[str, Any]:
    """``settings.MCP_CLIENT`` over :data:`DEFAULTS`; an unknown key is an error. Read at each use
    (it is small), so ``override_settings`` needs no signal."""
    user = getattr(settings, "MCP_CLIENT", None) or {}
    if not isinstance(user, dict):
        raise ImproperlyConfigured(f"MCP_CLIENT must be a dict, not {type(user).__name__}")
    for name in sorted(user):
        if name not in DEFAULTS:
            raise ImproperlyConfigured(f"MCP_CLIENT has no setting {name!r} (a typo?); it has "
                                       + ", ".join(DEFAULTS))
    return {**DEFAULTS, **user}
