"""What an anonymous attacker did to the demo's authorization server (issue 24), and what it gets
now, against two daphne processes sharing PostgreSQL and Redis (the Django cache too, so each
limit holds across both) and, for tokens with no user, the protected demo.

The attacker sends from a loopback address of its own in each test (127.0.0.x: the limits count
per client address), so tests do not share a budget and a second address shows what another
client still gets. Every limit is small here, set in the processes' settings.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest

from .authorization_documents import DocumentServer
from .authorization_support import PKCE, REDIRECT_URI
from .http_cluster import cluster, require_services
from .http_harness import ACCEPT_BOTH, DaphneServer, free_port
from .oauth_flow_support import PASSWORD, USERNAME, ConsentAgent, create_user, form_fields
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 10
REGISTRATIONS, LOGIN_FAILURES, SECRET_FAILURES = 5, 3, 3
MAX_REDIRECT_URIS, MAX_REDIRECT_URI_LENGTH, MAX_REGISTRATION_BYTES = 10, 2000, 64 * 1024


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    server = DocumentServer(tmp_path_factory.mktemp("cimd"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker, documents):
    """The demo (not protected: its authorization server is mounted all the same) on two
    processes, with small limits, fetching metadata documents from ``documents`` on loopback."""
    require_services()
    settings = {"AUTHORIZATION_SERVER": {
        "REGISTRATION_RATE": f"{REGISTRATIONS}/hour", "LOGIN_FAILURE_RATE": f"{LOGIN_FAILURES}/hour",
        "CLIENT_SECRET_FAILURE_RATE": f"{SECRET_FAILURES}/hour",
        "CIMD_ALLOW_LOOPBACK": True, "CIMD_CA_BUNDLE": str(documents.cert_path), "CIMD_FETCH_TIMEOUT": 1}}
    with django_db_blocker.unblock(), cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as servers:
        yield [server.url.removesuffix("/mcp") for server in servers]


@contextlib.contextmanager
def sending_from(address: str) -> Iterator[httpx.Client]:
    """An HTTP client whose connections come from ``address`` (a loopback address)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(transport=transport, timeout=PATIENCE) as http:
        yield http


def register(http: httpx.Client, base: str, **metadata) -> httpx.Response:
    body = {"client_name": "Attacker", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], **metadata}
    return http.post(f"{base}/oauth/register/", json=body)


def registered(http: httpx.Client, base: str, **metadata) -> dict:
    response = register(http, base, **metadata)
    assert response.status_code == 201, response.text
    return response.json()


def refused(response: httpx.Response, status: int, error: str, words: str = "") -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error and words in body.get("error_description", ""), body
    return body


def applications() -> set[str]:
    from oauth2_provider.models import Application

    return set(Application.objects.values_list("client_id", flat=True))


# 1. Tokens with no user ---------------------------------------------------------------------------
def test_open_registration_hands_out_no_grant_without_a_user(deployment):
    first, second = deployment
    with sending_from("127.0.0.11") as http:
        for base in (first, second):
            answer = register(http, base, grant_types=["client_credentials"], redirect_uris=[],
                              token_endpoint_auth_method="client_secret_post")
            refused(answer, 400, "invalid_client_metadata", "client_credentials")
    assert applications() == set()


