"""Helpers of the authorization server's tests: PKCE pairs, registrations and the code flow,
over Django's test client or httpx (both have ``get``/``post`` and answer ``.status_code``)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

REDIRECT_URI = "http://127.0.0.1:8765/callback"
RESOURCE = "http://testserver/mcp"


@dataclass
class PKCE:
    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> PKCE:
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        return cls(verifier, challenge)


def register(client: Any, base: str = "", **metadata: Any) -> dict:
    """A dynamic registration (a public client of the code flow unless ``metadata`` says else)."""
    body = {"client_name": "Test MCP client", "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none",
            **metadata}
    body = {key: value for key, value in body.items() if value is not None}
    response = client.post(f"{base}/oauth/register/", body, content_type="application/json") \
        if not base else client.post(f"{base}/oauth/register/", json=body)
    assert response.status_code == 201, response.content
    return response.json()


def authorize_query(client_id: str, pkce: PKCE | None, *, state: str = "st-1",
                    resource: str | None = RESOURCE, redirect_uri: str = REDIRECT_URI, **extra: str) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
              "state": state, "scope": "mcp"}
    if pkce is not None:
        params.update(code_challenge=pkce.challenge, code_challenge_method="S256")
    if resource is not None:
        params["resource"] = resource
    params.update(extra)
    return "/oauth/authorize/?" + urlencode(params)


def redirect_params(location: str) -> dict[str, str]:
    parts = urlsplit(location)
    return {key: values[0] for key, values in parse_qs(parts.query).items()}


def approve(client: Any, client_id: str, pkce: PKCE, **kwargs: Any) -> dict[str, str]:
    """The consent page shown, approved: the parameters the client is redirected with."""
    query = authorize_query(client_id, pkce, **kwargs)
    page = client.get(query)
    assert page.status_code == 200, page.content
    form = page.context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None}
    data["allow"] = "Approve"
    answer = client.post(query, data)
    assert answer.status_code == 302, answer.content
    assert answer["Location"].startswith(kwargs.get("redirect_uri", REDIRECT_URI))
    return redirect_params(answer["Location"])


def token(client: Any, **fields: str) -> Any:
    return client.post("/oauth/token/", fields)


def code_flow(client: Any, client_id: str, *, resource: str = RESOURCE) -> dict:
    """Approve and redeem: the token response."""
    pkce = PKCE.new()
    code = approve(client, client_id, pkce, resource=resource)["code"]
    response = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                     client_id=client_id, code_verifier=pkce.verifier, resource=resource)
    assert response.status_code == 200, response.content
    return response.json()


class FakeRequest:
    """The endpoint's request as authentication classes see it (mcp_server.http.checks.Request)."""

    def __init__(self, authorization: str | None, url: str = RESOURCE):
        parts = urlsplit(url)
        self.scheme, self.path = parts.scheme, parts.path
        self.headers = {"host": parts.netloc}
        if authorization is not None:
            self.headers["authorization"] = authorization
        self.user = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name)
