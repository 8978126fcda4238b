"""The OAuth 2.1 authorization server app (mcp_server.authorization_server), over Django's test
client: RFC 8414 metadata, dynamic registration and its management (RFC 7591, RFC 7592), the
code flow with PKCE S256, refresh rotation, revocation, client credentials, resource indicators,
replayed codes, and LocalTokenAuthentication. Client ID Metadata Documents are in
test_authorization_server_cimd.py, two processes in test_authorization_server_cluster.py."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.settings import oauth2_settings

from mcp_server.auth import AuthenticationFailed
from mcp_server.authorization_server.authentication import LocalTokenAuthentication
from mcp_server.authorization_server.tokens import digest

from .authorization_support import (
    PKCE,
    REDIRECT_URI,
    RESOURCE,
    FakeRequest,
    approve,
    authorize_query,
    code_flow,
    redirect_params,
    register,
    token,
)

pytestmark = pytest.mark.django_db
ISSUER = "http://testserver"
ALLOWING_CLIENT_CREDENTIALS = {"DYNAMIC_CLIENT_CREDENTIALS": True}


@pytest.fixture(autouse=True)
def _no_limit_reached():
    """Registrations and failed client authentications are counted in Django's cache, per client
    address (the test client's is always 127.0.0.1): each test starts from none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def user(client) -> User:
    """A logged-in user of the test client."""
    user = User.objects.create_user("alice", password="a long test password")
    client.force_login(user)
    return user


def refresh(client, client_id: str, refresh_token: str):
    return token(client, grant_type="refresh_token", refresh_token=refresh_token, client_id=client_id)


def issued_tokens():
    """Access tokens but the registration access tokens (RFC 7592) registrations get."""
    return AccessToken.objects.exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)


def authenticate(access_token: str | None, url: str = RESOURCE):
    request = FakeRequest(None if access_token is None else f"Bearer {access_token}", url)
    return LocalTokenAuthentication().authenticate(request)


def test_metadata_document(client):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    data = response.json()
    assert data["issuer"] == ISSUER
    assert data["authorization_endpoint"] == f"{ISSUER}/oauth/authorize/"
    assert data["token_endpoint"] == f"{ISSUER}/oauth/token/"
    assert data["registration_endpoint"] == f"{ISSUER}/oauth/register/"
    assert data["revocation_endpoint"] == f"{ISSUER}/oauth/revoke/"
    assert data["code_challenge_methods_supported"] == ["S256"]
    assert data["response_types_supported"] == ["code"]
    assert set(data["grant_types_supported"]) == {"authorization_code", "refresh_token", "client_credentials"}
    assert data["token_endpoint_auth_methods_supported"] == [
        "none", "client_secret_basic", "client_secret_post"]
    assert data["client_id_metadata_document_supported"] is True
    assert data["authorization_response_iss_parameter_supported"] is True
    assert data["scopes_supported"] == ["mcp"]
    # An issuer without a path has no path-suffixed document.
    assert client.get("/.well-known/oauth-authorization-server/other").status_code == 404


def test_metadata_of_an_issuer_with_a_path_is_at_the_suffixed_url(client, settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "ISSUER": "https://auth.example.com/tenant"}}
    response = client.get("/.well-known/oauth-authorization-server/tenant")
    assert response.status_code == 200
    data = response.json()
    assert data["issuer"] == "https://auth.example.com/tenant"
    assert data["token_endpoint"] == "https://auth.example.com/oauth/token/"
    assert client.get("/.well-known/oauth-authorization-server").status_code == 404
    assert client.get("/.well-known/oauth-authorization-server/elsewhere").status_code == 404


def test_metadata_without_registration_and_metadata_documents(client, settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "DYNAMIC_CLIENT_REGISTRATION": False, "CLIENT_ID_METADATA_DOCUMENTS": False}}
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert "registration_endpoint" not in data
    assert data["client_id_metadata_document_supported"] is False
    refused = client.post("/oauth/register/", {"redirect_uris": [REDIRECT_URI]},
                          content_type="application/json")
    assert refused.status_code == 404


