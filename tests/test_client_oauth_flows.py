"""The OAuth flows of mcp_client end to end, against a small authorization server and a protected
MCP server on loopback (tests/oauth_support.py). Each test checks what went over the wire."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcp_client import (
    AsyncClient,
    AuthorizationError,
    Client,
    ClientCredentialsProvider,
    CrossAppAccessProvider,
    DiscoveryError,
    ForbiddenError,
    HTTPTransport,
    IDJAGTokenExchange,
    InMemoryTokenStorage,
    InsecureURL,
    OAuthError,
    Provider,
    RegistrationError,
    TokenError,
    WorkloadIdentityProvider,
)

from .oauth_support import Answer, Browser, LoopbackServer, Recorder, World

REDIRECT_URI = "http://127.0.0.1:8765/callback"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"


@pytest.fixture
def world():
    world = World()
    yield world
    world.close()


@pytest.fixture
def elsewhere():
    server = LoopbackServer()
    yield server
    server.close()


def code_provider(browser: Browser, **options: object) -> Provider:
    return Provider(client_metadata={"client_name": "tests", "redirect_uris": [REDIRECT_URI]},
                    redirect_handler=browser.redirect, callback_handler=browser.callback, **options)


async def connect(world: World, oauth: object) -> AsyncClient:
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=oauth))
    await client.connect(mode="legacy")  # the fake MCP server speaks the handshake era
    return client


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@pytest.mark.feature("OAUTH-01", "OAUTH-02", "OAUTH-04", "OAUTH-07", "OAUTH-10", "OAUTH-11", "OAUTH-12",
                     "OAUTH-14", "OAUTH-15", "OAUTH-17", "OAUTH-22", "OAUTH-23", "CHTTP-01", "CHTTP-07")
async def test_the_first_connect_on_a_401_server_completes_after_authorization(world):
    browser, storage = Browser(), InMemoryTokenStorage()
    client = await connect(world, code_provider(browser, storage=storage))
    assert [t.name for t in await client.tools()] == ["echo"]
    await client.close()
    assert world.server.paths() == [
        "POST /mcp",                                               # 401
        f"GET {PRM_PATH}",                                         # the challenge's resource_metadata
        "GET /.well-known/oauth-authorization-server",
        "POST /register",
        "GET /authorize",
        "POST /token",
        "POST /mcp",                                               # initialize again, with the token
        "POST /mcp", "POST /mcp",                                  # initialized, tools/list
    ]
    first, *_ = world.server.hits
    assert "authorization" not in first.headers
    registration = world.server.of("POST", "/register")[0].json
    assert "client_id" not in registration
    assert registration["redirect_uris"] == [REDIRECT_URI]
    assert registration["grant_types"] == ["authorization_code", "refresh_token"]
    assert registration["response_types"] == ["code"]
    assert registration["token_endpoint_auth_method"] == "none"
    assert registration["application_type"] == "native"
    asked = world.server.of("GET", "/authorize")[0].query
    assert asked["response_type"] == "code" and asked["client_id"] == "client-1"
    assert asked["redirect_uri"] == REDIRECT_URI and asked["code_challenge_method"] == "S256"
    assert asked["resource"] == world.mcp_url and len(asked["state"]) >= 43
    assert "scope" not in asked  # no challenge scope, no scopes_supported, none configured
    exchange = world.server.of("POST", "/token")[0].form
    assert exchange["grant_type"] == "authorization_code" and exchange["code"] == "code-0"
    assert s256(exchange["code_verifier"]) == asked["code_challenge"]
    assert exchange["redirect_uri"] == REDIRECT_URI and exchange["resource"] == world.mcp_url
    assert exchange["client_id"] == "client-1"  # method none: the id in the body, no secret
    for hit in world.server.of("POST", "/mcp")[1:]:
        assert hit.headers["authorization"] == "Bearer at-1"
    tokens = await storage.tokens()
    assert tokens["access_token"] == "at-1" and tokens["refresh_token"] == "rt-1"
    assert tokens["issuer"] == world.issuer
    assert (await storage.client_information())["issuer"] == world.issuer


@pytest.mark.feature("OAUTH-02")
async def test_a_second_401_raises_without_a_loop(world):
    world.server.routes[("POST", "/mcp")] = lambda hit: Answer(
        401, {"error": "invalid_token"}, {"www-authenticate": world.challenge_header()})
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(OAuthError, match="still answers 401"):
        await client.connect()
    assert len(world.server.of("POST", "/mcp")) == 2
    assert len(world.server.of("GET", "/authorize")) == 1
    assert len(world.server.of("POST", "/token")) == 1


@pytest.mark.feature("OAUTH-18")
async def test_refresh_comes_first_and_invalid_grant_falls_back_to_authorization(world):
    storage, browser = InMemoryTokenStorage(), Browser()
    world.rotate_refresh = False
    client = await connect(world, code_provider(browser, storage=storage))
    world.valid.clear()  # the server forgets the access token
    await client.tools()
    refresh = world.server.of("POST", "/token")[1].form
    assert refresh == {"grant_type": "refresh_token", "refresh_token": "rt-1", "resource": world.mcp_url,
                       "client_id": "client-1"}
    assert len(world.server.of("GET", "/authorize")) == 1  # no second authorization
    tokens = await storage.tokens()
    assert tokens["access_token"] == "at-2" and tokens["refresh_token"] == "rt-1"  # kept: not rotated
    world.valid.clear()
    world.refresh.clear()  # now the refresh token is refused: invalid_grant
    await client.tools()
    assert [h.form["grant_type"] for h in world.server.of("POST", "/token")] == [
        "authorization_code", "refresh_token", "refresh_token", "authorization_code"]
    assert len(world.server.of("GET", "/authorize")) == 2
    assert (await storage.tokens())["access_token"] == "at-3"
    # A 5xx keeps the refresh token: the full flow runs (here the user gives up), and a later 401
    # refreshes with it.
    world.valid.clear()
    token_endpoint = world.server.routes[("POST", "/token")]
    world.server.routes[("POST", "/token")] = lambda hit: Answer(503, "down")
    browser.tamper = lambda answer: (None, answer[1])
    with pytest.raises(AuthorizationError):
        await client.tools()
    assert (await storage.tokens())["refresh_token"] == "rt-3"
    world.server.routes[("POST", "/token")] = token_endpoint
    await client.tools()
    assert world.server.of("POST", "/token")[-1].form["refresh_token"] == "rt-3"
    await client.close()


@pytest.mark.feature("OAUTH-02")
async def test_concurrent_401s_run_the_flow_once(world):
    client = await connect(world, code_provider(Browser()))
    world.valid.clear()
    await asyncio.gather(client.tools(), client.tools(), client.tools())
    assert [h.form["grant_type"] for h in world.server.of("POST", "/token")] == [
        "authorization_code", "refresh_token"]
    await client.close()


@pytest.mark.feature("OAUTH-19", "OAUTH-20")
async def test_step_up_on_403_insufficient_scope_and_a_plain_403_unchanged(world):
    world.prm["scopes_supported"] = ["files:read"]
    world.required["tools/call"] = {"files:read", "files:write"}
    client = await connect(world, code_provider(Browser()))
    assert (await client.call_tool("echo")).text == "ok"
    scopes = [h.query.get("scope") for h in world.server.of("GET", "/authorize")]
    assert scopes == ["files:read", "files:read files:write"]  # the union of granted and challenged
    calls = [h for h in world.server.of("POST", "/mcp") if h.json.get("method") == "tools/call"]
    assert [c.headers["authorization"] for c in calls] == ["Bearer at-1", "Bearer at-2"]
    # A 403 without insufficient_scope is the caller's, untouched; and a step-up happens once.
    world.server.routes[("POST", "/mcp")] = lambda hit: Answer(403, {"error": "forbidden"})
    with pytest.raises(ForbiddenError):
        await client.tools()
    assert len(world.server.of("GET", "/authorize")) == 2
    await client.close()


@pytest.mark.feature("OAUTH-09")
async def test_legacy_fallback_without_any_metadata(world):
    del world.server.routes[("GET", PRM_PATH)]
    del world.server.routes[("GET", "/.well-known/oauth-authorization-server")]
    world.challenge_header = lambda **params: "Bearer"
    client = await connect(world, code_provider(Browser()))
    await client.close()
    assert world.server.paths()[:7] == [
        "POST /mcp", f"GET {PRM_PATH}", "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-authorization-server", "POST /register", "GET /authorize", "POST /token"]


@pytest.mark.feature("OAUTH-06", "OAUTH-14", "OAUTH-17")
async def test_the_resource_parameter_is_the_prm_resource_as_published(world):
    world.prm["resource"] = world.server.base  # the origin: it covers /mcp
    client = await connect(world, code_provider(Browser()))
    await client.close()
    assert world.server.of("GET", "/authorize")[0].query["resource"] == world.prm["resource"]
    assert world.server.of("POST", "/token")[0].form["resource"] == world.prm["resource"]


@pytest.mark.feature("OAUTH-13")
async def test_a_client_id_metadata_document_url_replaces_registration(world):
    world.metadata["client_id_metadata_document_supported"] = True
    world.metadata["authorization_endpoint"] += "?tenant=a"  # kept, the flow's parameters added
    cimd = "https://app.example/oauth/client.json"
    client = await connect(world, code_provider(Browser(), client_id_metadata_document_url=cimd))
    await client.close()
    assert not world.server.of("POST", "/register")
    asked = world.server.of("GET", "/authorize")[0]
    assert asked.query["client_id"] == cimd and asked.query["tenant"] == "a"
    assert world.server.of("POST", "/token")[0].form["client_id"] == cimd


@pytest.mark.feature("OAUTH-22")
async def test_a_registration_of_another_issuer_is_discarded(world):
    stale = {"client_id": "old-client", "client_secret": "old", "issuer": "https://old-as.example"}
    storage = InMemoryTokenStorage({"access_token": "old-token", "issuer": "https://old-as.example"}, stale)
    client = await connect(world, code_provider(Browser(), storage=storage))
    await client.close()
    assert world.server.of("POST", "/mcp")[0].headers["authorization"] == "Bearer old-token"
    assert len(world.server.of("POST", "/register")) == 1
    assert world.server.of("GET", "/authorize")[0].query["client_id"] == "client-1"
    assert (await storage.client_information())["client_id"] == "client-1"


@pytest.mark.feature("OAUTH-15", "OAUTH-16")
async def test_a_wrong_state_or_issuer_in_the_redirect_back_is_refused(world):
    attempts = {
        "state": (lambda answer: (answer[0], "forged", None), "state"),
        "code": (lambda answer: (None, answer[1]), "without a code"),
        "iss": (lambda answer: (answer[0], answer[1], "https://other-as.example"), "issuer"),
    }
    for tamper, message in attempts.values():
        client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser(tamper))))
        with pytest.raises(AuthorizationError, match=message):
            await client.connect()
    world.metadata["authorization_response_iss_parameter_supported"] = True
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))  # no iss back
    with pytest.raises(AuthorizationError, match="promises an iss"):
        await client.connect()
    assert not world.server.of("POST", "/token")
    world.server.hits.clear()
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(
        Browser(lambda answer: (answer[0], answer[1], world.issuer)))))
    await client.connect()
    await client.close()
    assert len(world.server.of("POST", "/token")) == 1


@pytest.mark.feature("OAUTH-11", "OAUTH-17")
def test_a_pre_registered_client_without_registration_endpoint_and_the_blocking_client(world):
    del world.metadata["registration_endpoint"]
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    browser = Browser()
    client = Client(HTTPTransport(world.mcp_url, oauth=code_provider(browser)))
    with pytest.raises(RegistrationError, match="no dynamic client registration"):
        client.connect()
    client.shutdown()
    preregistered = code_provider(browser, client_information={"client_id": "pre", "client_secret": "s"})
    with Client(HTTPTransport(world.mcp_url, oauth=preregistered)) as client:  # handlers run on its loop
        assert [t.name for t in client.tools()] == ["echo"]
    exchange = world.server.of("POST", "/token")[0]
    assert exchange.headers["authorization"] == "Basic " + base64.b64encode(b"pre:s").decode()
    assert "client_secret" not in exchange.form and not world.server.of("POST", "/register")
    assert world.server.of("GET", "/authorize")[0].query["client_id"] == "pre"


@pytest.mark.feature("OAUTH-30", "OAUTH-31")
async def test_client_credentials_basic_post_and_private_key_jwt(world):
    client = await connect(world, ClientCredentialsProvider(client_id="svc", client_secret="p@ss:word"))
    await client.close()
    request = world.server.of("POST", "/token")[0]
    assert request.form == {"grant_type": "client_credentials", "resource": world.mcp_url}
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"svc:p%40ss%3Aword").decode()
    assert not world.server.of("GET", "/authorize") and not world.server.of("POST", "/register")

    client = await connect(world, ClientCredentialsProvider(
        client_id="svc", client_secret="s", token_endpoint_auth_method="client_secret_post", scope="a"))
    await client.close()
    request = world.server.of("POST", "/token")[1]
    assert "authorization" not in request.headers
    assert request.form == {"grant_type": "client_credentials", "resource": world.mcp_url, "scope": "a",
                            "client_id": "svc", "client_secret": "s"}

    for algorithm, key in (("ES256", ec.generate_private_key(ec.SECP256R1())),
                           ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))):
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        storage = InMemoryTokenStorage()
        client = await connect(world, ClientCredentialsProvider(client_id="svc", private_key=pem,
                                                                signing_algorithm=algorithm, storage=storage))
        await client.close()
        form = world.server.of("POST", "/token")[-1].form
        assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        assert "client_secret" not in form
        header = jwt.get_unverified_header(form["client_assertion"])
        assert header == {"alg": algorithm, "typ": "JWT"}
        claims = jwt.decode(form["client_assertion"], key.public_key(), algorithms=[algorithm],
                            audience=world.issuer)
        assert claims["iss"] == claims["sub"] == "svc" and claims["exp"] - claims["iat"] == 300
        assert claims["jti"]
        assert "BEGIN" not in json.dumps([await storage.tokens(), await storage.client_information()])


@pytest.mark.feature("OAUTH-32", "OAUTH-33")
async def test_cross_app_access_exchanges_an_id_token_for_an_id_jag(world, elsewhere):
    def idp_token(hit):
        return Answer(body={"access_token": "the-id-jag", "token_type": "N_A",
                            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})
    elsewhere.routes[("POST", "/token")] = idp_token
    exchange = IDJAGTokenExchange(token_endpoint=elsewhere.url("/token"), client_id="idp-client",
                                  id_token="the-id-token")
    client = await connect(world, CrossAppAccessProvider(client_id="app", client_secret="secret",
                                                         assertion_provider=exchange))
    await client.close()
    assert elsewhere.of("POST", "/token")[0].form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": "the-id-token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag", "audience": world.issuer,
        "resource": world.mcp_url, "client_id": "idp-client"}
    grant = world.server.of("POST", "/token")[0]
    assert grant.form == {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                          "assertion": "the-id-jag", "resource": world.mcp_url}
    assert grant.headers["authorization"] == "Basic " + base64.b64encode(b"app:secret").decode()


@pytest.mark.feature("OAUTH-34")
async def test_a_workload_jwt_is_the_grant_and_a_refusal_is_not_retried(world):
    audiences = []

    def workload_jwt(*, audience, resource):
        audiences.append((audience, resource))
        return "workload.jwt.value"
    client = await connect(world, WorkloadIdentityProvider(assertion_provider=workload_jwt, client_id="wl"))
    await client.close()
    assert audiences == [(world.issuer, world.mcp_url)]
    assert world.server.of("POST", "/token")[0].form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "workload.jwt.value",
        "resource": world.mcp_url, "client_id": "wl"}
    world.valid.clear()
    world.server.routes[("POST", "/token")] = lambda hit: Answer(400, {"error": "invalid_grant"})
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=WorkloadIdentityProvider(
        assertion_provider=workload_jwt)))
    with pytest.raises(TokenError, match="invalid_grant") as refused:
        await client.connect()
    assert refused.value.error == "invalid_grant"
    assert len(world.server.of("POST", "/token")) == 2  # one each: no retry, no other grant


# Hostile servers: each gets a clear error, and no request goes to the bad URL -----------------------
@pytest.mark.feature("OAUTH-26")
async def test_a_prm_pointing_at_a_private_address_is_refused(world):
    for address in ("https://10.0.0.7", "https://169.254.169.254", "https://[fd00::1]", "https://0x0a000001"):
        world.prm["authorization_servers"] = [address]
        recorder = Recorder()
        client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(
            Browser(), http_client_factory=recorder)))
        with pytest.raises(InsecureURL, match="refused"):
            await client.connect()
        assert recorder.urls == [world.server.url(PRM_PATH)]


@pytest.mark.feature("OAUTH-08")
async def test_metadata_whose_issuer_does_not_match_is_refused(world, elsewhere):
    world.metadata["issuer"] = world.issuer + "/"  # one byte off
    world.metadata["authorization_endpoint"] = elsewhere.url("/authorize")
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(DiscoveryError, match="says issuer"):
        await client.connect()
    assert world.server.paths() == ["POST /mcp", f"GET {PRM_PATH}",
                                    "GET /.well-known/oauth-authorization-server"]
    assert not elsewhere.hits


@pytest.mark.feature("OAUTH-28")
async def test_a_token_endpoint_that_redirects_is_not_followed(world, elsewhere):
    world.server.routes[("POST", "/token")] = lambda hit: Answer(
        307, headers={"location": elsewhere.url("/token")})
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(TokenError, match="redirect"):
        await client.connect()
    assert len(world.server.of("POST", "/token")) == 1
    assert not elsewhere.hits


@pytest.mark.feature("OAUTH-29")
async def test_a_ten_mib_metadata_document_is_refused(world):
    huge = json.dumps({**world.metadata, "padding": "x" * (10 * 1024 * 1024)})
    world.server.routes[("GET", "/.well-known/oauth-authorization-server")] = lambda hit: Answer(
        body=huge, headers={"content-type": "application/json"})
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(OAuthError, match="4194304"):
        await client.connect()
    assert world.server.paths()[-1] == "GET /.well-known/oauth-authorization-server"
    assert not world.server.of("POST", "/register")


@pytest.mark.feature("OAUTH-05")
async def test_a_resource_metadata_on_another_origin_is_refused(world, elsewhere):
    elsewhere.routes[("GET", "/prm")] = lambda hit: Answer(body=world.prm)
    world.challenge_header = lambda **params: f'Bearer resource_metadata="{elsewhere.url("/prm")}"'
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(InsecureURL, match="another origin"):
        await client.connect()
    assert world.server.paths() == ["POST /mcp"]
    assert not elsewhere.hits


@pytest.mark.feature("OAUTH-06")
async def test_a_prm_for_another_resource_is_refused(world):
    world.prm["resource"] = "https://evil.example.com/mcp"
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=code_provider(Browser())))
    with pytest.raises(DiscoveryError, match="not for this MCP server"):
        await client.connect()
    assert world.server.paths() == ["POST /mcp", f"GET {PRM_PATH}"]


@pytest.mark.feature("OAUTH-27")
async def test_the_token_goes_only_to_the_bound_server_url(world):
    oauth = code_provider(Browser())
    client = await connect(world, oauth)
    tampered = world.server.url("/mcp?steal=1")
    with pytest.raises(InsecureURL, match="not to the MCP server"):
        await client.transport._http.post(tampered, json={})
    assert not any(h.query for h in world.server.of("POST", "/mcp"))
    with pytest.raises(ValueError, match="bound to"):
        HTTPTransport(world.server.url("/other"), oauth=oauth)
    await client.close()
    # A customizer's hook that rewrites the URL (query only) is caught after it, before sending.
    async def rewrite(request):
        request.url = request.url.copy_with(query=b"steal=1")

    factory = lambda: httpx.AsyncClient(event_hooks={"request": [rewrite]})  # noqa: E731
    client = AsyncClient(HTTPTransport(world.mcp_url, oauth=oauth, http_client_factory=factory))
    with pytest.raises(InsecureURL, match="not to the MCP server"):
        await client.connect()
    assert not any(h.query for h in world.server.of("POST", "/mcp"))

