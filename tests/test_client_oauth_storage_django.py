"""``mcp_client.contrib.django``: the database token storage, its encryption at rest and key
rotation, its settings' errors, a registration shared by two storages of one key, and admin with
every secret masked. (Two processes refreshing at once: test_client_oauth_storage_processes.py.)"""

from __future__ import annotations

import asyncio
import datetime
import io
import json

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from mcp_client import AsyncClient, HTTPTransport, Provider
from mcp_client.contrib.django.models import OAuthCredential
from mcp_client.contrib.django.storage import DatabaseTokenStorage

from .oauth_support import Browser, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_lived_connections")]

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
CLIENT = {"client_id": "client-7", "client_secret": "the-client-secret", "issuer": "https://as.example",
          "registration_access_token": "the-registration-token", "redirect_uris": ["http://127.0.0.1:1/cb"]}
TOKENS = {"access_token": "the-access-token", "refresh_token": "the-refresh-token", "token_type": "Bearer",
          "scope": "mcp", "issuer": "https://as.example", "expires_at": 4102444800.0}
SECRETS = ("the-client-secret", "the-registration-token", "the-access-token", "the-refresh-token")


@pytest.fixture
def keys(settings):
    def use(*keys: str) -> None:
        settings.MCP_CLIENT = {"OAUTH_ENCRYPTION_KEYS": list(keys)}
    use(OLD)
    return use


@pytest.fixture
def world():
    world = World()
    yield world
    world.close()


def stored(key: str = "server") -> DatabaseTokenStorage:
    storage = DatabaseTokenStorage(key)
    asyncio.run(storage.save_client_information(CLIENT))
    asyncio.run(storage.save_tokens(TOKENS))
    return storage


@pytest.mark.feature("OAUTH-23")
def test_what_is_stored_is_encrypted_and_read_back(keys):
    storage = stored()
    assert asyncio.run(storage.tokens()) == TOKENS
    assert asyncio.run(storage.client_information()) == CLIENT
    row = OAuthCredential.objects.get(key="server")
    assert (row.client_id, row.issuer) == ("client-7", "https://as.example")
    assert row.expires_at == datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)
    for secret in SECRETS:
        assert secret not in row.client_information and secret not in row.tokens
    assert json.loads(Fernet(OLD).decrypt(row.tokens.encode())) == TOKENS
    # None forgets; another key is another row.
    asyncio.run(storage.save_tokens(None))
    assert asyncio.run(storage.tokens()) is None and asyncio.run(storage.client_information()) == CLIENT
    assert asyncio.run(DatabaseTokenStorage("another").tokens()) is None
    assert OAuthCredential.objects.get(key="server").expires_at is None


@pytest.mark.feature("OAUTH-23")
def test_keys_rotate_the_first_encrypts_every_one_decrypts(keys):
    stored()
    keys(NEW, OLD)
    storage = DatabaseTokenStorage("server")
    assert asyncio.run(storage.tokens()) == TOKENS  # written under OLD, read with NEW first
    asyncio.run(storage.save_tokens({**TOKENS, "access_token": "renewed"}))
    row = OAuthCredential.objects.get(key="server")
    assert json.loads(Fernet(NEW).decrypt(row.tokens.encode()))["access_token"] == "renewed"
    keys(NEW)  # the registration is still under OLD only
    with pytest.raises(ImproperlyConfigured, match=r"client_information of 'server' cannot be decrypted"):
        asyncio.run(DatabaseTokenStorage("server").client_information())
    keys(NEW, OLD)
    out = io.StringIO()
    call_command("mcp_client_rotate_keys", stdout=out)
    assert out.getvalue().strip() == "1 stored credential(s) encrypted under the first key"
    keys(NEW)
    storage = DatabaseTokenStorage("server")
    assert asyncio.run(storage.client_information()) == CLIENT
    assert asyncio.run(storage.tokens())["access_token"] == "renewed"


@pytest.mark.parametrize(("value", "message"), [
    ({}, r"OAUTH_ENCRYPTION_KEYS'\] is empty"),
    ({"OAUTH_ENCRYPTION_KEYS": []}, r"OAUTH_ENCRYPTION_KEYS'\] is empty.*Fernet.generate_key"),
    ({"OAUTH_ENCRYPTION_KEYS": "one-key"}, r"must be a list of Fernet keys, not str"),
    ({"OAUTH_ENCRYPTION_KEYS": [OLD, "short"]}, r"OAUTH_ENCRYPTION_KEYS'\]\[1\] is not a Fernet key"),
    ({"ENCRYPTION_KEYS": [OLD]},
     r"MCP_CLIENT has no setting 'ENCRYPTION_KEYS' \(a typo\?\); it has OAUTH_ENCRYPTION_KEYS"),
    ([OLD], r"MCP_CLIENT must be a dict, not list"),
])
def test_settings_that_cannot_work_are_improperly_configured(settings, value, message):
    settings.MCP_CLIENT = value
    with pytest.raises(ImproperlyConfigured, match=message):
        DatabaseTokenStorage("server")


def test_a_key_is_a_short_non_empty_string(keys):
    for key in ("", "x" * 513, None):
        with pytest.raises(ValueError, match="non-empty string of at most 512"):
            DatabaseTokenStorage(key)


def provider(storage: DatabaseTokenStorage, browser: Browser) -> Provider:
    return Provider(client_metadata={"client_name": "tests", "redirect_uris": ["http://127.0.0.1:8765/cb"]},
                    redirect_handler=browser.redirect, callback_handler=browser.callback, storage=storage)


@pytest.mark.feature("OAUTH-11", "OAUTH-23")
def test_two_storages_of_one_key_share_one_registration(keys, world):
    async def connect(storage: DatabaseTokenStorage) -> None:
        async with AsyncClient(HTTPTransport(world.mcp_url, oauth=provider(storage, Browser()))) as client:
            await client.connect()

    asyncio.run(connect(DatabaseTokenStorage("shared")))
    assert len(world.server.of("POST", "/register")) == 1
    # Another process: its tokens are gone (say revoked), its registration is the first one's.
    other = DatabaseTokenStorage("shared")
    asyncio.run(other.save_tokens(None))
    asyncio.run(connect(other))
    assert len(world.server.of("POST", "/register")) == 1
    [first, second] = world.server.of("GET", "/authorize")
    assert first.query["client_id"] == second.query["client_id"] == "client-1"
    assert OAuthCredential.objects.get(key="shared").client_id == "client-1"


@pytest.mark.feature("OAUTH-23")
def test_admin_shows_the_credentials_with_every_secret_masked(keys, admin_client):
    stored()
    row = OAuthCredential.objects.get(key="server")
    listing = admin_client.get("/admin/mcp_client/oauthcredential/").content.decode()
    page = admin_client.get(f"/admin/mcp_client/oauthcredential/{row.pk}/change/").content.decode()
    for html in (listing, page):
        assert "client-7" in html and "https://as.example" in html
        for secret in SECRETS:
            assert secret not in html
    assert page.count("••••••••") == 4
    assert "http://127.0.0.1:1/cb" in page and "&quot;scope&quot;: &quot;mcp&quot;" in page
    # Without the key that encrypted them, the page says so instead of failing.
    keys(NEW)
    page = admin_client.get(f"/admin/mcp_client/oauthcredential/{row.pk}/change/").content.decode()
    assert "cannot be decrypted with any key of MCP_CLIENT" in page
    assert admin_client.get("/admin/mcp_client/oauthcredential/add/").status_code == 403
    answer = admin_client.post(f"/admin/mcp_client/oauthcredential/{row.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302 and not OAuthCredential.objects.exists()
