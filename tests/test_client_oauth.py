"""Unit tests of mcp_client.oauth: the challenge parser, discovery order, URL rules, PKCE, scope
selection, and what the providers refuse at construction. No network."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import stat

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcp_client import (
    ClientCredentialsProvider,
    FileTokenStorage,
    HTTPTransport,
    InMemoryTokenStorage,
    InsecureRedirectURI,
    InsecureURL,
    InvalidClientIDMetadataDocumentURL,
    InvalidCredentials,
    OAuthError,
    Provider,
    UnregisteredRedirectURI,
)
from mcp_client.oauth import Discovery, canonical_resource, metadata_urls, parse_www_authenticate, prm_urls
from mcp_client.oauth.challenge import Challenge
from mcp_client.oauth.discovery import select_scope
from mcp_client.oauth.pkce import code_challenge, code_verifier, new_state
from mcp_client.oauth.registration import application_type, registration_metadata
from mcp_client.oauth.urls import address_class, covers, redact, require_public, require_secure


def _noop(*args: object) -> None:
    return None


def provider(**overrides: object) -> Provider:
    options = {"client_metadata": {"redirect_uris": ["http://127.0.0.1:8765/callback"]},
               "redirect_handler": _noop, "callback_handler": _noop, **overrides}
    return Provider(**options)


@pytest.mark.feature("OAUTH-03")
def test_www_authenticate_parsing_quoted_pairs_escapes_and_several_challenges():
    [bearer] = parse_www_authenticate('Bearer resource_metadata="https://a.example/.well-known/x", '
                                      'scope="files:read files:write", error="insufficient_scope"')
    assert bearer.scheme == "bearer"
    assert bearer.resource_metadata == "https://a.example/.well-known/x"
    assert bearer.scope == "files:read files:write" and bearer.error == "insufficient_scope"
    # Escapes, a comma inside quotes, a bare token value, and a second challenge after it.
    first, second = parse_www_authenticate(r'Bearer realm="a \"b\", c\\d", error=invalid_token, '
                                           'Basic realm="z"')
    assert first.params == {"realm": 'a "b", c\\d', "error": "invalid_token"}
    assert (second.scheme, second.params) == ("basic", {"realm": "z"})
    # A token68 challenge before it, case-insensitive names, a bare scheme.
    basic, bearer = parse_www_authenticate("Basic dXNlcjpwYXNz==, BEARER Scope=x")
    assert basic.params == {} and bearer.scope == "x"
    assert parse_www_authenticate("Bearer") == [Challenge("bearer", {})]
    # A malformed tail ends the parse; what came before stays.
    assert parse_www_authenticate('Bearer scope="a", error="unterminated')[0].scope == "a"


@pytest.mark.feature("OAUTH-04", "OAUTH-05")
def test_protected_resource_metadata_locations_in_order():
    named = Challenge("bearer", {"resource_metadata": "https://mcp.example.com/prm.json"})
    assert prm_urls("https://mcp.example.com/public/mcp", named) == [
        "https://mcp.example.com/prm.json",
        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://mcp.example.com/", None) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource"]
    for elsewhere in ("https://evil.example.com/prm.json", "https://mcp.example.com:8443/prm.json",
                      "http://mcp.example.com/prm.json"):
        with pytest.raises(InsecureURL, match=r"another origin|must use https"):
            prm_urls("https://mcp.example.com/mcp", Challenge("bearer", {"resource_metadata": elsewhere}))


@pytest.mark.feature("OAUTH-07")
def test_authorization_server_metadata_locations_in_order():
    assert metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration"]
    assert metadata_urls("https://auth.example.com/tenant1/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration"]


@pytest.mark.feature("OAUTH-10")
def test_pkce_s256_and_state():
    # RFC 7636 Appendix B.
    assert code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == \
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    verifiers = {code_verifier() for _ in range(20)}
    assert len(verifiers) == 20
    assert all(re.fullmatch(r"[A-Za-z0-9\-._~]{43,128}", v) for v in verifiers)
    assert len(new_state()) >= 43 and new_state() != new_state()


@pytest.mark.feature("OAUTH-20", "OAUTH-21")
def test_scope_selection_order_and_offline_access():
    def discovery(prm_scopes: list | None, as_scopes: list | None) -> Discovery:
        metadata = {} if as_scopes is None else {"scopes_supported": as_scopes}
        prm = {"resource": "https://m", "authorization_servers": ["https://a"]}
        if prm_scopes is not None:
            prm["scopes_supported"] = prm_scopes
        return Discovery("https://m", "https://a", metadata, prm)

    both = discovery(["prm:a", "prm:b"], None)
    assert select_scope("challenge:x", both, "configured") == "challenge:x"
    assert select_scope(None, both, "configured") == "prm:a prm:b"
    assert select_scope(None, discovery(None, None), "configured") == "configured"
    assert select_scope(None, discovery(None, None), None) is None
    # offline_access: added when the client may refresh and the AS lists it ...
    offers = discovery(["prm:a"], ["prm:a", "offline_access"])
    refreshing = ("authorization_code", "refresh_token")
    assert select_scope(None, offers, None, refreshing) == "prm:a offline_access"
    assert select_scope(None, offers, None, ("authorization_code",)) == "prm:a"
    assert select_scope(None, offers, None, refreshing, offline=False) == "prm:a"
    # ... and removed from every source when the AS does not list it.
    silent = discovery(["prm:a", "offline_access"], ["prm:a"])
    assert select_scope(None, silent, None, refreshing) == "prm:a"
    assert select_scope("x offline_access", silent, None, refreshing) == "x"
    assert select_scope(None, discovery(None, None), "offline_access y", refreshing) == "y"


@pytest.mark.feature("OAUTH-06")
def test_canonical_server_url_and_resource_binding():
    assert canonical_resource("HTTPS://User:pw@MCP.Example.COM:443/a/./b/../%2e%2E/mcp#frag") == \
        "https://mcp.example.com/mcp"
    assert canonical_resource("http://localhost:80/") == "http://localhost"
    assert canonical_resource("https://h:8443/mcp/") == "https://h:8443/mcp/"
    server = "https://mcp.example.com/api/mcp"
    assert covers("https://mcp.example.com/api/mcp", server)
    assert covers("https://MCP.example.com:443/api", server)
    assert covers("https://mcp.example.com", server)
    assert not covers("https://mcp.example.com/ap", server)        # not at a segment boundary
    assert not covers("https://mcp.example.com/api/mcp/x", server)
    assert not covers("https://evil.example.com/api/mcp", server)
    assert not covers("http://mcp.example.com/api/mcp", server)


@pytest.mark.feature("OAUTH-25", "OAUTH-26")
def test_https_or_loopback_and_refused_address_ranges():
    for url in ("https://a.example/x", "http://127.0.0.1:9/x", "http://localhost/x", "http://[::1]:8/x"):
        assert require_secure(url, "URL") == url
    for url in ("http://a.example/x", "ftp://a.example/", "https:///nohost", "http://10.0.0.1/"):
        with pytest.raises(InsecureURL, match="must use https"):
            require_secure(url, "URL")
    # Errors never quote userinfo or the query.
    with pytest.raises(InsecureURL) as caught:
        require_secure("http://user:hunter2@a.example/x?token=s3cret", "URL")
    assert "hunter2" not in str(caught.value) and "s3cret" not in str(caught.value)
    assert redact("https://u:p@h.example:8/p?q=1#f") == "https://h.example:8/p"
    spellings = {
        "loopback": ["127.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "017700000001", "::1", "localhost",
                     "::ffff:127.0.0.1", "a.localhost"],
        "private": ["10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fd00::1", "::ffff:10.0.0.1",
                    "0xa000001"],
        "link-local": ["169.254.169.254", "fe80::1", "2852039166"],
        "unspecified": ["0.0.0.0", "::", "0"],
        None: ["example.com", "8.8.8.8", "2001:db8::1", "256.1.1.1.1"],
    }
    for expected, hosts in spellings.items():
        for host in hosts:
            assert address_class(host) == expected, host
    public = "https://mcp.example.com/mcp"
    for url in ("https://10.0.0.1/", "https://169.254.169.254/latest", "http://127.0.0.1:9/", "https://[fe80::1]/"):
        with pytest.raises(InsecureURL, match="refused"):
            require_public(url, "token endpoint", public)
    # Skipped for the MCP server's own class: a loopback server's AS may be loopback, not private.
    assert require_public("http://localhost:9/t", "token endpoint", "http://127.0.0.1:8/mcp")
    with pytest.raises(InsecureURL, match="private"):
        require_public("https://10.0.0.1/t", "token endpoint", "http://127.0.0.1:8/mcp")
    assert require_public("https://10.0.0.2/t", "token endpoint", "https://10.0.0.1/mcp")


@pytest.mark.feature("OAUTH-11", "OAUTH-12", "OAUTH-13", "OAUTH-24", "OAUTH-25")
def test_what_the_authorization_code_provider_refuses_at_construction():
    with pytest.raises(InsecureRedirectURI):
        provider(client_metadata={"redirect_uris": ["http://app.example/cb"]})
    with pytest.raises(UnregisteredRedirectURI):
        provider(redirect_uri="http://127.0.0.1:9/other")
    with pytest.raises(ValueError, match="client_id"):
        provider(client_metadata={"redirect_uris": ["http://127.0.0.1:9/cb"], "client_id": "x"})
    with pytest.raises(ValueError, match="redirect_uris"):
        provider(client_metadata={})
    for bad in ("http://app.example/client.json", "https://app.example/", "https://app.example",
                "https://app.example/c.json#f", "https://u@app.example/c.json", "https://app.example/c.json?x=1",
                "https://app.example/a/../c.json"):
        with pytest.raises(InvalidClientIDMetadataDocumentURL):
            provider(client_id_metadata_document_url=bad)
    assert provider(client_id_metadata_document_url="https://app.example/c.json").cimd_url
    with pytest.raises(InsecureURL):
        HTTPTransport("http://mcp.example.com/mcp", oauth=provider())
    with pytest.raises(TypeError):
        HTTPTransport("https://mcp.example.com/mcp", oauth=object())
    # Registration metadata: required fields filled, application_type inferred, explicit values win.
    metadata = registration_metadata({"redirect_uris": ["http://127.0.0.1:9/cb"]},
                                     ("authorization_code", "refresh_token"), ["client_secret_post", "none"])
    assert metadata == {"redirect_uris": ["http://127.0.0.1:9/cb"],
                        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                        "token_endpoint_auth_method": "none", "application_type": "native"}
    assert application_type(["myapp:/cb", "http://localhost/cb"]) == "native"
    assert application_type(["https://app.example/cb"]) == "web"
    assert registration_metadata({"redirect_uris": ["https://app.example/cb"], "application_type": "native"},
                                 (), None)["application_type"] == "native"


@pytest.mark.feature("OAUTH-30", "OAUTH-31")
def test_what_the_client_credentials_provider_refuses_at_construction():
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(InvalidCredentials, match="none"):
        ClientCredentialsProvider(client_id="c", client_secret="s", token_endpoint_auth_method="none")
    with pytest.raises(InvalidCredentials, match="client_id"):
        ClientCredentialsProvider(client_id="", client_secret="s")
    with pytest.raises(InvalidCredentials, match="client_secret is required"):
        ClientCredentialsProvider(client_id="c")
    with pytest.raises(InvalidCredentials, match="do not also set"):
        ClientCredentialsProvider(client_id="c", client_secret="s", private_key=key)
    with pytest.raises(InvalidCredentials, match="signing_algorithm"):
        ClientCredentialsProvider(client_id="c", private_key=key, signing_algorithm="HS256")
    with pytest.raises(InvalidCredentials, match="PEM"):
        ClientCredentialsProvider(client_id="c", private_key="not a key")
    assert ClientCredentialsProvider(client_id="c", private_key=key).method == "private_key_jwt"
    assert ClientCredentialsProvider(client_id="c", client_secret="s").method == "client_secret_basic"


@pytest.mark.feature("OAUTH-23")
async def test_in_memory_storage_keeps_copies():
    storage = InMemoryTokenStorage()
    assert await storage.tokens() is None and await storage.client_information() is None
    tokens = {"access_token": "a"}
    await storage.save_tokens(tokens)
    tokens["access_token"] = "changed"
    assert await storage.tokens() == {"access_token": "a"}
    await storage.save_client_information({"client_id": "c"})
    assert (await storage.client_information())["client_id"] == "c"
    await storage.save_tokens(None)
    assert await storage.tokens() is None


@pytest.mark.feature("OAUTH-23")
async def test_file_storage_is_private_and_its_lock_is_exclusive_across_instances(tmp_path):
    path = tmp_path / "config" / "server.json"
    first, second = FileTokenStorage(path), FileTokenStorage(path)
    assert await first.tokens() is None
    await first.save_client_information({"client_id": "c"})
    await first.save_tokens({"access_token": "a"})
    assert await second.tokens() == {"access_token": "a"}
    assert await second.client_information() == {"client_id": "c"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    await second.save_tokens(None)
    assert await first.tokens() is None and await first.client_information() == {"client_id": "c"}

    # While one instance holds the lock, another descriptor (another process) cannot take it.
    lock_path = path.with_name("server.json.lock")
    async with first.locked():
        descriptor = os.open(lock_path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(descriptor)
    async with asyncio.timeout(30), second.locked():
        assert stat.S_IMODE(lock_path.stat().st_mode) == 0o600
    path.write_text("not json")
    with pytest.raises(OAuthError, match=r"is not JSON .*delete it to authorize again"):
        await second.tokens()
