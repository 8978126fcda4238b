"""The toolkit's admin pages, with nothing secret on them.

The toolkit registers its own classes for clients (applications), access and refresh tokens and
authorization codes (grants); these replace them. Tokens and codes are stored as SHA-256
checksums, so there is no secret to show; a client's secret is stored hashed and is not shown
either: a row is told by the last characters of its checksum.
"""

from __future__ import annotations

from django.contrib import admin
from oauth2_provider import admin as dot_admin
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()


def masked(value: str) -> str:
    return dot_admin.mask_credential(value) or "—"


class ApplicationAdmin(dot_admin.ApplicationAdmin):
    list_display = ("pk", "name", "client_id", "client_type", "authorization_grant_type",
                    "registration_source", "created")
    exclude = ("client_secret",)
    readonly_fields = ("registration_source", "cimd_expires_at", "masked_secret")

    @admin.display(description="client secret")
    def masked_secret(self, obj: Application) -> str:
        if not obj.client_secret or obj.client_type == Application.CLIENT_PUBLIC:
            return "—"
        return "(stored hashed, not shown)"


class AccessTokenAdmin(dot_admin.AccessTokenAdmin):
    list_display = ("pk", "masked_token", "user", "application", "scope", "resource", "expires")
    exclude = ("token", "token_checksum")

    @admin.display(description="token")
    def masked_token(self, obj: AccessToken) -> str:
        return masked(obj.token_checksum) if obj is not None else ""


class RefreshTokenAdmin(dot_admin.RefreshTokenAdmin):
    list_display = ("pk", "masked_token", "user", "application", "resource", "revoked")
    exclude = ("token", "token_checksum")

    @admin.display(description="token")
    def masked_token(self, obj: RefreshToken) -> str:
        return masked(obj.token_checksum) if obj is not None else ""


class GrantAdmin(dot_admin.GrantAdmin):
    exclude = ("code", "code_challenge")


for model, model_admin in ((Application, ApplicationAdmin), (AccessToken, AccessTokenAdmin),
                           (RefreshToken, RefreshTokenAdmin), (Grant, GrantAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, model_admin)