def test_the_consent_and_login_templates_ship_with_the_app(settings):
    from django.template.loader import get_template

    from mcp_server.authorization_server.checks import check_consent_template

    # No project templates at all: the app's own are found through APP_DIRS.
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [], "APP_DIRS": True}]
    assert check_consent_template() == []
    for name in ("oauth/consent.html", "mcp_authorization_server/login.html"):
        assert "mcp_server/authorization_server/templates" in get_template(name).origin.name


def test_a_project_template_overrides_the_apps(settings, tmp_path):
    from django.template.loader import get_template

    (tmp_path / "oauth").mkdir()
    (tmp_path / "oauth" / "consent.html").write_text("our own consent page")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path], "APP_DIRS": True}]
    assert get_template("oauth/consent.html").render({}) == "our own consent page"


def test_a_missing_consent_template_is_a_system_check_error(settings):
    from mcp_server.authorization_server.checks import check_consent_template

    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [], "APP_DIRS": False}]
    [error] = check_consent_template()
    assert error.id == "mcp_authorization_server.E001"
    assert '"mcp_server.authorization_server" in INSTALLED_APPS' in error.hint


@pytest.mark.parametrize(("change", "message"), [
    ({"REGISTRATION_RATE": "20 per hour"}, "REGISTRATION_RATE'] must be None or 'number/period'"),
    ({"LOGIN_FAILURE_RATE": "0/hour"}, "LOGIN_FAILURE_RATE'] must be None"),
    ({"CLIENT_SECRET_FAILURE_RATE": 10}, "CLIENT_SECRET_FAILURE_RATE'] must be None"),
    ({"MAX_REDIRECT_URIS": 0}, "MAX_REDIRECT_URIS'] must be a positive integer"),
    ({"MAX_REGISTRATION_BYTES": "64k"}, "MAX_REGISTRATION_BYTES'] must be a positive integer"),
])
def test_limits_that_cannot_work_are_system_check_errors(settings, change, message):
    from mcp_server.authorization_server.checks import check_limits

    assert check_limits() == []
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": change}
    [error] = check_limits()
    assert error.id == "mcp_authorization_server.E002" and message in error.msg
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "REGISTRATION_RATE": None, "LOGIN_FAILURE_RATE": "5/minute", "CLIENT_SECRET_FAILURE_RATE": "100/d"}}
    assert check_limits() == []


def test_unknown_authorization_server_setting_is_refused(settings):
    from django.core.exceptions import ImproperlyConfigured

    # Refused as the setting changes: the toolkit's settings are derived from it at once.
    unknown = r"unknown MCP_SERVER\['AUTHORIZATION_SERVER'\] settings: ISUER"
    with pytest.raises(ImproperlyConfigured, match=unknown):
        settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {"ISUER": "x"}}


