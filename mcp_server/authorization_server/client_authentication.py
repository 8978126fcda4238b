"""Who a request to the token or revocation endpoint says it is, and how many times its secret was
wrong: wrong client secrets are counted per client id and client address (``throttle.py``), so
a secret cannot be guessed at the speed of the endpoint."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import unquote_plus

from django.http import HttpRequest

from ..settings import mcp_settings
from .throttle import Rate, Throttle


def client_secret_throttle() -> Throttle:
    """Failed client authentications per client id and address (``CLIENT_SECRET_FAILURE_RATE``)."""
    rate = mcp_settings.AUTHORIZATION_SERVER["CLIENT_SECRET_FAILURE_RATE"]
    return Throttle("client-secrets",
                    Rate.parse(rate, "MCP_SERVER['AUTHORIZATION_SERVER']['CLIENT_SECRET_FAILURE_RATE']"))


def presented_client_id(request: HttpRequest) -> str | None:
    """The client id of HTTP Basic credentials (RFC 6749 section 2.3.1: form-encoded, then base64),
    else of the ``client_id`` field of the body; None when the request names none."""
    scheme, _, credentials = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() == "basic" and credentials:
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None  # the toolkit refuses it as it is
        client_id, separator, _secret = decoded.partition(":")
        return unquote_plus(client_id) if separator else None
    client_id = request.POST.get("client_id")
    return client_id or None
