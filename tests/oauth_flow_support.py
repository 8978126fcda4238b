"""The full OAuth flow against the demo running protected, for any MCP client.

:func:`protected_demo` starts the demo (``MCP_PROTECTED=1``) in a daphne process on the test
database: its endpoint requires a token of its own authorization server. :class:`ConsentAgent` is
the person in front of the browser: given the authorization URL a client opened, it logs in to the
demo and approves the consent form over real HTTP (session cookie, CSRF token), and returns what the
client's redirect URI receives. The checks read the server's side: its access log (every request
daphne answered, with its status) and its token rows, never the client's word alone.

A flow test per client (tests/test_oauth_flow_*.py) drives its client through: registration (DCR),
PKCE, consent, token, a tool call, a forced refresh, revocation, and a call after it that gets 401.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, TypeVar
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from mcp_server.authorization_server.tokens import digest

from .http_harness import ACCEPT_BOTH, DaphneServer, free_port
from .waiting import PATIENCE, wait_until

USERNAME = "olivia"
PASSWORD = "a long test password"
# The client's redirect URI: a loopback address nothing listens on. The agent reads the
# redirect's Location instead of following it, as a browser hands it to a native client.
REDIRECT_URI = "http://127.0.0.1:8765/callback"
ACCESS_LINE = re.compile(r'\] "(?P<method>[A-Z]+) (?P<path>\S+)" (?P<status>\d{3}) ')
T = TypeVar("T")


@dataclass
class ProtectedDemo:
    server: DaphneServer
    base: str  # the origin: issuer of the authorization server

    @property
    def url(self) -> str:
        """The MCP endpoint, which is also the resource (RFC 8707) its tokens name."""
        return f"{self.base}/mcp"

    def log_mark(self) -> int:
        return len(self.server.log)

    def requests_since(self, mark: int) -> list[tuple[str, str, int]]:
        """(method, path, status) of each request daphne answered after ``mark``, in order."""
        return [(m["method"], m["path"], int(m["status"]))
                for m in ACCESS_LINE.finditer(self.server.log[mark:])]

    def wait_for_requests(self, mark: int, *expected: tuple[str, str, int]) -> list[tuple[str, str, int]]:
        """The requests since ``mark`` once the ``expected`` ones are among them: daphne writes a
        line when a response has been sent, which may be just after the client read it."""
        return wait_until(lambda: (seen := self.requests_since(mark)) and all(
            entry in seen for entry in expected) and seen, what=f"{expected} in the access log")

    def first_status(self, seen: list[tuple[str, str, int]], method: str, path: str) -> int:
        """The status of the first ``method path`` request among ``seen``."""
        return next(status for m, p, status in seen if (m, p) == (method, path))


@contextmanager
def protected_demo(django_db_blocker: Any) -> Iterator[ProtectedDemo]:
    """The demo, protected, in a daphne process whose public URL is its own loopback address."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with django_db_blocker.unblock():
        server = DaphneServer(port=port, env={"MCP_PROTECTED": "1", "MCP_PUBLIC_URL": base})
    try:
        yield ProtectedDemo(server, base)
    finally:
        server.stop()


class _Forms(HTMLParser):
    """The named inputs of one form of a page (hidden fields and the CSRF token included)."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.inside = attributes.get("id") == self.form_id
        elif tag == "input" and self.inside and attributes.get("name") and \
                attributes.get("type") != "submit":
            self.fields[attributes["name"]] = attributes.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def form_fields(html: str, form_id: str) -> dict[str, str]:
    parser = _Forms(form_id)
    parser.feed(html)
    assert parser.fields, f"no form #{form_id} on the page:\n{html[:2000]}"
    return parser.fields


class ConsentRefused(Exception):
    """The person did not approve (the test told the agent to stop approving)."""


@dataclass
class ConsentAgent:
    """A user of the demo who approves the clients' authorization requests over HTTP."""

    base: str
    username: str = USERNAME
    password: str = PASSWORD
    approving: bool = True
    opened: list[str] = field(default_factory=list)  # the authorization URLs, in order
    redirect_prefix: str = REDIRECT_URI  # what the redirect back must start with

    def __post_init__(self) -> None:
        self.http = httpx.Client(timeout=PATIENCE)

    def close(self) -> None:
        self.http.close()

    def authorize(self, url: str) -> dict[str, str]:
        """Open ``url`` (logging in when sent to), approve: the redirect's query parameters."""
        location = self.approve(url)
        return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}

    def approve(self, url: str) -> str:
        """Open ``url`` (logging in when sent to), approve: where the browser is sent back to."""
        self.opened.append(url)
        if not self.approving:
            raise ConsentRefused(f"the user did not approve {url}")
        assert url.startswith(f"{self.base}/oauth/authorize/"), url
        page = self.http.get(url)
        if page.status_code == 302:
            self._log_in(urljoin(url, page.headers["location"]))
            page = self.http.get(url)
        assert page.status_code == 200, page.text
        fields = form_fields(page.text, "consent-form")
        answer = self.http.post(url, data={**fields, "allow": "Approve"})
        assert answer.status_code == 302, answer.text
        location = answer.headers["location"]
        assert location.startswith(self.redirect_prefix), location
        return location

    def _log_in(self, login_url: str) -> None:
        assert urlsplit(login_url).path == "/oauth/login/", login_url
        page = self.http.get(login_url)
        fields = form_fields(page.text, "login-form")
        answer = self.http.post(login_url, data={**fields, "username": self.username,
                                                  "password": self.password})
        assert answer.status_code == 302, f"login failed: {answer.text[:1000]}"


