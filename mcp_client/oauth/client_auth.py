"""Client authentication at the token endpoint: none, client_secret_basic, client_secret_post and
private_key_jwt (RFC 7523 §2.2)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Sequence
from urllib.parse import quote

from .errors import InvalidCredentials

METHODS = ("none", "client_secret_basic", "client_secret_post", "private_key_jwt")
JWT_ALGORITHMS = ("ES256", "RS256")
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 300


def basic_header(client_id: str, client_secret: str) -> str:
    """RFC 6749 §2.3.1: each part form-urlencoded, then ``id:secret`` in base64."""
    pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def choose_method(client: dict, supported: Sequence[str] | None) -> str:
    """The registered method if the client says; else basic or post (whichever the AS lists first,
    basic by default) for a client with a secret, none without."""
    method = client.get("token_endpoint_auth_method")
    if isinstance(method, str) and method:
        return method
    if not client.get("client_secret"):
        return "none"
    for candidate in supported or ():
        if candidate in ("client_secret_basic", "client_secret_post"):
            return candidate
    return "client_secret_basic"


def jwt_assertion(client_id: str, audience: str, private_key: str | bytes, algorithm: str) -> str:
    """A signed client assertion: iss = sub = client_id, aud = the AS issuer, 300 s lifetime."""
    import jwt  # PyJWT; only private_key_jwt needs it

    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now,
              "exp": now + ASSERTION_LIFETIME, "jti": str(uuid.uuid4())}
    return jwt.encode(claims, private_key, algorithm=algorithm, headers={"typ": "JWT"})


def apply(method: str, client: dict, data: dict[str, str], headers: dict[str, str], *,
          audience: str, private_key: str | bytes | None = None, algorithm: str = "ES256") -> None:
    """Add the client's authentication to a token request's form and headers."""
    client_id = client.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise InvalidCredentials("the client has no client_id")
    secret = client.get("client_secret")
    if method == "none":
        data["client_id"] = client_id
    elif method in ("client_secret_basic", "client_secret_post"):
        if not secret:
            raise InvalidCredentials(f"{method} needs a client_secret, and the client has none")
        if method == "client_secret_basic":
            headers["authorization"] = basic_header(client_id, secret)
        else:
            data.update(client_id=client_id, client_secret=secret)
    elif method == "private_key_jwt":
        if private_key is None:
            raise InvalidCredentials("private_key_jwt needs a private_key")
        data.update(client_id=client_id, client_assertion_type=ASSERTION_TYPE,
                    client_assertion=jwt_assertion(client_id, audience, private_key, algorithm))
    else:
        raise InvalidCredentials(f"token_endpoint_auth_method {method!r} is not supported "
                                 f"(supported: {', '.join(METHODS)})")
