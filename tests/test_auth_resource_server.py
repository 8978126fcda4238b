"""The endpoint as an OAuth resource server: its Protected Resource Metadata (RFC 9728), token
introspection (RFC 7662), DRF classes as they are, plain-def classes on worker threads, the
settings, and the default (the session cookie alone) left as it was."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_server import Server, ServerContext, site
from mcp_server.asgi import protected_resource_metadata_app, session_auth
from mcp_server.auth import ResourceServer
from mcp_server.checks import check_authentication, check_jwt_issuer
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread

from .auth_support import (
    ISSUER,
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
)
from .http_support import ASGIReply, call_asgi, log_in
from .modern_support import modern_request, post

with_database = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def issuer():
    server = AuthorizationServer([Keys("key-1")])
    yield server
    server.close()


def build_server() -> Server:
    server = Server("auth-rs")

    @server.tool
    def whoami(server_context: ServerContext) -> str:
        """Who the request comes from."""
        principal = server_context.principal
        if principal is None:
            return "anonymous"
        user = principal.user.get_username() if principal.user is not None else None
        return f"{user}|{principal.client_id}|{' '.join(sorted(principal.scopes))}|{principal.method}|" \
               f"{server_context.session.user_id == getattr(principal.user, 'pk', None)}"

    return server


def text_of(reply) -> str:
    return reply.result["content"][0]["text"]


# Protected Resource Metadata -------------------------------------------------------------------
async def get_metadata(path: str, host: str = "127.0.0.1", method: str = "GET") -> ASGIReply:
    app = protected_resource_metadata_app()

    async def at_path(scope, receive, send):
        await app({**scope, "path": path, "raw_path": path.encode()}, receive, send)

    return await call_asgi(at_path, method, {"host": host})


@pytest.mark.asyncio
async def test_the_metadata_document_names_the_resource_its_servers_and_scopes(issuer):
    with override_settings(MCP_SERVER=resource_server_settings(issuer)):
        expected = {"resource": RESOURCE, "authorization_servers": [ISSUER],
                    "scopes_supported": ["mcp:read", "mcp:write"], "bearer_methods_supported": ["header"]}
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            reply = await get_metadata(path)
            assert reply.start["status"] == 200, path
            assert json.loads(reply.body) == expected
            assert reply.header(b"content-type") == b"application/json"
            assert reply.header(b"access-control-allow-origin") == b"*"
        reply = await get_metadata("/.well-known/oauth-protected-resource/elsewhere")
        assert reply.start["status"] == 404
        posted = await get_metadata("/.well-known/oauth-protected-resource", method="POST")
        assert posted.start["status"] == 405
        assert (await get_metadata("/.well-known/oauth-protected-resource", host="evil.example")
                ).start["status"] == 403


@pytest.mark.asyncio
async def test_without_a_resource_setting_the_metadata_names_the_requested_origin():
    options = {**settings.MCP_SERVER, "RESOURCE_SERVER": {"AUTHORIZATION_SERVERS": [ISSUER],
                                                          "RESOURCE_NAME": "Demo"}}
    with override_settings(MCP_SERVER=options, ALLOWED_HOSTS=["mcp.example.com"]):
        reply = await get_metadata("/.well-known/oauth-protected-resource/mcp", host="mcp.example.com")
        assert json.loads(reply.body) == {
            "resource": "http://mcp.example.com/mcp", "authorization_servers": [ISSUER],
            "scopes_supported": [], "bearer_methods_supported": ["header"], "resource_name": "Demo"}


@pytest.mark.asyncio
async def test_the_demo_project_mounts_the_metadata_next_to_the_endpoint(issuer):
    from project.asgi import application

    with override_settings(MCP_SERVER=resource_server_settings(issuer)):
        reply = await call_asgi(_at("/.well-known/oauth-protected-resource/mcp", application), "GET",
                                {"host": "127.0.0.1"})
        assert reply.start["status"] == 200 and json.loads(reply.body)["resource"] == RESOURCE


def _at(path: str, app):
    async def wrapped(scope, receive, send):
        await app({**scope, "path": path, "raw_path": path.encode()}, receive, send)

    return wrapped


# Introspection -------------------------------------------------------------------------------
def introspection_settings(issuer: AuthorizationServer, **introspection) -> dict:
    options = {"ENDPOINT": f"{issuer.url}/introspect", "CLIENT_ID": "mcp-resource",
               "CLIENT_SECRET": "introspection-secret", **introspection}
    return resource_server_settings(issuer, RESOURCE_SERVER={"INTROSPECTION": options},
                                    AUTHENTICATION_CLASSES=["mcp_server.auth.IntrospectionAuthentication"])


def active(**fields) -> dict:
    return {"active": True, "aud": RESOURCE, "scope": "mcp:read", "client_id": "svc-client", "sub": "svc",
            "exp": int(time.time()) + 600, **fields}


@pytest.mark.asyncio
async def test_an_active_introspected_token_is_accepted_and_its_answer_kept_for_a_bounded_time(issuer):
    issuer.answers["opaque-ok"] = active()
    issuer.answers["opaque-soon"] = active(exp=int(time.time()) + 5)
    with resource_server_from(introspection_settings(issuer)) as resource_server:
        app = stateless_app(resource_server, build_server())
        before = issuer.introspections
        for number in range(3):
            reply = await post(app, modern_request("tools/call", number, name="whoami", arguments={}),
                               bearer("opaque-ok"))
            assert reply.status == 200 and text_of(reply) == "None|svc-client|mcp:read|introspection|True"
        assert issuer.introspections == before + 1  # kept: one introspection for three requests
        assert (await post(app, modern_request("tools/list", 4), bearer("opaque-soon"))).status == 200
        introspection = resource_server.authenticators[0]
        now = time.monotonic()
        longest, soonest = sorted((until - now for until, _principal in introspection._cache.values()),
                                  reverse=True)
        assert 55 < longest <= 60  # CACHE_SECONDS
        assert soonest <= 5  # never past the token's exp


@pytest.mark.asyncio
async def test_the_introspection_cache_keeps_at_most_cache_size_answers(issuer):
    tokens = [f"opaque-many-{number}" for number in range(5)]
    for token in tokens:
        issuer.answers[token] = active()
    with resource_server_from(introspection_settings(issuer, CACHE_SIZE=2)) as resource_server:
        app = stateless_app(resource_server, build_server())
        introspection = resource_server.authenticators[0]
        for number, token in enumerate(tokens):
            reply = await post(app, modern_request("tools/list", number), bearer(token))
            assert reply.status == 200
            assert len(introspection._cache) <= 2
        # The first token's answer was dropped to make room: asking again introspects again.
        before = issuer.introspections
        assert (await post(app, modern_request("tools/list", 9), bearer(tokens[0]))).status == 200
        assert issuer.introspections == before + 1


@pytest.mark.asyncio
async def test_revoked_expired_and_foreign_introspected_tokens_are_refused(issuer):
    issuer.answers["opaque-revoked"] = {"active": False}
    issuer.answers["opaque-expired"] = active(exp=int(time.time()) - 10)
    issuer.answers["opaque-foreign"] = active(aud="http://127.0.0.1/another-resource")
    issuer.answers["opaque-no-audience"] = active(aud=None)
    with resource_server_from(introspection_settings(issuer)) as resource_server:
        app = stateless_app(resource_server, build_server())
        for token in ("opaque-revoked", "opaque-expired", "opaque-foreign", "opaque-no-audience",
                      "never-issued"):
            reply = await post(app, modern_request("tools/list", 1), bearer(token))
            assert reply.status == 401, token
            assert challenge(reply.raw).startswith('Bearer error="invalid_token"'), token
        assert resource_server.authenticators[0]._cache == {}


@pytest.mark.asyncio
async def test_an_introspection_endpoint_that_does_not_answer_is_a_503_not_a_challenge(issuer):
    options = introspection_settings(issuer, ENDPOINT="http://127.0.0.1:1/introspect", TIMEOUT=2)
    with resource_server_from(options) as resource_server:
        app = stateless_app(resource_server, build_server())
        reply = await post(app, modern_request("tools/list", 1), bearer("opaque-ok"))
        assert reply.status == 503 and reply.raw.header(b"retry-after") == b"5"
        assert reply.raw.header(b"www-authenticate") is None


# DRF classes and plain-def classes --------------------------------------------------------------
@with_database
@pytest.mark.asyncio
async def test_a_drf_token_authentication_is_used_as_it_is(short_lived_connections):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    def make() -> str:
        user = get_user_model().objects.create_user("dora")
        return Token.objects.create(user=user).key

    key = await run_in_thread(make)
    options = {**settings.MCP_SERVER, "AUTHENTICATION_REQUIRED": True,
               "RESOURCE_SERVER": {"RESOURCE": RESOURCE},
               "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
    with resource_server_from(options) as resource_server:
        transport = StreamableHTTPTransport(build_server(), enable_json_response=True,
                                            resource_server=resource_server)
        app = transport.as_asgi()
        headers = {"authorization": f"Token {key}"}
        session = await open_session(app, headers)
        raw, body = await post_json(app, call("whoami"), headers, session)
        assert body["result"]["content"][0]["text"] == "dora|None||drf:TokenAuthentication|True"
        raw, body = await post_json(app, call("whoami"), {"authorization": "Token not-a-key"}, session)
        assert raw.start["status"] == 401 and body["id"] == 2
        # With no credential, the challenges name the Bearer metadata and DRF's own scheme.
        raw, _body = await post_json(app, call("whoami"), {}, session)
        challenges = [value for name, value in raw.start["headers"] if name == b"www-authenticate"]
        assert challenges == [b'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource'
                              b'/mcp"', b"Token"]
        await transport.close()


@with_database
@pytest.mark.asyncio
async def test_a_plain_def_class_runs_on_a_worker_thread_and_may_use_the_orm(short_lived_connections):
    from django.contrib.auth import get_user_model

    from .auth_support import APIKeyAuthentication

    await run_in_thread(get_user_model().objects.create_user, "erin")
    options = {**settings.MCP_SERVER, "AUTHENTICATION_CLASSES": ["tests.auth_support.APIKeyAuthentication"]}
    with resource_server_from(options) as resource_server:
        app = stateless_app(resource_server, build_server())
        APIKeyAuthentication.threads.clear()
        reply = await post(app, modern_request("tools/call", 1, name="whoami", arguments={}),
                           {"x-api-key": "erin"})
        assert text_of(reply) == "erin|None|mcp:read|api-key|True"
        ran_on = APIKeyAuthentication.threads
        assert ran_on and threading.main_thread().name not in ran_on
        reply = await post(app, modern_request("tools/list", 2), {"x-api-key": "nobody"})
        assert reply.status == 401
        # Not required: a request with no credential is served anonymously.
        reply = await post(app, modern_request("tools/call", 3, name="whoami", arguments={}))
        assert reply.status == 200 and text_of(reply) == "anonymous"


# The default: the session cookie, and no resource server at all ---------------------------------
@with_database
@pytest.mark.asyncio
async def test_by_default_the_session_cookie_user_is_the_principal_and_nothing_else_runs(
        short_lived_connections):
    assert ResourceServer.from_settings() is None
    assert site.build_transport(build_server()).resource_server is None
    logged_in = await run_in_thread(log_in, "frank")
    transport = StreamableHTTPTransport(build_server(), enable_json_response=True)
    app = session_auth(transport.as_asgi())
    session = await open_session(app, logged_in["headers"])
    _raw, body = await post_json(app, call("whoami"), logged_in["headers"], session)
    assert body["result"]["content"][0]["text"] == "frank|None||session|True"
    # Without the cookie, anonymous as before; the session is the user's, as before.
    raw, body = await post_json(app, call("whoami"), {}, session)
    assert raw.start["status"] == 403
    await transport.close()


# Settings --------------------------------------------------------------------------------------
JWKS = "http://127.0.0.1/jwks"


@pytest.mark.parametrize("change, message", [
    ({"RESOURCE_SERVER": {"JWT": {"JWKS_URL": JWKS, "ALGORITHMS": ["HS256"]}}}, "asymmetric"),
    ({"RESOURCE_SERVER": {"JWT": {"JWKS_URL": JWKS, "ALGORITHMS": ["none"]}}}, "asymmetric"),
    ({"RESOURCE_SERVER": {"RESOURCE": None}}, "audience"),
    ({"RESOURCE_SERVER": {"AUDIENCES": []}}, "unknown MCP_SERVER\\['RESOURCE_SERVER'\\] settings: AUDIENCES"),
    ({"RESOURCE_SERVER": {"JWT": {"JWKS": "x"}}}, "RESOURCE_SERVER.JWT"),
    ({"AUTHENTICATION_CLASSES": ["json.JSONDecoder"]}, "neither"),
])
def test_settings_that_cannot_work_stop_start_up(issuer, change, message):
    options = resource_server_settings(issuer)
    for key, value in change.items():
        options[key] = {**options[key], **value} if isinstance(value, dict) else value
    with override_settings(MCP_SERVER=options):
        with pytest.raises(ImproperlyConfigured, match=message):
            ResourceServer.from_settings()
        # manage.py check says so before any request comes.
        assert [error.id for error in check_authentication()] == ["mcp_server.E030"]


def test_a_jwt_setup_that_checks_no_issuer_is_warned_about(issuer):
    """Without ISSUER a JWT is accepted whoever issued it, as long as a key of the JWKS signed it
    (a JWKS several issuers share, say): `manage.py check` says so."""
    from io import StringIO

    from django.core.management import call_command

    options = resource_server_settings(issuer)
    with override_settings(MCP_SERVER=options):
        assert check_jwt_issuer() == []
    jwt = {**options["RESOURCE_SERVER"]["JWT"], "ISSUER": None}
    without_issuer = {**options, "RESOURCE_SERVER": {**options["RESOURCE_SERVER"], "JWT": jwt}}
    with override_settings(MCP_SERVER=without_issuer):
        [warning] = check_jwt_issuer()
        assert warning.id == "mcp_server.W030" and "any issuer" in warning.msg
        assert 'MCP_SERVER["RESOURCE_SERVER"]["JWT"]["ISSUER"] = "https://auth.example.com"' in warning.hint
        out, err = StringIO(), StringIO()
        call_command("check", stdout=out, stderr=err)
        assert "mcp_server.W030" in out.getvalue() + err.getvalue()
    # No JWTAuthentication among the classes: nothing verifies JWTs, nothing to warn about.
    introspection_only = {**without_issuer,
                          "AUTHENTICATION_CLASSES": ["mcp_server.auth.IntrospectionAuthentication"]}
    with override_settings(MCP_SERVER=introspection_only):
        assert check_jwt_issuer() == []
