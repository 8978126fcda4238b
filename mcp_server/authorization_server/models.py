"""What the toolkit does not keep: which tokens each redeemed authorization code produced."""

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
