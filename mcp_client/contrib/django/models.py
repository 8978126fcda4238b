"""What ``DatabaseTokenStorage`` keeps: per storage key, the client registration and the tokens,
each encrypted (``crypto``); the issuer, client id and expiry beside them in clear, for admin."""

from __future__ import annotations

from django.db import models


class OAuthCredential(models.Model):
    key = models.CharField(max_length=512, unique=True,
                           help_text="The storage's name: which MCP server (and account) these are for.")
    issuer = models.CharField(max_length=2048, blank=True,
                              help_text="The authorization server the client is registered with.")
    client_id = models.CharField(max_length=2048, blank=True)
    # Fernet tokens of the JSON dicts the OAuth flow stores (empty: none stored).
    client_information = models.TextField(blank=True)
    tokens = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When the access token expires.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "mcp_client_oauth_credential"
        verbose_name = "OAuth client credential"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key