def test_dynamic_registration_of_public_and_confidential_clients(client):
    public = register(client)
    assert public["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in public
    assert public["redirect_uris"] == [REDIRECT_URI]
    assert public["registration_access_token"]
    assert public["registration_client_uri"] == f"{ISSUER}/oauth/register/{public['client_id']}/"
    row = Application.objects.get(client_id=public["client_id"])
    assert (row.client_type, row.registration_source, row.name) == ("public", "dcr", "Test MCP client")
    assert row.client_secret == ""  # none made, none hashed

    confidential = register(client, token_endpoint_auth_method="client_secret_post",
                            redirect_uris=["https://app.example.com/cb"])
    assert confidential["client_secret"] and confidential["client_secret_expires_at"] == 0
    stored = Application.objects.get(client_id=confidential["client_id"]).client_secret
    assert stored != confidential["client_secret"] and stored.startswith("pbkdf2_")


@pytest.mark.parametrize(("uris", "reason"), [
    (["http://app.example.com/cb"], "uses http on a host that is not loopback"),
    (["https://app.example.com/cb#frag"], "has a fragment"),
    (["myapp://callback"], "uses the scheme 'myapp'"),
    (["https://user:pw@app.example.com/cb"], "has user information"),
    ([], "redirect_uris must be a non-empty array"),
    ("https://app.example.com/cb", "redirect_uris must be a non-empty array"),
])
def test_registration_refuses_bad_redirect_uris(client, uris, reason):
    response = client.post("/oauth/register/", {"client_name": "x", "redirect_uris": uris,
                                                "token_endpoint_auth_method": "none"},
                           content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert reason in response.json()["error_description"]
    assert not Application.objects.exists()


@pytest.mark.parametrize(("metadata", "reason"), [
    ({"grant_types": ["implicit"]}, "unsupported grant_types ['implicit']"),
    ({"grant_types": ["password"]}, "unsupported grant_types ['password']"),
    ({"token_endpoint_auth_method": "private_key_jwt"}, "unsupported token_endpoint_auth_method"),
    ({"grant_types": ["client_credentials"], "token_endpoint_auth_method": "none"},
     "client_credentials needs a confidential client"),
])
def test_registration_refuses_grants_and_auth_methods_oauth_2_1_has_not(client, settings, metadata, reason):
    # With client_credentials allowed, so that what else is wrong with it is what is refused.
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": ALLOWING_CLIENT_CREDENTIALS}
    body = {"client_name": "x", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
            **metadata}
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert reason in response.json()["error_description"]


def test_registration_management_read_update_delete(client):
    registered = register(client)
    uri = registered["registration_client_uri"].removeprefix(ISSUER)
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}

    assert client.get(uri).status_code == 401
    assert client.get(uri, HTTP_AUTHORIZATION="Bearer not-the-token").status_code == 401
    read = client.get(uri, **bearer)
    assert read.status_code == 200
    assert read.json()["client_id"] == registered["client_id"]
    assert read.json()["redirect_uris"] == [REDIRECT_URI]

    refused = client.put(uri, {"client_name": "x", "redirect_uris": ["http://evil.example.com/cb"],
                               "token_endpoint_auth_method": "none"},
                         content_type="application/json", **bearer)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"

    updated = client.put(uri, {"client_name": "Renamed", "redirect_uris": ["http://localhost:9000/cb"],
                               "token_endpoint_auth_method": "none"},
                         content_type="application/json", **bearer)
    assert updated.status_code == 200
    assert updated.json()["client_name"] == "Renamed"
    assert updated.json()["redirect_uris"] == ["http://localhost:9000/cb"]
    assert Application.objects.get(client_id=registered["client_id"]).name == "Renamed"
    # The registration token is rotated on update: the old one no longer works.
    assert client.get(uri, **bearer).status_code == 401
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {updated.json()['registration_access_token']}"}

    assert client.delete(uri, **bearer).status_code == 204
    assert not Application.objects.filter(client_id=registered["client_id"]).exists()
    assert client.get(uri, **bearer).status_code == 401


def test_code_flow_refresh_rotation_and_revocation(client, user):
    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    answer = approve(client, client_id, pkce)
    assert answer["state"] == "st-1" and answer["iss"] == ISSUER
    code = answer["code"]
    # The code is stored as its SHA-256 only.
    assert not Grant.objects.filter(code=code).exists()
    assert Grant.objects.get(code=digest(code)).resource == [RESOURCE]

    response = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                     client_id=client_id, code_verifier=pkce.verifier, resource=RESOURCE)
    assert response.status_code == 200, response.content
    first = response.json()
    assert first["token_type"] == "Bearer" and first["scope"] == "mcp" and first["expires_in"] == 3600
    # Tokens are stored as checksums only; the resource is recorded on both.
    access_row = AccessToken.objects.get(token_checksum=digest(first["access_token"]))
    refresh_row = RefreshToken.objects.get(token_checksum=digest(first["refresh_token"]))
    assert access_row.token == "" and refresh_row.token == ""
    assert access_row.resource == [RESOURCE] == refresh_row.resource
    principal = authenticate(first["access_token"])
    assert (principal.user, principal.client_id, principal.scopes) == (user, client_id, frozenset({"mcp"}))

    refreshed = refresh(client, client_id, first["refresh_token"])
    assert refreshed.status_code == 200, refreshed.content
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert authenticate(second["access_token"]).user == user
    with pytest.raises(AuthenticationFailed):
        authenticate(first["access_token"])  # the old access token went with its refresh token

    # The old refresh token again: refused, and its whole family revoked (reuse detection).
    reused = refresh(client, client_id, first["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    with pytest.raises(AuthenticationFailed):
        authenticate(second["access_token"])

    third = code_flow(client, client_id)
    assert authenticate(third["access_token"]).user == user
    revoked = client.post("/oauth/revoke/", {"token": third["access_token"], "client_id": client_id})
    assert revoked.status_code == 200
    with pytest.raises(AuthenticationFailed):
        authenticate(third["access_token"])
    again = refresh(client, client_id, third["refresh_token"])
    assert again.status_code == 400


def test_pkce_verifier_mismatch_is_refused(client, user):
    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    code = approve(client, client_id, pkce)["code"]
    response = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                     client_id=client_id, code_verifier=PKCE.new().verifier, resource=RESOURCE)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert not issued_tokens().exists()


def test_plain_pkce_and_no_pkce_are_refused_before_consent(client, user):
    client_id = register(client)["client_id"]
    plain = client.get(authorize_query(client_id, None, code_challenge="a" * 50,
                                       code_challenge_method="plain"))
    assert plain.status_code == 302
    refused = redirect_params(plain["Location"])
    assert refused["error"] == "invalid_request" and refused["state"] == "st-1" and refused["iss"] == ISSUER
    # Without a method, RFC 7636 means plain: refused too.
    implied = client.get(authorize_query(client_id, None, code_challenge="a" * 50))
    assert redirect_params(implied["Location"])["error"] == "invalid_request"
    missing = client.get(authorize_query(client_id, None))
    assert missing.status_code == 302
    assert redirect_params(missing["Location"])["error"] == "invalid_request"
    assert "code challenge" in redirect_params(missing["Location"])["error_description"].lower()
    assert not Grant.objects.exists()


def test_unregistered_redirect_uri_is_refused_without_a_redirect(client, user):
    client_id = register(client)["client_id"]
    for uri in ("https://evil.example.com/cb", REDIRECT_URI + "/other"):
        response = client.get(authorize_query(client_id, PKCE.new(), redirect_uri=uri))
        assert response.status_code == 400
        assert "Location" not in response
        assert "Mismatching redirect URI" in response.content.decode()
    unknown = client.get(authorize_query("no-such-client", PKCE.new()))
    assert unknown.status_code in (400, 401) and "Location" not in unknown


def test_login_redirect_and_deny(client):
    client_id = register(client)["client_id"]
    query = authorize_query(client_id, PKCE.new())
    anonymous = client.get(query)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/oauth/login/?next=")
    client.force_login(User.objects.create_user("bob"))
    page = client.get(query)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Test MCP client" in text and "127.0.0.1" in text and "mcp" in text
    assert "any program" in text  # the loopback warning
    data = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    denied = client.post(query, data)
    assert denied.status_code == 302
    assert redirect_params(denied["Location"]) == {"error": "access_denied", "state": "st-1", "iss": ISSUER}
    assert not Grant.objects.exists()


def test_replayed_code_is_refused_and_revokes_its_tokens(client, user):
    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    code = approve(client, client_id, pkce)["code"]
    fields = dict(grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI, client_id=client_id,
                  code_verifier=pkce.verifier, resource=RESOURCE)
    issued = token(client, **fields).json()
    refreshed = refresh(client, client_id, issued["refresh_token"]).json()
    assert authenticate(refreshed["access_token"]).user == user
    replay = token(client, **fields)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    for access_token in (issued["access_token"], refreshed["access_token"]):
        with pytest.raises(AuthenticationFailed):
            authenticate(access_token)
    assert refresh(client, client_id, refreshed["refresh_token"]).status_code == 400


def test_a_code_presented_twice_at_once_is_redeemed_once(client, user):
    """Two token requests with one code, both past the code's lookup before either made a token
    (as when they arrive together): the second is refused, and only the first gets tokens."""
    from types import SimpleNamespace

    from mcp_server.authorization_server.oauth import Validator

    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    code = approve(client, client_id, pkce)["code"]
    application = Application.objects.get(client_id=client_id)
    validator = Validator()
    first, second = SimpleNamespace(), SimpleNamespace()
    assert validator.validate_code(client_id, digest(code), application, first)
    assert not validator.validate_code(client_id, digest(code), application, second)
    # The request that claimed it is the one served; a third presenter is refused too.
    late = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                 client_id=client_id, code_verifier=pkce.verifier, resource=RESOURCE)
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    assert not issued_tokens().exists()