# 2. A slow client metadata document ----------------------------------------------------------------
def test_a_dripping_metadata_document_is_given_up_within_the_fetch_timeout_for_its_whole_host(
        deployment, documents):
    """The document comes one byte at a time, each well within any per-read timeout: the fetch is
    cut at CIMD_FETCH_TIMEOUT all the same, and the host is then backed off whatever the query
    string, while a document of another host is fetched as ever."""
    first, second = deployment
    slow = documents.url("/slow/client.json", host="localhost")
    drip = documents.drip("/slow/client.json", {"client_id": slow, "client_name": "Slow", "redirect_uris": [
        REDIRECT_URI], "padding": "x" * 400}, interval=0.1, give_up_after=int(PATIENCE / 0.1))

    def token_request(http: httpx.Client, base: str, client_id: str) -> httpx.Response:
        return http.post(f"{base}/oauth/token/", data={
            "grant_type": "authorization_code", "code": "nothing", "client_id": client_id,
            "redirect_uri": REDIRECT_URI, "code_verifier": PKCE.new().verifier})

    with sending_from("127.0.0.12") as http:
        answer = token_request(http, first, slow)
        assert answer.status_code in (400, 401), answer.text
        # Answered because the fetch was cut short: the server hears the hang-up mid-document.
        wait_until(drip.hung_up.is_set, what="the fetcher to hang up on the dripping document")
        assert not drip.finished.is_set() and drip.sent < len(drip.body)
        # The same host with another query string, on either process: not fetched again.
        for base, query in ((first, "?v=2"), (second, "?v=3")):
            assert token_request(http, base, slow + query).status_code in (400, 401)
        assert drip.hits == 1

        good = documents.url("/clients/fine.json")
        documents.publish("/clients/fine.json", {
            "client_id": good, "client_name": "Fine", "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"})
        assert token_request(http, second, good).status_code == 400  # known client, unknown code
    assert documents.hits["/clients/fine.json"] == 1 and applications() == {good}


# 3. Forced consent --------------------------------------------------------------------------------
def test_a_client_cannot_skip_the_consent_the_server_forces(deployment):
    """A user approved the client once and it holds a live token: an authorization request saying
    ``approval_prompt=auto`` still gets the consent page, not a code."""
    first, second = deployment
    create_user()
    agent = ConsentAgent(first)
    try:
        with sending_from("127.0.0.13") as http:
            client_id = registered(http, first)["client_id"]
            pkce = PKCE.new()
            query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
                     "state": "s1", "scope": "mcp", "code_challenge": pkce.challenge,
                     "code_challenge_method": "S256", "resource": f"{first}/mcp"}
            code = agent.authorize(f"{first}/oauth/authorize/?{urlencode(query)}")["code"]
            issued = http.post(f"{second}/oauth/token/", data={
                "grant_type": "authorization_code", "code": code, "client_id": client_id,
                "redirect_uri": REDIRECT_URI, "code_verifier": pkce.verifier, "resource": f"{first}/mcp"})
            assert issued.status_code == 200, issued.text

        for base in (first, second):
            again = PKCE.new()
            skipping = {**query, "redirect_uri": "http://127.0.0.1:9999/callback", "approval_prompt": "auto",
                        "code_challenge": again.challenge, "state": "s2"}
            page = agent.http.get(f"{base}/oauth/authorize/?{urlencode(skipping)}")
            assert page.status_code == 200, (page.status_code, page.headers.get("location"))
            assert form_fields(page.text, "consent-form")["client_id"] == client_id
    finally:
        agent.close()


# 4. Registration ----------------------------------------------------------------------------------
def test_registrations_are_limited_per_client_address_across_processes(deployment):
    first, second = deployment
    with sending_from("127.0.0.14") as http:
        for index in range(REGISTRATIONS):
            registered(http, (first, second)[index % 2])
        for base in (first, second):
            answer = register(http, base)
            refused(answer, 429, "temporarily_unavailable", "registrations")
            assert int(answer.headers["retry-after"]) >= 1
    with sending_from("127.0.0.15") as http:
        registered(http, second)
    assert len(applications()) == REGISTRATIONS + 1


def test_a_public_client_gets_no_secret_and_a_confidential_one_a_hashed_one(deployment):
    from oauth2_provider.models import Application

    first, _second = deployment
    with sending_from("127.0.0.16") as http:
        public = registered(http, first)
        confidential = registered(http, first, token_endpoint_auth_method="client_secret_basic")
    assert "client_secret" not in public
    assert Application.objects.get(client_id=public["client_id"]).client_secret == ""
    stored = Application.objects.get(client_id=confidential["client_id"]).client_secret
    assert stored.startswith("pbkdf2_") and stored != confidential["client_secret"]


