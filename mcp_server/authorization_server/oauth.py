"""The toolkit's oauthlib server, validator and backend, as an MCP authorization server needs them.

- ``Server``: PKCE with S256 only (oauthlib would accept ``plain``, and takes a challenge without a
  method as ``plain``), refused at the authorization request, before the consent page.
- ``Backend`` and ``Validator``: authorization codes are stored as their SHA-256. The backend
  hashes the ``code`` of a token request before oauthlib reads it, and the validator hashes the
  code it stores, so every lookup the toolkit makes by code compares digests.
- ``Validator``: a code is redeemed once, even by two requests at the same moment, and a replayed
  code revokes the tokens issued from it (OAuth 2.1 section 4.1.3). A dynamically registered
  client gets a token with no user (client_credentials) only while ``DYNAMIC_CLIENT_CREDENTIALS``
  allows it, and an empty stored secret (a public client's) matches nothing.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_backends import OAuthLibCore
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2 import Server as OAuthlibServer
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256

from ..settings import mcp_settings
from .tokens import digest


class Server(OAuthlibServer):
    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any):
        super().__init__(request_validator, *args, **kwargs)
        self.auth_grant._code_challenge_methods = {"S256": code_challenge_method_s256}


class Backend(OAuthLibCore):
    def extract_body(self, request: Any) -> list[tuple[str, str]]:
        body = super().extract_body(request)
        if ("grant_type", "authorization_code") not in body:
            return body
        return [(key, digest(value) if key == "code" else value) for key, value in body]


class Validator(OAuth2Validator):
    def validate_grant_type(self, client_id: str, grant_type: str, client: Any, request: Any,
                            *args: Any, **kwargs: Any) -> bool:
        # A client registered while DYNAMIC_CLIENT_CREDENTIALS allowed it loses the grant (400
        # unauthorized_client) once the setting is off again.
        allowed = mcp_settings.AUTHORIZATION_SERVER["DYNAMIC_CLIENT_CREDENTIALS"]
        dynamic = client.registration_source == client.RegistrationSource.DCR
        if grant_type == "client_credentials" and dynamic and not allowed:
            return False
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def _check_secret(self, provided_secret: str, stored_secret: str) -> bool:
        # A public client is stored with no secret (client_secrets.py): "" must not match "".
        return bool(stored_secret) and super()._check_secret(provided_secret, stored_secret)

    def _create_authorization_code(self, request: Any, code: dict, expires: Any = None) -> Any:
        return super()._create_authorization_code(request, {**code, "code": digest(code["code"])}, expires)

    def _create_access_token(self, expires: Any, request: Any, token: dict,
                             source_refresh_token: Any = None) -> Any:
        access_token = super()._create_access_token(expires, request, token, source_refresh_token)
        request.mcp_access_token = access_token
        return access_token

    def _create_refresh_token(self, request: Any, refresh_token_code: str, access_token: Any,
                              previous_refresh_token: Any) -> Any:
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token,
                                                      previous_refresh_token)
        request.mcp_refresh_token = refresh_token
        return refresh_token

    def _save_bearer_token(self, token: dict, request: Any, *args: Any, **kwargs: Any) -> Any:
        result = super()._save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "authorization_code":
            from .models import RedeemedCode

            refresh_token = getattr(request, "mcp_refresh_token", None)
            RedeemedCode.objects.filter(code_hash=request.code).update(
                token_family=refresh_token.token_family if refresh_token is not None else None,
                access_token=getattr(request, "mcp_access_token", None))
        return result

    def validate_code(self, client_id: str, code: str, client: Any, request: Any,
                      *args: Any, **kwargs: Any) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            revoke_redeemed(code)
            return False
        return claim_code(code, client)


def claim_code(code_hash: str, application: Any) -> bool:
    """Mark a valid code as being redeemed, before any token is made from it: of two requests that
    present it at once, the second finds the mark (one row per code) and is refused. A code whose
    redemption then fails (a wrong PKCE verifier, say) stays spent."""
    from .models import RedeemedCode

    try:
        with transaction.atomic():
            RedeemedCode.objects.create(code_hash=code_hash, application=application)
    except IntegrityError:
        return False
    return True


def revoke_redeemed(code_hash: str) -> bool:
    """Revoke every token issued from the code with this digest, if it was redeemed before."""
    from .models import RedeemedCode

    record = RedeemedCode.objects.filter(code_hash=code_hash).first()
    if record is None:
        return False
    if record.token_family is not None:
        get_refresh_token_model().revoke_family(record.token_family)
    if record.access_token_id is not None:
        get_access_token_model().objects.filter(pk=record.access_token_id).delete()
    record.delete()
    return True