def test_client_credentials(client, settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": ALLOWING_CLIENT_CREDENTIALS}
    registered = register(client, grant_types=["client_credentials"], redirect_uris=None,
                          token_endpoint_auth_method="client_secret_basic")
    secret = base64.b64encode(f"{registered['client_id']}:{registered['client_secret']}".encode()).decode()
    response = client.post("/oauth/token/", {"grant_type": "client_credentials", "resource": RESOURCE},
                           HTTP_AUTHORIZATION=f"Basic {secret}")
    assert response.status_code == 200, response.content
    issued = response.json()
    assert "refresh_token" not in issued
    principal = authenticate(issued["access_token"])
    assert principal.user is None and principal.client_id == registered["client_id"]
    wrong = base64.b64encode(f"{registered['client_id']}:nope".encode()).decode()
    refused = client.post("/oauth/token/", {"grant_type": "client_credentials", "resource": RESOURCE},
                          HTTP_AUTHORIZATION=f"Basic {wrong}")
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


def test_grants_with_no_user_are_off_for_dynamic_registration_unless_allowed(client, settings):
    machine = {"grant_types": ["client_credentials"], "redirect_uris": [],
               "token_endpoint_auth_method": "client_secret_post"}
    refused = client.post("/oauth/register/", {"client_name": "Machine", **machine},
                          content_type="application/json")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"
    assert "DYNAMIC_CLIENT_CREDENTIALS" not in refused.json()["error_description"]
    assert "client_credentials is not open to dynamic registration" in refused.json()["error_description"]
    assert not Application.objects.exists()

    # Registered while a deployment allowed it, the client loses the grant once it no longer does.
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": ALLOWING_CLIENT_CREDENTIALS}
    registered = register(client, **machine)
    grant = {"grant_type": "client_credentials", "client_id": registered["client_id"],
             "client_secret": registered["client_secret"], "resource": RESOURCE}
    assert client.post("/oauth/token/", grant).status_code == 200
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {}}
    later = client.post("/oauth/token/", grant)
    assert later.status_code == 400 and later.json()["error"] == "unauthorized_client"
    # An administrator's client (not registered dynamically) keeps it.
    Application.objects.filter(client_id=registered["client_id"]).update(
        registration_source=Application.RegistrationSource.MANUAL)
    assert client.post("/oauth/token/", grant).status_code == 200


