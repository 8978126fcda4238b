"""What the authentication tests share: signing keys made here, tokens minted with them, and a
tiny authorization server on loopback serving the JWKS and RFC 7662 introspection (a real HTTP
server in a thread, reached by the endpoint's own httpx requests)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.test import override_settings

from mcp_server.auth.resource_server import ResourceServer

from .http_support import call_asgi, post_headers
from .wire import check_server_message

RESOURCE = "http://127.0.0.1/mcp"
ISSUER = "http://127.0.0.1/issuer"
INTROSPECTION_CLIENT = ("mcp-resource", "introspection-secret")


class Keys:
    """An RSA key pair and its public JWK."""

    def __init__(self, kid: str):
        self.kid = kid
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        self.jwk = {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}

    def mint(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "iat": now, "exp": now + 600,
                "client_id": "client-1", "scope": "mcp:read", **claims}
        body = {key: value for key, value in body.items() if value is not None}
        return jwt.encode(body, self.private, algorithm="RS256", headers={"kid": self.kid})


def unsigned(**claims: Any) -> str:
    """A token with ``alg: none`` (no signature)."""
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": now + 600, **claims}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(body)}."


class AuthorizationServer:
    """JWKS at /jwks (``fetches`` counts them), introspection at /introspect (``answers``: token ->
    answer; an unknown token is inactive; ``introspections`` counts requests)."""

    def __init__(self, keys: list[Keys]):
        self.keys = keys
        self.answers: dict[str, dict] = {}
        self.fetches = 0
        self.introspections = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    return self.reply(404, {})
                outer.fetches += 1
                self.reply(200, {"keys": [key.jwk for key in outer.keys]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                expected = "Basic " + base64.b64encode(":".join(INTROSPECTION_CLIENT).encode()).decode()
                if self.path != "/introspect" or self.headers.get("authorization") != expected:
                    return self.reply(401, {"error": "invalid_client"})
                outer.introspections += 1
                token = form.get("token", [""])[0]
                self.reply(200, outer.answers.get(token, {"active": False}))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def resource_server_settings(server: AuthorizationServer, **overrides: Any) -> dict:
    """MCP_SERVER with JWT then introspection, authentication required."""
    options = {
        "RESOURCE": RESOURCE, "AUTHORIZATION_SERVERS": [ISSUER],
        "SCOPES_SUPPORTED": ["mcp:read", "mcp:write"],
        "JWT": {"JWKS_URL": f"{server.url}/jwks", "ISSUER": ISSUER, "LEEWAY": 0},
        "INTROSPECTION": {"ENDPOINT": f"{server.url}/introspect", "CLIENT_ID": INTROSPECTION_CLIENT[0],
                          "CLIENT_SECRET": INTROSPECTION_CLIENT[1]},
        **overrides.pop("RESOURCE_SERVER", {}),
    }
    return {**settings.MCP_SERVER, "AUTHENTICATION_REQUIRED": True,
            "AUTHENTICATION_CLASSES": ["mcp_server.auth.JWTAuthentication",
                                       "mcp_server.auth.IntrospectionAuthentication"],
            "RESOURCE_SERVER": options, **overrides}


@contextmanager
def resource_server_from(mcp_settings: dict) -> Iterator[ResourceServer]:
    """The settings applied (as long as the block runs: hooks read them per request), and the
    resource server they build."""
    with override_settings(MCP_SERVER=mcp_settings):
        built = ResourceServer.from_settings()
        assert built is not None
        yield built


# Resolved from ``sub`` on a worker thread, with an ORM query: the user named like the subject.
resolver_threads: list[str] = []


def user_of_subject(sub: str, claims: dict) -> Any:
    from django.contrib.auth import get_user_model

    resolver_threads.append(threading.current_thread().name)
    return get_user_model().objects.filter(username=sub).first()


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "auth-test", "version": "1"}}}


def bearer(token: str, scheme: str = "Bearer") -> dict:
    return {"authorization": f"{scheme} {token}"}


async def post_json(app: Any, message: dict, headers: dict | None = None, session_id: str | None = None,
                    revision: str = "2025-11-25") -> tuple[Any, dict | None]:
    """POST one message on the handshake path (JSON responses); the reply and its checked body."""
    extra = {"mcp-protocol-version": revision} if session_id else {}
    raw = await call_asgi(app, "POST", {**post_headers(session_id, **extra), **(headers or {})},
                          [json.dumps(message).encode()])
    body = _body(raw)
    if body is not None:
        check_server_message(body, revision, message.get("method"))
    return raw, body


def _body(raw: Any) -> dict | None:
    text = raw.body.decode()
    if not text:
        return None
    if (raw.header(b"content-type") or b"").startswith(b"text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines()
                if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return json.loads(text)


async def open_session(app: Any, headers: dict) -> str:
    raw, _body = await post_json(app, INIT, headers)
    assert raw.start["status"] == 200, raw.body
    return raw.header(b"mcp-session-id").decode()


def call(name: str, request_id: Any = 2) -> dict:
    params = {"name": name, "arguments": {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def stateless_app(resource_server: ResourceServer, server: Any) -> Any:
    """A stateless endpoint (no session rows: no database) over ``server``, authenticated."""
    from mcp_server.http import StreamableHTTPTransport

    return StreamableHTTPTransport(server, stateless=True, resource_server=resource_server).as_asgi()


def challenge(raw: Any) -> str:
    return (raw.header(b"www-authenticate") or b"").decode()


class APIKeyAuthentication:
    """A plain-def class: an ``X-API-Key`` header naming a user, looked up with the ORM (so it
    must run on a worker thread). ``threads`` records where it ran."""

    threads: list[str] = []

    def authenticate(self, request: Any) -> Any:
        from django.contrib.auth import get_user_model

        from mcp_server.auth import AuthenticationFailed, Principal

        key = request.header("x-api-key")
        if key is None:
            return None
        APIKeyAuthentication.threads.append(threading.current_thread().name)
        user = get_user_model().objects.filter(username=key).first()
        if user is None:
            raise AuthenticationFailed()
        return Principal(user=user, scopes=frozenset({"mcp:read"}), method="api-key")


def _base_class() -> None:
    # A subclass of the interface, made here so that importing this module needs no app registry.
    from mcp_server.auth import BaseAuthentication

    bases = (APIKeyAuthentication, BaseAuthentication)
    globals()["APIKeyAuthentication"] = type("APIKeyAuthentication", bases, {"__module__": __name__})


_base_class()
