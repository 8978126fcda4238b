"""JWT access tokens on the endpoint (mcp_server.auth.JWTAuthentication), in process: the JWKS
is served on loopback by a real HTTP server, and the keys are made here. Every refusal is a 401
with a Bearer challenge and a JSON-RPC error carrying the request's id."""

from __future__ import annotations

import json

import jwt
import pytest

from mcp_server import Server, ServerContext
from mcp_server.http import StreamableHTTPTransport

from . import auth_support
from .auth_support import (
    INIT,
    RESOURCE,
    AuthorizationServer,
    Keys,
    bearer,
    call,
    challenge,
    open_session,
    post_json,
    resource_server_from,
    resource_server_settings,
    stateless_app,
    unsigned,
)
from .http_support import call_asgi
from .modern_support import modern_request, post

pytestmark = [pytest.mark.asyncio]
# Requests refused before anything is stored need no database; the others open sessions.
with_database = pytest.mark.django_db(transaction=True)
METADATA = "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
NO_TOKEN = f'Bearer resource_metadata="{METADATA}", scope="mcp:read mcp:write"'
INVALID = f'Bearer error="invalid_token", error_description="The access token is not valid", ' \
          f'resource_metadata="{METADATA}"'


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys("key-1")


@pytest.fixture(scope="module")
def issuer(keys):
    server = AuthorizationServer([keys])
    yield server
    server.close()


def build_server() -> Server:
    server = Server("auth-jwt")

    @server.tool
    def whoami(server_context: ServerContext) -> str:
        """Who the request comes from."""
        principal = server_context.principal
        user = principal.user.get_username() if principal.user is not None else None
        return f"{user}|{principal.client_id}|{' '.join(sorted(principal.scopes))}|{principal.method}"

    @server.tool(required_scopes=["mcp:write"])
    def write(server_context: ServerContext) -> str:
        """Needs mcp:write."""
        return "written"

    return server


async def served(settings: dict):
    with resource_server_from(settings) as resource_server:
        transport = StreamableHTTPTransport(build_server(), enable_json_response=True,
                                            resource_server=resource_server)
        yield transport.as_asgi()
        await transport.close()


@pytest.fixture
async def app(issuer, short_lived_connections):
    async for served_app in served(resource_server_settings(issuer)):
        yield served_app


@pytest.fixture
async def app_with_users(issuer, short_lived_connections):
    """Tokens name Django users: USER_RESOLVER looks the subject up with the ORM."""
    settings = resource_server_settings(
        issuer, RESOURCE_SERVER={"USER_RESOLVER": "tests.auth_support.user_of_subject"})
    async for served_app in served(settings):
        yield served_app


def text_of(body: dict) -> str:
    return body["result"]["content"][0]["text"]


async def call_whoami(app, token_headers: dict) -> tuple:
    session = await open_session(app, token_headers)
    return await post_json(app, call("whoami", 7), token_headers, session)


@with_database
async def test_a_valid_token_names_the_principal_seen_by_tools_with_the_user_resolved_off_the_loop(
        app_with_users, keys):
    app = app_with_users
    from django.contrib.auth import get_user_model

    from mcp_server.invoke import run_in_thread

    await run_in_thread(get_user_model().objects.create_user, "alice")
    auth_support.resolver_threads.clear()
    raw, body = await call_whoami(app, bearer(keys.mint(scope="mcp:read mcp:write")))
    assert raw.start["status"] == 200
    assert text_of(body) == "alice|client-1|mcp:read mcp:write|jwt"
    # USER_RESOLVER is a plain def with an ORM query: it ran on worker threads, never the loop's.
    import threading

    assert auth_support.resolver_threads and threading.main_thread().name not in auth_support.resolver_threads


async def test_no_token_gets_401_with_the_metadata_and_scopes_and_the_request_id(app):
    raw, body = await post_json(app, {**INIT, "id": "init-1"})
    assert raw.start["status"] == 401
    assert challenge(raw) == f'Bearer resource_metadata="{METADATA}", scope="mcp:read mcp:write"'
    assert body["id"] == "init-1" and body["error"]["message"] == "Unauthorized"
    # GET and DELETE too, before any session is looked up.
    for verb in ("GET", "DELETE"):
        reply = await call_asgi(app, verb, {"host": "127.0.0.1", "accept": "text/event-stream",
                                            "mcp-session-id": "0" * 32})
        assert reply.start["status"] == 401 and challenge(reply) == NO_TOKEN, verb


async def test_the_bearer_scheme_is_case_insensitive(app, keys):
    for scheme in ("bearer", "BEARER", "Bearer"):
        reply = await post(app, modern_request("tools/list", 1), bearer(keys.mint(sub="nobody"), scheme))
        assert reply.status == 200, scheme


