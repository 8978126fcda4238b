"""The stored credentials in admin: what they are for and when they expire; every secret masked
(the registration's client secret, the access and refresh tokens). Rows come from the OAuth flow:
admin views and deletes them (a deleted row makes the next use register and authorize again)."""

from __future__ import annotations

import json

from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.utils.html import format_html

from .crypto import cipher, decrypt
from .models import OAuthCredential

MASK = "••••••••"
SECRETS = {"client_secret", "registration_access_token", "access_token", "refresh_token", "id_token"}


def masked(value: dict) -> dict:
    return {key: MASK if key in SECRETS and item else item for key, item in value.items()}


@admin.register(OAuthCredential)
class OAuthCredentialAdmin(admin.ModelAdmin):
    list_display = ("key", "issuer", "client_id", "has_tokens", "expires_at", "updated_at")
    search_fields = ("key", "issuer", "client_id")
    fields = ("key", "issuer", "client_id", "registration", "stored_tokens", "expires_at", "created_at",
              "updated_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(boolean=True, description="tokens")
    def has_tokens(self, obj: OAuthCredential) -> bool:
        return bool(obj.tokens)

    @admin.display(description="registration (secrets masked)")
    def registration(self, obj: OAuthCredential) -> str:
        return self._shown(obj.client_information, f"client information of {obj.key!r}")

    @admin.display(description="tokens (secrets masked)")
    def stored_tokens(self, obj: OAuthCredential) -> str:
        return self._shown(obj.tokens, f"tokens of {obj.key!r}")

    @staticmethod
    def _shown(token: str, what: str) -> str:
        if not token:
            return "-"
        try:
            value = decrypt(cipher(), token, what)
        except ImproperlyConfigured as exc:
            return str(exc)
        return format_html("<pre>{}</pre>", json.dumps(masked(value), indent=2, ensure_ascii=False))