def create_user() -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user(USERNAME, password=PASSWORD)


def in_thread(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` for an async test: the ORM on a worker thread that keeps no connection open
    (the test database must be droppable at the end)."""
    from django.db import connection

    def run(*args: Any) -> T:
        try:
            return function(*args)
        finally:
            connection.close()
    return run


# The server's side ---------------------------------------------------------------------------------

def access_row(token: str) -> Any:
    from oauth2_provider.models import AccessToken

    return AccessToken.objects.select_related("user", "application").filter(
        token_checksum=digest(token)).first()


def refresh_row(token: str) -> Any:
    from oauth2_provider.models import RefreshToken

    return RefreshToken.objects.select_related("access_token").filter(token_checksum=digest(token)).first()


def check_authorized(demo: ProtectedDemo, agent: ConsentAgent, access_token: str, refresh_token: str,
                     client_name: str) -> str:
    """The first authorization as the server recorded it; returns the client id."""
    from oauth2_provider.models import Application

    row = access_row(access_token)
    assert row is not None, "no access token row for the client's token"
    assert row.user.username == agent.username and row.scope == "mcp"
    assert row.resource == [demo.url]
    application = row.application
    assert application.name == client_name
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.redirect_uris.split() == [REDIRECT_URI]
    refresh = refresh_row(refresh_token)
    assert refresh is not None and refresh.revoked is None and refresh.access_token_id == row.pk
    # PKCE S256 and the resource in the authorization request the user approved.
    [opened] = agent.opened
    query = {key: values[0] for key, values in parse_qs(urlsplit(opened).query).items()}
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert query["client_id"] == application.client_id and query["resource"] == demo.url
    return application.client_id


def check_refreshed(old_access: str, old_refresh: str, new_access: str, new_refresh: str) -> None:
    """A refresh grant rotated the tokens: the old refresh token is revoked, the old access token
    gone, and the new access token comes from the old refresh token."""
    assert new_access != old_access and new_refresh != old_refresh
    old = refresh_row(old_refresh)
    assert old is not None and old.revoked is not None, "the old refresh token was not rotated"
    assert access_row(old_access) is None
    new = access_row(new_access)
    assert new is not None and new.source_refresh_token_id == old.pk
    successor = refresh_row(new_refresh)
    assert successor is not None and successor.revoked is None and successor.token_family == old.token_family


def check_revoked(access_token: str, refresh_token: str) -> None:
    assert access_row(access_token) is None
    refresh = refresh_row(refresh_token)
    assert refresh is None or refresh.revoked is not None


def revoke(demo: ProtectedDemo, client_id: str, access_token: str, refresh_token: str) -> None:
    """RFC 7009: both tokens revoked at the revocation endpoint, as a public client does."""
    with httpx.Client(timeout=PATIENCE) as http:
        for token, hint in ((access_token, "access_token"), (refresh_token, "refresh_token")):
            answer = http.post(f"{demo.base}/oauth/revoke/", data={
                "token": token, "token_type_hint": hint, "client_id": client_id})
            assert answer.status_code == 200, answer.text


def initialize_with(demo: ProtectedDemo, access_token: str | None) -> httpx.Response:
    """An ``initialize`` POST to the endpoint with ``access_token`` (or none)."""
    headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
    if access_token:
        headers["authorization"] = f"Bearer {access_token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "check", "version": "1"}}}
    with httpx.Client(timeout=PATIENCE) as http:
        return http.post(demo.url, json=body, headers=headers)


def refresh_grant(demo: ProtectedDemo, client_id: str, refresh_token: str) -> httpx.Response:
    with httpx.Client(timeout=PATIENCE) as http:
        return http.post(f"{demo.base}/oauth/token/", data={
            "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id,
            "resource": demo.url})


def check_refused(demo: ProtectedDemo, access_token: str) -> None:
    """The endpoint answers the token with 401 invalid_token and its Bearer challenge."""
    refused = initialize_with(demo, access_token)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert f'resource_metadata="{demo.base}/.well-known/oauth-protected-resource/mcp"' in challenge