def deep(levels: int) -> bytes:
    return b'{"client_name": "x", "redirect_uris": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize(("address", "body", "error", "words"), [
    ("127.0.0.21", '{"client_name": "a\\u0000b", "redirect_uris": ["' + REDIRECT_URI + '"]}',
     "invalid_client_metadata", "NUL"),
    ("127.0.0.22", '{"client_name": "\\ud800", "redirect_uris": ["' + REDIRECT_URI + '"]}',
     "invalid_client_metadata", "surrogate"),
    ("127.0.0.23", deep(30_000), "invalid_client_metadata", "objects and arrays"),
    ("127.0.0.29", deep(20), "invalid_client_metadata", "nested deeper than 10 levels"),
    ("127.0.0.24", {"redirect_uris": [f"http://127.0.0.1:{port}/cb" for port in range(200)]},
     "invalid_redirect_uri", f"at most {MAX_REDIRECT_URIS}"),
    ("127.0.0.25", {"redirect_uris": ["https://app.example.com/" + "x" * 5000]},
     "invalid_redirect_uri", f"longer than {MAX_REDIRECT_URI_LENGTH}"),
    ("127.0.0.26", {"redirect_uris": [REDIRECT_URI], "software_id": "x" * (2 * MAX_REGISTRATION_BYTES)},
     "invalid_client_metadata", f"larger than {MAX_REGISTRATION_BYTES} bytes"),
    ("127.0.0.27", {"redirect_uris": [REDIRECT_URI + " https://app.example.com/cb"]},
     "invalid_redirect_uri", "whitespace"),
    ("127.0.0.28", {"client_name": "x" * 300, "redirect_uris": [REDIRECT_URI]},
     "invalid_client_metadata", "client_name"),
])
def test_bad_registrations_get_400_and_store_nothing(deployment, address, body, error, words):
    first, _second = deployment
    if isinstance(body, dict):
        body = json.dumps({"client_name": "x", "token_endpoint_auth_method": "none", **body})
    with sending_from(address) as http:
        answer = http.post(f"{first}/oauth/register/", content=body,
                           headers={"content-type": "application/json"})
    refused(answer, 400, error, words)
    assert applications() == set()


# 5. Guessing passwords and client secrets -----------------------------------------------------------
def log_in(http: httpx.Client, base: str, username: str, password: str) -> httpx.Response:
    page = http.get(f"{base}/oauth/login/")
    fields = form_fields(page.text, "login-form")
    return http.post(f"{base}/oauth/login/", data={**fields, "username": username, "password": password})


def test_wrong_passwords_are_throttled_per_account_and_address_across_processes(deployment):
    from django.contrib.auth.models import User

    first, second = deployment
    create_user()
    User.objects.create_user("other", password=PASSWORD)
    with sending_from("127.0.0.31") as http:
        for index in range(LOGIN_FAILURES):
            wrong = log_in(http, (first, second)[index % 2], USERNAME, "not the password")
            assert wrong.status_code == 200 and "sessionid" not in http.cookies
        for base in (first, second):  # now even the right password is refused, on either process
            throttled = log_in(http, base, USERNAME, PASSWORD)
            assert throttled.status_code == 429 and "sessionid" not in http.cookies
            assert int(throttled.headers["retry-after"]) >= 1 and "Too many" in throttled.text
        assert log_in(http, second, "other", PASSWORD).status_code == 302  # another account
    with sending_from("127.0.0.32") as http:
        assert log_in(http, first, USERNAME, PASSWORD).status_code == 302  # another address


