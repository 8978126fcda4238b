"""A stream opened with a token ends once the token no longer holds (issue 24): when the token is
revoked (seen within ``STREAM_CREDENTIAL_CHECK_INTERVAL``) or expires, so that the client
authenticates again and resumes, instead of hearing on with a credential it lost.

Tokens of the demo's own authorization server (``LocalTokenAuthentication``), issued and revoked
over HTTP by daphne processes sharing PostgreSQL and Redis; the handshake era's GET stream and the
2026-07-28 ``subscriptions/listen`` stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
from django.utils import timezone

from mcp_server.auth import Principal
from mcp_server.authorization_server.tokens import digest
from mcp_server.http.credential_watch import CredentialWatch
from mcp_server.http.errors import HTTPError

from .authorization_support import register
from .http_cluster import cluster, ends, next_event, require_services
from .http_harness import DaphneServer, Event
from .http_support import Client
from .listen_support import ListenStream
from .waiting import PATIENCE

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 12
RESOURCE = "http://mcp.test/mcp"
PROTECTED = {
    "AUTHENTICATION_CLASSES": ["mcp_server.authorization_server.authentication.LocalTokenAuthentication"],
    "AUTHENTICATION_REQUIRED": True,
    # The tests' clients register themselves for tokens with no user, which a server opts into.
    "AUTHORIZATION_SERVER": {"RESOURCE": RESOURCE, "DYNAMIC_CLIENT_CREDENTIALS": True},
    "LISTEN_KEEPALIVE_INTERVAL": None,
}
LIST_CHANGED = "notifications/tools/list_changed"


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker) -> Iterator[list[DaphneServer]]:
    """Two processes re-checking the tokens of their streams every second."""
    require_services()
    with django_db_blocker.unblock(), \
            cluster(2, redis_db=REDIS_DB, mcp_settings={**PROTECTED, "STREAM_CREDENTIAL_CHECK_INTERVAL": 1}) \
            as servers:
        yield servers


class Issuer:
    """A confidential client of the authorization server, getting and revoking its tokens."""

    def __init__(self, server: DaphneServer):
        self.base = server.url.removesuffix("/mcp")
        self.http = httpx.Client(timeout=PATIENCE)
        self.registered = register(self.http, self.base, grant_types=["client_credentials"],
                                   redirect_uris=None, token_endpoint_auth_method="client_secret_post")

    def token(self) -> str:
        issued = self.http.post(f"{self.base}/oauth/token/", data={
            "grant_type": "client_credentials", "client_id": self.registered["client_id"],
            "client_secret": self.registered["client_secret"], "resource": RESOURCE})
        assert issued.status_code == 200, issued.text
        return issued.json()["access_token"]

    def revoke(self, token: str, through: DaphneServer) -> None:
        revoked = self.http.post(f"{through.url.removesuffix('/mcp')}/oauth/revoke/", data={
            "token": token, "client_id": self.registered["client_id"],
            "client_secret": self.registered["client_secret"]})
        assert revoked.status_code == 200, revoked.text

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def issuer(pair) -> Iterator[Issuer]:
    issuer = Issuer(pair[0])
    yield issuer
    issuer.close()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def expire_in(token: str, seconds: float) -> None:
    """Make the token expire ``seconds`` from now (in the database every process reads)."""
    from oauth2_provider.models import get_access_token_model

    moment = timezone.now() + datetime.timedelta(seconds=seconds)
    assert get_access_token_model().objects.filter(token_checksum=digest(token)).update(expires=moment) == 1


def list_change(client: Client, url: str, name: str) -> None:
    """A change every listening stream hears of (a tool defined by a tool of the demo's tests)."""
    params = {"name": "define_extra_tool", "arguments": {"name": name}}
    exchange = client.request("tools/call", params, url=url)
    assert exchange.response is not None and "result" in exchange.response, exchange


# Revoked -------------------------------------------------------------------------------------
def test_a_get_stream_ends_once_its_token_is_revoked_and_the_client_resumes_with_a_new_one(pair, issuer):
    a, b = pair
    token = issuer.token()
    client = Client(a.url, headers=bearer(token))
    client.initialize()
    listener = client.listen(url=a.url)
    assert listener.status == 200
    list_change(client, b.url, "heard_before")
    heard: Event = next_event(listener)
    assert heard.message["method"] == LIST_CHANGED and heard.id

    issuer.revoke(token, through=b)
    ends(listener)  # within the re-check interval, from the process holding the stream
    # What is sent meanwhile is kept for the session.
    fresh = issuer.token()
    client.extra.update(bearer(fresh))
    list_change(client, b.url, "sent_meanwhile")
    # The old token opens nothing; a new one of the same client resumes where the stream ended.
    headers = client.headers({"last-event-id": heard.id, **bearer(token)}, accept="text/event-stream")
    stale = httpx.get(b.url, headers=headers, timeout=PATIENCE)
    assert stale.status_code == 401 and stale.headers["www-authenticate"].startswith("Bearer"), stale.text
    resumed = client.listen(last_event_id=heard.id, url=b.url)
    try:
        assert resumed.status == 200
        assert next_event(resumed).message["method"] == LIST_CHANGED
    finally:
        resumed.close()


def test_a_listen_stream_ends_with_its_response_once_its_token_is_revoked(pair, issuer):
    a, b = pair
    token = issuer.token()
    listen = ListenStream(a.url, "watching", {"toolsListChanged": True}, headers=bearer(token))
    try:
        assert listen.status == 200
        assert listen.next()["method"] == "notifications/subscriptions/acknowledged"
        issuer.revoke(token, through=b)
        # The stream's own response ends it (as when the server closes), so the client reopens it.
        answer = listen.next()
        assert answer["id"] == "watching" and answer["result"]["resultType"] == "complete", answer
        assert listen.messages.get(timeout=PATIENCE) is None
    finally:
        listen.close()


# Expired -------------------------------------------------------------------------------------
def test_streams_end_when_their_token_expires_with_no_re_check(django_db_blocker):
    require_services()
    with django_db_blocker.unblock():
        server = DaphneServer(mcp_settings={**PROTECTED, "STREAM_CREDENTIAL_CHECK_INTERVAL": None})
    streams: list = []
    try:
        issuer = Issuer(server)
        token = issuer.token()
        # Time enough to open both streams first, on a loaded machine too.
        expire_in(token, 8)
        client = Client(server.url, headers=bearer(token))
        client.initialize()
        listener = client.listen(url=server.url)
        streams.append(listener)
        listen = ListenStream(server.url, "expiring", {"toolsListChanged": True}, headers=bearer(token))
        streams.append(listen)
        assert (listener.status, listen.status) == (200, 200)
        assert listen.next()["method"] == "notifications/subscriptions/acknowledged"
        # At the token's expiry both end: the GET stream (the client resumes it with
        # Last-Event-ID once authenticated again), the listen stream with its response.
        answer = listen.next()
        assert answer["id"] == "expiring" and answer["result"]["resultType"] == "complete", answer
        ends(listener)
        # And the token opens nothing more.
        stale = httpx.get(server.url, headers=client.headers(accept="text/event-stream"), timeout=PATIENCE)
        assert stale.status_code == 401, stale.text
    finally:
        for stream in streams:
            stream.close()
        issuer.close()
        server.stop()


# What a check says, on its own ----------------------------------------------------------------
class Checks:
    """A resource server whose every check gives the next of ``answers`` (a principal, or an
    exception to raise); it counts the checks made."""

    def __init__(self, *answers: object):
        self.answers = list(answers)
        self.made = 0

    async def authenticate(self, request: object) -> object:
        self.made += 1
        answer = self.answers[min(self.made, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


def watch_of(checks: Checks, principal: Principal, interval: float | None = 0.01) -> CredentialWatch:
    transport = SimpleNamespace(resource_server=checks,
                                options=SimpleNamespace(stream_credential_check_interval=interval))
    return CredentialWatch(transport, SimpleNamespace(principal=principal, method="GET", path="/mcp"))


HOLDER = Principal(client_id="client", claims={"sub": "someone"}, method="jwt")


async def test_a_check_that_cannot_be_made_keeps_the_stream_until_its_expiry():
    checks = Checks(HTTPError(503, "Service Unavailable"))
    expiring = dataclasses.replace(HOLDER, expires_at=time.time() + 0.5)
    assert await asyncio.wait_for(watch_of(checks, expiring).until_lapsed(), PATIENCE) == "expired"
    assert checks.made >= 1


async def test_a_refused_credential_or_another_holder_ends_the_stream():
    for refusal in (HTTPError(401, "Unauthorized"), dataclasses.replace(HOLDER, client_id="another"), None):
        checks = Checks(HOLDER, refusal)
        lapsed = await asyncio.wait_for(watch_of(checks, HOLDER).until_lapsed(), PATIENCE)
        assert (lapsed, checks.made) == ("is no longer accepted", 2)


def test_nothing_is_watched_without_a_resource_server_or_anything_to_watch():
    assert not watch_of(Checks(), HOLDER, interval=None).watches  # no expiry, no checks
    assert watch_of(Checks(), HOLDER).watches
    options = SimpleNamespace(stream_credential_check_interval=1)
    transport = SimpleNamespace(resource_server=None, options=options)
    assert not CredentialWatch(transport, SimpleNamespace(principal=HOLDER)).watches


async def test_a_check_that_fails_keeps_the_stream_and_the_next_one_ends_it():
    from django.db import OperationalError

    checks = Checks(OperationalError("the database went away"), HTTPError(401, "Unauthorized"))
    lapsed = await asyncio.wait_for(watch_of(checks, HOLDER).until_lapsed(), PATIENCE)
    assert (lapsed, checks.made) == ("is no longer accepted", 2)