async def test_a_malformed_authorization_header_is_a_bad_request(app):
    raw, body = await post_json(app, INIT, bearer("not a token"))
    assert raw.start["status"] == 400
    assert challenge(raw).startswith('Bearer error="invalid_request"')
    assert body["id"] == 1


async def test_a_malformed_jwt_is_an_invalid_token(app):
    raw, body = await post_json(app, INIT, bearer("abc.def.ghi"))
    assert raw.start["status"] == 401 and challenge(raw) == INVALID
    assert body["id"] == 1 and body["error"]["message"] == "Unauthorized"


def refused_tokens(keys: Keys) -> dict[str, str]:
    good = keys.mint()
    header, payload, signature = good.split(".")
    # Another subject in the signed payload, the signature left as it was.
    tampered = jwt.utils.base64url_encode(
        jwt.utils.base64url_decode(payload).replace(b'"alice"', b'"mallory"')).decode()
    assert tampered != payload
    other = Keys("key-1")  # the same kid, another key: a signature the JWKS does not verify
    return {
        "expired": keys.mint(exp=1_000_000_000, iat=999_999_000),
        "wrong audience": keys.mint(aud="http://127.0.0.1/another-resource"),
        "wrong issuer": keys.mint(iss="http://evil.example"),
        "no expiry": keys.mint(exp=None),
        "tampered": f"{header}.{tampered}.{signature}",
        "alg none": unsigned(),
        "HS256 with the public key": _hs256_with(keys),
        "another key": other.mint(),
        "unknown kid": jwt.encode({"aud": RESOURCE, "exp": 4_000_000_000}, keys.private, algorithm="RS256",
                                  headers={"kid": "nobody"}),
    }


def _hs256_with(keys: Keys) -> str:
    # The classic confusion: the RSA public key used as an HMAC secret (PyJWT refuses to make one
    # with a PEM key, so the token is put together by hand).
    import hashlib
    import hmac

    header = jwt.utils.base64url_encode(b'{"alg":"HS256","typ":"JWT","kid":"key-1"}')
    body = jwt.utils.base64url_encode(
        json.dumps({"sub": "alice", "aud": RESOURCE, "exp": 4_000_000_000}).encode())
    signing_input = header + b"." + body
    signature = hmac.new(keys.public_pem, signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + jwt.utils.base64url_encode(signature)).decode()


async def test_every_bad_token_gets_the_same_invalid_token_challenge(app, keys):
    for what, token in refused_tokens(keys).items():
        raw, body = await post_json(app, INIT, bearer(token))
        assert raw.start["status"] == 401, what
        assert challenge(raw) == INVALID, what
        # Nothing says which check failed.
        assert body["error"]["message"] == "Unauthorized", what


async def test_an_unknown_kid_refetches_the_jwks_at_most_once_per_interval(issuer, keys):
    token = jwt.encode({"aud": RESOURCE, "exp": 4_000_000_000}, keys.private, algorithm="RS256",
                       headers={"kid": "rotated"})
    with resource_server_from(resource_server_settings(issuer)) as resource_server:
        app = stateless_app(resource_server, build_server())
        before = issuer.fetches
        for _ in range(4):
            reply = await post(app, modern_request("tools/list", 1), bearer(token))
            assert reply.status == 401
        # The first fetch, and no other within JWKS_REFETCH_INTERVAL (60 s) however many unknown kids.
        assert issuer.fetches == before + 1


async def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer, keys):
    settings = resource_server_settings(issuer, RESOURCE_SERVER={"JWT": {
        "JWKS_URL": f"{issuer.url}/jwks", "ISSUER": auth_support.ISSUER, "JWKS_REFETCH_INTERVAL": 0}})
    with resource_server_from(settings) as resource_server:
        app = stateless_app(resource_server, build_server())
        assert (await post(app, modern_request("tools/list", 1), bearer(keys.mint()))).status == 200
        rotated = Keys("key-2")
        issuer.keys.append(rotated)
        try:
            reply = await post(app, modern_request("tools/list", 2), bearer(rotated.mint()))
            assert reply.status == 200
        finally:
            issuer.keys.remove(rotated)


async def test_a_token_in_the_query_string_is_refused(app, keys):
    reply = await call_asgi(_with_query(app, f"access_token={keys.mint()}"), "POST",
                            {"host": "127.0.0.1", "content-type": "application/json",
                             "accept": "application/json, text/event-stream"}, [b'{"jsonrpc":"2.0","id":3,'
                                                                                b'"method":"ping"}'])
    assert reply.start["status"] == 400
    assert b'error="invalid_request"' in reply.header(b"www-authenticate")


