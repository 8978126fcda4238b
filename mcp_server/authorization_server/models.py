"""What the toolkit does not keep: which tokens each redeemed authorization code produced, and
where each dynamically registered client was registered from."""

from __future__ import annotations

from django.db import models
from oauth2_provider.settings import oauth2_settings


class RedeemedCode(models.Model):
    """An authorization code that was exchanged for tokens (by its SHA-256, never the code).

    OAuth 2.1 (section 4.1.3): a code presented a second time is refused, and the tokens issued
    from it should be revoked, since one of the two presenters stole it. The toolkit deletes a
    code once redeemed; this row remembers what it produced until nothing is left to revoke.
    """

    code_hash = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE,
                                    related_name="+")
    # The refresh token family (rotation keeps it) and the first access token.
    token_family = models.UUIDField(null=True, blank=True)
    access_token = models.ForeignKey(oauth2_settings.ACCESS_TOKEN_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "redeemed authorization code"

    def __str__(self) -> str:
        return f"Redeemed code #{self.pk}"


class ClientRegistration(models.Model):
    """The client address a dynamic registration (RFC 7591) came from.

    A token with no user (client_credentials) is its client acting for itself, and open
    registration makes a new client for anyone who asks: the fair-share limits of the MCP endpoint
    count the tokens of every client registered from one address together (``fair_share`` of the
    principal, ``authentication.py``), so a new registration does not bring a new share.
    """

    application = models.OneToOneField(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE,
                                       related_name="mcp_registration")
    address = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        verbose_name = "client registration"

    def __str__(self) -> str:
        return f"{self.application_id} from {self.address or 'an unknown address'}"
