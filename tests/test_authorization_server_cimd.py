"""Client ID Metadata Documents: an https client_id is fetched from a document server on
loopback (allowed by CIMD_ALLOW_LOOPBACK, trusted through CIMD_CA_BUNDLE), validated, kept, and
used for the code flow; without the allowance loopback is refused, as private addresses always
are, before any connection; bad documents, redirects and oversized bodies are refused; the fetch
timeout bounds the whole fetch, DNS lookup included; a failure backs off the document's host.
The same against daphne processes is in test_authorization_server_abuse.py."""

from __future__ import annotations

import socket
import threading

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import Application

from mcp_server.authorization_server.cimd import MetadataFetcher, address_allowed

from .authorization_documents import DocumentServer
from .authorization_support import PKCE, REDIRECT_URI, RESOURCE, approve, authorize_query, token
from .waiting import PATIENCE

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_backoff_left():
    """A failed fetch backs its host off in Django's cache: each test starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    server = DocumentServer(tmp_path_factory.mktemp("cimd"))
    yield server
    server.close()


@pytest.fixture
def loopback_allowed(settings, documents):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "CIMD_ALLOW_LOOPBACK": True, "CIMD_CA_BUNDLE": str(documents.cert_path)}}


def client_document(url: str, **fields) -> dict:
    return {"client_id": url, "client_name": "Document client", "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none",
            **fields}


def test_a_metadata_document_client_gets_tokens(client, documents, loopback_allowed):
    url = documents.base + "/clients/good.json"
    documents.publish("/clients/good.json", client_document(url), headers={"cache-control": "max-age=600"})
    client.force_login(User.objects.create_user("carol"))
    page = client.get(authorize_query(url, PKCE.new()))
    assert page.status_code == 200, page.content
    assert "Document client" in page.content.decode()
    row = Application.objects.get(client_id=url)
    assert (row.registration_source, row.client_type, row.redirect_uris) == ("cimd", "public", REDIRECT_URI)

    pkce = PKCE.new()
    code = approve(client, url, pkce)["code"]
    issued = token(client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                   client_id=url, code_verifier=pkce.verifier, resource=RESOURCE)
    assert issued.status_code == 200, issued.content
    # Kept, not fetched again for each request: one fetch served the consent pages and the token.
    assert documents.hits["/clients/good.json"] == 1


def test_loopback_is_refused_without_the_allowance_and_private_addresses_always(client, documents, settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "CIMD_CA_BUNDLE": str(documents.cert_path)}}
    url = documents.publish("/clients/ssrf.json", client_document(documents.base + "/clients/ssrf.json"))
    client.force_login(User.objects.create_user("dave"))
    refused = client.get(authorize_query(url, PKCE.new()))
    assert refused.status_code in (400, 401) and "Location" not in refused
    assert "/clients/ssrf.json" not in documents.hits  # no connection was made
    assert not Application.objects.filter(client_id=url).exists()

    cache.clear()  # that failure backed the host off: what the fetch itself says comes next
    with pytest.raises(CIMDError, match="not public"):
        MetadataFetcher().fetch(url)
    for private in ("https://10.1.2.3/client.json", "https://192.168.0.1/c.json", "https://169.254.169.254/c.json",
                    "https://[::ffff:10.0.0.1]/c.json", "https://[fe80::1]/c.json", "https://224.0.0.1/c.json"):
        with pytest.raises(CIMDError, match="not public"):
            MetadataFetcher().fetch(private)
    assert address_allowed("93.184.216.34", allow_loopback=False)
    assert not address_allowed("127.0.0.1", allow_loopback=False)
    assert address_allowed("127.0.0.1", allow_loopback=True)
    assert not address_allowed("10.0.0.1", allow_loopback=True)


@pytest.mark.parametrize(("path", "document", "headers", "status", "reason"), [
    ("/bad/other-id.json", "OTHER", {}, 200, "is not the URL it was fetched from"),
    ("/bad/no-name.json", {"client_name": None}, {}, 200, "must have a client_name"),
    ("/bad/http-redirect.json", {"redirect_uris": ["http://app.example.com/cb"]}, {}, 200,
     "uses http on a host that is not loopback"),
    ("/bad/moved.json", b"", {"location": "https://127.0.0.1/elsewhere.json"}, 302, "HTTP 302"),
    ("/bad/huge.json", {"padding": "x" * 10_000}, {}, 200, "larger than"),
    ("/bad/html.json", b"<html></html>", {"content-type": "text/html"}, 200, "not JSON"),
])
def test_bad_documents_are_refused(documents, loopback_allowed, path, document, headers, status, reason):
    url = documents.base + path
    if isinstance(document, dict):
        body = client_document(url, **document)
        body = {key: value for key, value in body.items() if value is not None}
    elif document == "OTHER":
        body = client_document(documents.base + "/somewhere-else.json")
    else:
        body = document
    documents.publish(path, body, status=status, headers=headers)
    with pytest.raises(CIMDError, match=reason):
        MetadataFetcher().fetch(url)


def test_the_document_size_bound_is_a_setting(documents, settings):
    conf = {"CIMD_ALLOW_LOOPBACK": True, "CIMD_CA_BUNDLE": str(documents.cert_path)}
    padded = documents.base + "/size/padded.json"
    documents.publish("/size/padded.json", client_document(padded, padding="x" * 10_000))
    settings.MCP_SERVER = {**settings.MCP_SERVER,
                           "AUTHORIZATION_SERVER": {**conf, "CIMD_MAX_DOCUMENT_BYTES": 20_000}}
    document, _max_age = MetadataFetcher().fetch(padded)
    assert document["client_id"] == padded

    plain = documents.base + "/size/plain.json"
    documents.publish("/size/plain.json", client_document(plain))
    settings.MCP_SERVER = {**settings.MCP_SERVER,
                           "AUTHORIZATION_SERVER": {**conf, "CIMD_MAX_DOCUMENT_BYTES": 100}}
    with pytest.raises(CIMDError, match="larger than 100 bytes"):
        MetadataFetcher().fetch(plain)


def test_a_document_server_that_does_not_answer_is_given_up_after_the_fetch_timeout(documents, settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {
        "CIMD_ALLOW_LOOPBACK": True, "CIMD_CA_BUNDLE": str(documents.cert_path), "CIMD_FETCH_TIMEOUT": 0.5}}
    url = documents.publish("/slow/client.json", client_document(documents.base + "/slow/client.json"))
    documents.held["/slow/client.json"] = threading.Event()
    try:
        with pytest.raises(CIMDError, match=r"not fetched within 0\.5 s"):
            MetadataFetcher().fetch(url)
        # Given up while the server still holds the request (until the test lets it go).
        assert not documents.held["/slow/client.json"].is_set()
    finally:
        documents.held.pop("/slow/client.json").set()
    assert documents.hits["/slow/client.json"] == 1


def test_a_dns_lookup_that_does_not_end_is_given_up_within_the_fetch_timeout(settings, monkeypatch):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "AUTHORIZATION_SERVER": {"CIMD_FETCH_TIMEOUT": 0.5}}
    asked, answer = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def stalled(host, *args, **kwargs):
        if host != "stalled.example":
            return real(host, *args, **kwargs)
        asked.set()
        answer.wait(PATIENCE)  # a resolver that does not answer (until the test ends)
        raise socket.gaierror("the resolver gave up")

    monkeypatch.setattr(socket, "getaddrinfo", stalled)
    try:
        with pytest.raises(CIMDError, match=r"not fetched within 0\.5 s"):
            MetadataFetcher().fetch("https://stalled.example/client.json")
        assert asked.is_set() and not answer.is_set()  # the lookup was still under way
        # Its host is backed off: the next client of it is refused without another lookup.
        asked.clear()
        with pytest.raises(CIMDError, match="failed less than"):
            MetadataFetcher().fetch("https://stalled.example/another.json?v=2")
        assert not asked.is_set()
    finally:
        answer.set()


def test_a_failed_fetch_backs_off_its_host_whatever_the_path_or_query(documents, loopback_allowed):
    """The toolkit backs off the failed URL alone, which another query string gets past: the host
    of a failed fetch is not fetched again for the backoff, while other hosts are."""
    good = "/hosts/good.json"
    documents.publish(good, client_document(documents.url(good, host="localhost")))
    with pytest.raises(CIMDError, match="HTTP 404"):
        MetadataFetcher().fetch(documents.url("/hosts/missing.json?attempt=1", host="localhost"))
    for url in (documents.url("/hosts/missing.json?attempt=2", host="localhost"),
                documents.url(good, host="localhost")):
        with pytest.raises(CIMDError, match="failed less than 60 s ago"):
            MetadataFetcher().fetch(url)
    assert {path: hits for path, hits in documents.hits.items() if path.startswith("/hosts/")} == {
        "/hosts/missing.json?attempt=1": 1}

    elsewhere = documents.url(good)  # 127.0.0.1: another host, the same server
    documents.publish(good, client_document(elsewhere))
    document, _max_age = MetadataFetcher().fetch(elsewhere)
    assert document["client_id"] == elsewhere


@pytest.mark.parametrize(("fields", "reason"), [
    ({"redirect_uris": [f"http://127.0.0.1:{port}/cb" for port in range(11)]}, "at most 10 redirect URIs"),
    ({"redirect_uris": ["https://app.example.com/" + "x" * 2000]}, "longer than 2000 characters"),
    ({"client_name": "Tab\tname"}, "control characters"),
    ({"client_name": "Nul\u0000name"}, "NUL"),
    ({"token_endpoint_auth_method": "client_secret_basic"}, "public"),
    ({"grant_types": ["implicit"]}, "authorization_code"),
])
def test_documents_are_bounded_as_registrations_are(documents, loopback_allowed, fields, reason):
    url = documents.url("/bounded/client.json")
    documents.publish("/bounded/client.json", client_document(url, **fields))
    with pytest.raises(CIMDError, match=reason):
        MetadataFetcher().fetch(url)