def _with_query(app, query: str):
    async def wrapped(scope, receive, send):
        await app({**scope, "query_string": query.encode()}, receive, send)

    return wrapped


@with_database
async def test_a_session_stays_with_the_client_and_subject_that_opened_it(app, keys):
    session = await open_session(app, bearer(keys.mint(sub="svc-a")))
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    raw, _ = await post_json(app, ping, bearer(keys.mint(sub="svc-a")), session)
    assert raw.start["status"] == 200
    raw, body = await post_json(app, ping, bearer(keys.mint(sub="svc-b")), session)
    assert raw.start["status"] == 403 and "another client" in body["error"]["message"]
    raw, body = await post_json(app, ping, bearer(keys.mint(sub="svc-a", client_id="client-2")), session)
    assert raw.start["status"] == 403


@with_database
async def test_a_call_lacking_the_tools_scope_gets_403_with_the_scope_to_step_up_to(app, keys):
    token = bearer(keys.mint(scope="mcp:read"))
    session = await open_session(app, token)
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    _raw, body = await post_json(app, listed, token, session)
    assert [tool["name"] for tool in body["result"]["tools"]] == ["whoami"]
    raw, body = await post_json(app, call("write", 3), token, session)
    assert raw.start["status"] == 403
    assert challenge(raw) == 'Bearer error="insufficient_scope", error_description="The access token ' \
        f'lacks a scope this request needs", scope="mcp:write", resource_metadata="{METADATA}"'
    assert body["id"] == 3
    # With the scope (a new token, the same client and subject), the same session calls it.
    token = bearer(keys.mint(scope="mcp:read mcp:write"))
    _raw, body = await post_json(app, listed, token, session)
    assert [tool["name"] for tool in body["result"]["tools"]] == ["whoami", "write"]
    raw, body = await post_json(app, call("write", 3), token, session)
    assert raw.start["status"] == 200 and text_of(body) == "written"


async def test_required_scopes_of_the_endpoint_are_asked_for(issuer, keys, short_lived_connections):
    settings = resource_server_settings(issuer, RESOURCE_SERVER={"REQUIRED_SCOPES": ["mcp:read"]})
    with resource_server_from(settings) as resource_server:
        transport = StreamableHTTPTransport(build_server(), resource_server=resource_server)
        app = transport.as_asgi()
        raw, _ = await post_json(app, INIT)
        assert challenge(raw) == f'Bearer resource_metadata="{METADATA}", scope="mcp:read"'
        raw, body = await post_json(app, INIT, bearer(keys.mint(scope="other")))
        assert raw.start["status"] == 403 and body["id"] == 1
        assert challenge(raw).startswith('Bearer error="insufficient_scope"')
        assert 'scope="mcp:read"' in challenge(raw)
        await transport.close()


# The 2026-07-28 path: the same authentication before anything else.
async def test_the_modern_path_authenticates_the_same_way(app, keys):
    message = modern_request("tools/call", 5, name="whoami", arguments={})
    reply = await post(app, message)
    assert reply.status == 401 and challenge(reply.raw) == \
        f'Bearer resource_metadata="{METADATA}", scope="mcp:read mcp:write"'
    assert reply.error and reply.response["id"] == 5
    reply = await post(app, message, bearer(keys.mint(sub="nobody", scope="mcp:read")))
    assert reply.status == 200 and reply.result["content"][0]["text"] == "None|client-1|mcp:read|jwt"
    reply = await post(app, modern_request("tools/call", 6, name="write", arguments={}),
                       bearer(keys.mint(scope="mcp:read")))
    assert reply.status == 403 and 'scope="mcp:write"' in challenge(reply.raw)
    reply = await post(app, modern_request("tools/list", 7), bearer(keys.mint(scope="mcp:read")))
    assert [tool["name"] for tool in reply.result["tools"]] == ["whoami"]


async def test_a_jwks_that_cannot_be_fetched_is_a_503_tried_again_after_a_pause(issuer, keys):
    settings = resource_server_settings(issuer, RESOURCE_SERVER={"JWT": {
        "JWKS_URL": "http://127.0.0.1:1/jwks", "ISSUER": auth_support.ISSUER, "TIMEOUT": 2}})
    with resource_server_from(settings) as resource_server:
        app = stateless_app(resource_server, build_server())
        for number in range(3):
            reply = await post(app, modern_request("tools/list", number), bearer(keys.mint()))
            assert reply.status == 503 and reply.raw.header(b"www-authenticate") is None
        # One try, not one per request: the others came within FAILED_FETCH_PAUSE.
        assert resource_server.authenticators[0].keys.fetches == 1