def test_wrong_client_secrets_are_throttled_per_client_and_address_across_processes(deployment):
    first, second = deployment
    with sending_from("127.0.0.33") as http:
        client = registered(http, first, token_endpoint_auth_method="client_secret_basic")
    right, wrong = (client["client_id"], client["client_secret"]), (client["client_id"], "guess")

    def token(http: httpx.Client, base: str, credentials: tuple[str, str]) -> httpx.Response:
        return http.post(f"{base}/oauth/token/", auth=credentials, data={
            "grant_type": "authorization_code", "code": "nothing", "redirect_uri": REDIRECT_URI,
            "code_verifier": PKCE.new().verifier})

    with sending_from("127.0.0.34") as http:
        for index in range(SECRET_FAILURES):
            refused(token(http, (first, second)[index % 2], wrong), 401, "invalid_client")
        for base in (first, second):
            answer = token(http, base, right)
            refused(answer, 429, "invalid_client", "failed")
            assert int(answer.headers["retry-after"]) >= 1
        revoked = http.post(f"{second}/oauth/revoke/", auth=right, data={"token": "anything"})
        assert revoked.status_code == 429
    with sending_from("127.0.0.35") as http:
        refused(token(http, second, right), 400, "invalid_grant")  # authenticated: only the code is bad


# 1, the protected demo: a deployment that allows tokens with no user ----------------------------
@pytest.fixture(scope="module")
def userless_demo(django_db_setup, django_db_blocker):
    """The protected demo, letting dynamically registered clients use client_credentials, with
    two sessions per principal."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = {"MAX_SESSIONS_PER_PRINCIPAL": 2, "AUTHORIZATION_SERVER": {
        "ISSUER": base, "RESOURCE": f"{base}/mcp", "DYNAMIC_CLIENT_CREDENTIALS": True}}
    with django_db_blocker.unblock():
        server = DaphneServer(port=port, mcp_settings=settings,
                              env={"MCP_PROTECTED": "1", "MCP_PUBLIC_URL": base})
    try:
        yield base
    finally:
        server.stop()


def machine_token(http: httpx.Client, base: str) -> str:
    client = registered(http, base, grant_types=["client_credentials"], redirect_uris=[],
                        token_endpoint_auth_method="client_secret_post")
    issued = http.post(f"{base}/oauth/token/", data={
        "grant_type": "client_credentials", "client_id": client["client_id"],
        "client_secret": client["client_secret"], "resource": f"{base}/mcp"})
    assert issued.status_code == 200, issued.text
    return issued.json()["access_token"]


def post_mcp(base: str, token: str, message: dict, session_id: str | None = None) -> httpx.Response:
    headers = {"accept": ACCEPT_BOTH, "authorization": f"Bearer {token}"}
    if session_id is not None:
        headers.update({"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"})
    return httpx.post(f"{base}/mcp", json=message, headers=headers, timeout=PATIENCE)


def initialize(base: str, token: str) -> httpx.Response:
    params = {"protocolVersion": "2025-11-25", "capabilities": {},
              "clientInfo": {"name": "machine", "version": "1"}}
    return post_mcp(base, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})


def test_userless_tokens_of_clients_registered_from_one_address_share_one_fair_share(userless_demo):
    """Each registration used to be a new principal with sessions of its own: now the tokens of
    every client registered from one address count together, while each session stays its own
    client's."""
    base = userless_demo
    with sending_from("127.0.0.41") as http:
        first, second = machine_token(http, base), machine_token(http, base)
    with sending_from("127.0.0.42") as http:
        elsewhere = machine_token(http, base)

    sessions = []
    for _ in range(2):
        opened = initialize(base, first)
        assert opened.status_code == 200, opened.text
        sessions.append(opened.headers["mcp-session-id"])
    listed = post_mcp(base, first, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sessions[0])
    assert listed.status_code == 200 and "tools" in listed.text  # the token is a real credential

    crowded = initialize(base, second)  # a new registration from the same address: no new share
    assert crowded.status_code == 429, crowded.text
    assert initialize(base, elsewhere).status_code == 200  # registered from another address
    # A session is still bound to the client whose token opened it.
    stolen = post_mcp(base, second, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, sessions[0])
    assert stolen.status_code == 403, stolen.text
