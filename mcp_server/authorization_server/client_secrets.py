"""A public client has no secret: none is stored, and none is hashed for it.

The toolkit gives every new client a random secret and hashes it with Django's password hasher
(about 200 ms of CPU, on purpose) even when the client is public (``token_endpoint_auth_method:
none``) and never learns it: with open registration, that was 200 ms anyone could make the server
spend per request. A public client is stored with an empty secret, and the validator
(``oauth.Validator``) never takes an empty stored secret as a match.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import pre_save
from oauth2_provider.models import get_application_model


def no_secret_for_public_clients(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """Before a new public client is saved: no secret, so nothing to hash."""
    if raw or not instance._state.adding or instance.client_type != instance.CLIENT_PUBLIC:
        return
    instance.client_secret = ""
    instance.hash_client_secret = False


def connect() -> None:
    pre_save.connect(no_secret_for_public_clients, sender=get_application_model(),
                     dispatch_uid=f"{__name__}.no_secret_for_public_clients")
