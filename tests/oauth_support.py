"""A small OAuth authorization server and a protected MCP server on 127.0.0.1, for the tests of
``mcp_client.oauth``: every request is recorded (method, path, query, headers, body), so a test
can check what went over the wire; each piece can be reshaped or replaced per test."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from .client_support import INITIALIZE_RESULT, WAIT


@dataclass
class Hit:
    """One request a loopback server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Answer:
    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes | str):
            data = self.body.encode() if isinstance(self.body, str) else self.body
            return data, self.headers.get("content-type", "text/plain")
        return json.dumps(self.body).encode(), "application/json"


Route = Callable[[Hit], Answer]


class LoopbackServer:
    """An HTTP server on 127.0.0.1 answering from ``routes[(method, path)]``; 404 otherwise."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.hits: list[Hit] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                parts = urlsplit(self.path)
                hit = Hit(self.command, parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()},
                          {k.lower(): v for k, v in self.headers.items()},
                          self.rfile.read(length) if length else b"")
                server.hits.append(hit)
                route = server.routes.get((hit.method, hit.path))
                answer = route(hit) if route else Answer(404, {"error": "not_found"})
                data, kind = answer.encoded()
                self.close_connection = True
                with contextlib.suppress(OSError):  # a client that stops reading a huge body
                    self.send_response(answer.status)
                    headers = {"content-type": kind, "connection": "close", **answer.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_POST = do_DELETE = handle_one

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.http.server_address[1]}"
        self._thread = threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def url(self, path: str = "") -> str:
        return self.base + path

    def paths(self) -> list[str]:
        return [f"{h.method} {h.path}" for h in self.hits]

    def of(self, method: str, path: str) -> list[Hit]:
        return [h for h in self.hits if h.method == method and h.path == path]

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self._thread.join(WAIT)


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class World:
    """An authorization server and the MCP server it protects, on one loopback server (so one
    origin; ``issuer`` is its base URL). Tokens are ``at-N``, refresh tokens ``rt-N``; the MCP
    server takes a token in ``valid`` whose scopes cover ``required[method]``."""

    def __init__(self, server: LoopbackServer | None = None) -> None:
        self.server = server or LoopbackServer()
        self.issuer = self.server.base
        self.mcp_url = self.server.url("/mcp")
        self.valid: dict[str, set[str]] = {}        # access token -> its scopes
        self.refresh: dict[str, str] = {}           # refresh token -> scope
        self.required: dict[str, set[str]] = {}     # JSON-RPC method -> scopes it needs
        self.prm = {"resource": self.mcp_url, "authorization_servers": [self.issuer]}
        self.metadata = {
            "issuer": self.issuer, "authorization_endpoint": self.server.url("/authorize"),
            "token_endpoint": self.server.url("/token"),
            "registration_endpoint": self.server.url("/register"),
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        }
        self.rotate_refresh = True
        self.challenges: dict[str, str] = {}        # code -> code_challenge
        self.count = 0
        routes = self.server.routes
        routes[("GET", "/.well-known/oauth-protected-resource/mcp")] = lambda hit: Answer(body=self.prm)
        routes[("GET", "/.well-known/oauth-authorization-server")] = lambda hit: Answer(body=self.metadata)
        routes[("GET", "/authorize")] = self.authorize
        routes[("POST", "/token")] = self.token
        routes[("POST", "/register")] = self.register
        routes[("POST", "/mcp")] = self.mcp
        routes[("DELETE", "/mcp")] = lambda hit: Answer(200)

    def challenge_header(self, **params: str) -> str:
        pairs = {"resource_metadata": self.server.url("/.well-known/oauth-protected-resource/mcp"), **params}
        return "Bearer " + ", ".join(f'{k}="{v}"' for k, v in pairs.items())

    def authorize(self, hit: Hit) -> Answer:
        code = f"code-{len(self.challenges)}"
        self.challenges[code] = hit.query.get("code_challenge", "")
        back = {"code": code, "state": hit.query.get("state", "")}
        return Answer(302, headers={"location": hit.query["redirect_uri"] + "?" + urlencode(back)})

    def issue(self, scope: str) -> dict:
        self.count += 1
        token, refresh = f"at-{self.count}", f"rt-{self.count}"
        self.valid[token] = set(scope.split())
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
        if scope:
            answer["scope"] = scope
        if self.rotate_refresh or not self.refresh:
            self.refresh[refresh] = scope
            answer["refresh_token"] = refresh
        return answer

    def token(self, hit: Hit) -> Answer:
        form = hit.form
        if form.get("grant_type") == "authorization_code":
            expected = self.challenges.pop(form.get("code", ""), None)
            if expected is None or s256(form.get("code_verifier", "")) != expected:
                return Answer(400, {"error": "invalid_grant"})
            return Answer(body=self.issue(form.get("scope", "") or self._granted_scope(hit)))
        if form.get("grant_type") == "refresh_token":
            if form.get("refresh_token") not in self.refresh:
                return Answer(400, {"error": "invalid_grant"})
            return Answer(body=self.issue(self.refresh[form["refresh_token"]]))
        if form.get("grant_type") in ("client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"):
            return Answer(body=self.issue(form.get("scope", "")))
        return Answer(400, {"error": "unsupported_grant_type"})

    def _granted_scope(self, hit: Hit) -> str:
        """The scope of the authorization request this code answers (the last one)."""
        asked = [h for h in self.server.of("GET", "/authorize")]
        return asked[-1].query.get("scope", "") if asked else ""

    def register(self, hit: Hit) -> Answer:
        metadata = hit.json
        client = {**metadata, "client_id": f"client-{len(self.server.of('POST', '/register'))}"}
        if metadata.get("token_endpoint_auth_method") != "none":
            client["client_secret"] = "secret"
        return Answer(201, client)

    def mcp(self, hit: Hit) -> Answer:
        message = hit.json
        auth = hit.headers.get("authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        if token not in self.valid:
            return Answer(401, {"error": "invalid_token"}, {"www-authenticate": self.challenge_header()})
        needed = self.required.get(message.get("method"), set())
        if not needed <= self.valid[token]:
            header = self.challenge_header(scope=" ".join(sorted(needed)), error="insufficient_scope")
            return Answer(403, {"error": "insufficient_scope"}, {"www-authenticate": header})
        if message.get("method") == "initialize":
            return Answer(body={"jsonrpc": "2.0", "id": message["id"], "result": INITIALIZE_RESULT})
        if "id" not in message:
            return Answer(202)
        if message["method"] == "server/discover":  # a handshake-era server: the client falls back
            return Answer(body={"jsonrpc": "2.0", "id": message["id"],
                                "error": {"code": -32601, "message": "Method not found: server/discover"}})
        if message["method"] == "tools/list":
            result: dict = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        else:
            result = {"content": [{"type": "text", "text": "ok"}]}
        return Answer(body={"jsonrpc": "2.0", "id": message["id"], "result": result})

    def close(self) -> None:
        self.server.close()


class Browser:
    """The user: follows the authorization URL to the redirect back (one GET, not followed), and
    hands code, state and iss to the callback; ``tamper`` may rewrite them first."""

    def __init__(self, tamper: Callable[[tuple], tuple] | None = None) -> None:
        self.visited: list[str] = []
        self.tamper = tamper
        self._answer: tuple | None = None

    async def redirect(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient() as http:
            response = await http.get(url)
        query = parse_qs(urlsplit(response.headers["location"]).query)
        answer = tuple((query.get(k) or [None])[0] for k in ("code", "state", "iss"))
        self._answer = self.tamper(answer) if self.tamper else answer

    async def callback(self) -> tuple:
        return self._answer


class Recorder:
    """An ``http_client_factory`` for the flow whose clients record every URL they request."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self) -> httpx.AsyncClient:
        async def record(request: httpx.Request) -> None:
            self.urls.append(str(request.url))
        return httpx.AsyncClient(event_hooks={"request": [record]})