def test_a_public_client_cannot_authenticate_with_an_empty_secret(client, user):
    """A public client is stored without a secret: presenting an empty one is no authentication."""
    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    code = approve(client, client_id, pkce)["code"]
    empty = base64.b64encode(f"{client_id}:".encode()).decode()
    response = client.post("/oauth/token/", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "code_verifier": pkce.verifier, "resource": RESOURCE}, HTTP_AUTHORIZATION=f"Basic {empty}")
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    assert not issued_tokens().exists()


def test_token_request_for_another_resource_than_the_grants_is_refused(client, user):
    client_id = register(client)["client_id"]
    pkce = PKCE.new()
    code = approve(client, client_id, pkce)["code"]
    response = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                     client_id=client_id, code_verifier=pkce.verifier, resource="https://other.example.com/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert not issued_tokens().exists()


def test_local_token_authentication(client, user, settings):
    client_id = register(client)["client_id"]
    issued = code_flow(client, client_id)
    principal = authenticate(issued["access_token"])
    assert principal.method == "local_token" and principal.claims["aud"] == [RESOURCE]
    assert principal.expires_at == pytest.approx((timezone.now() + timedelta(hours=1)).timestamp(), abs=60)
    # The same endpoint, spelled with a trailing slash or an upper-case host.
    assert authenticate(issued["access_token"], "http://TESTSERVER/mcp/").user == user

    assert authenticate(None) is None
    assert LocalTokenAuthentication().authenticate(FakeRequest("Basic abc")) is None
    with pytest.raises(AuthenticationFailed) as empty:
        LocalTokenAuthentication().authenticate(FakeRequest("Bearer "))
    assert empty.value.error == "invalid_request"
    with pytest.raises(AuthenticationFailed):
        authenticate("unknown-token")
    # Issued for this resource, presented to another endpoint: refused; and the configured
    # RESOURCE wins over the request's URL.
    with pytest.raises(AuthenticationFailed):
        authenticate(issued["access_token"], "http://testserver/other-mcp")
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {"RESOURCE": "https://mcp.example.com/mcp"}}
    with pytest.raises(AuthenticationFailed):
        authenticate(issued["access_token"])
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {}}

    # Expired.
    AccessToken.objects.filter(token_checksum=digest(issued["access_token"])).update(
        expires=timezone.now() - timedelta(seconds=1))
    with pytest.raises(AuthenticationFailed):
        authenticate(issued["access_token"])
    # Revoked.
    other = code_flow(client, client_id)
    assert client.post("/oauth/revoke/", {"token": other["access_token"], "client_id": client_id,
                                          "token_type_hint": "access_token"}).status_code == 200
    with pytest.raises(AuthenticationFailed):
        authenticate(other["access_token"])
    # Without any resource: no audience, not for this endpoint.
    unbound = code_flow_without_resource(client, client_id)
    with pytest.raises(AuthenticationFailed):
        authenticate(unbound["access_token"])
    # A registration access token is not an MCP credential.
    with pytest.raises(AuthenticationFailed):
        authenticate(register(client)["registration_access_token"])


def code_flow_without_resource(client, client_id: str) -> dict:
    pkce = PKCE.new()
    code = approve(client, client_id, pkce, resource=None)["code"]
    response = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                     client_id=client_id, code_verifier=pkce.verifier)
    assert response.status_code == 200, response.content
    return response.json()


def test_prune_deletes_abandoned_registrations_only(client, user):
    abandoned = register(client)["client_id"]
    used = register(client)["client_id"]
    code_flow(client, used)
    fresh = register(client)["client_id"]
    Application.objects.filter(client_id__in=[abandoned, used]).update(
        created=timezone.now() - timedelta(days=8))
    call_command("mcp_prune_oauth_clients", "--dry-run")
    assert Application.objects.filter(client_id=abandoned).exists()
    call_command("mcp_prune_oauth_clients")
    assert set(Application.objects.values_list("client_id", flat=True)) == {used, fresh}
    call_command("mcp_prune_oauth_clients", "--age", "0")
    assert set(Application.objects.values_list("client_id", flat=True)) == {used}


def test_prune_uses_the_abandoned_client_age_setting(client, settings):
    two_hours_old = register(client)["client_id"]
    new = register(client)["client_id"]
    Application.objects.filter(client_id=two_hours_old).update(created=timezone.now() - timedelta(hours=2))
    call_command("mcp_prune_oauth_clients")  # the default age is a week: both stay
    assert set(Application.objects.values_list("client_id", flat=True)) >= {two_hours_old, new}
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {"ABANDONED_CLIENT_AGE": 3600}}
    call_command("mcp_prune_oauth_clients")
    remaining = set(Application.objects.values_list("client_id", flat=True))
    assert new in remaining and two_hours_old not in remaining


def test_the_login_url_setting_names_where_a_person_logs_in(client, settings):
    client_id = register(client)["client_id"]
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {"LOGIN_URL": "/people/sign-in/"}}
    anonymous = client.get(authorize_query(client_id, PKCE.new()))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/people/sign-in/?next=")
