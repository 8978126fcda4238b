"""The OAuth consent page and the authorization server's admin in headless Chromium, against a
daphne process: a visitor is sent to log in, approves (redirected with a code, its state and the
issuer) or denies (access_denied); admin lists the client and its tokens with nothing secret
shown. A failed test leaves a screenshot (tests/browser.py)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.contrib.auth.models import User
from selenium.webdriver.common.by import By

from .authorization_support import PKCE, RESOURCE, authorize_query, code_flow, register
from .browser import log_in, wait_for
from .http_harness import DaphneServer

pytestmark = [pytest.mark.django_db(transaction=True)]

PASSWORD = "a long test password"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        server = DaphneServer()
    yield server
    server.stop()


@pytest.fixture
def base(server) -> str:
    return server.url.removesuffix("/mcp")


def text(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def query_of(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def test_log_in_approve_and_deny(base, browser):
    User.objects.create_user("erin", password=PASSWORD)
    callback = f"{base}/callback"
    with httpx.Client() as http:
        client_id = register(http, base, redirect_uris=[callback])["client_id"]
    pkce = PKCE.new()
    resource = f"{base}/mcp"
    query = authorize_query(client_id, pkce, redirect_uri=callback, resource=resource, state="s-42")
    browser.get(base + query)
    # Not logged in: the login page first, then back to the consent page.
    wait_for(browser, lambda d: "/oauth/login/" in d.current_url, "the login page")
    browser.find_element(By.NAME, "username").send_keys("erin")
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "consent-approve"), "the consent page")
    assert "Test MCP client" in browser.find_element(By.ID, "consent-client").text
    assert browser.find_element(By.ID, "consent-redirect-host").text.startswith("127.0.0.1")
    assert "mcp" in browser.find_element(By.ID, "consent-scopes").text
    assert resource in browser.find_element(By.ID, "consent-resource").text
    browser.find_element(By.ID, "consent-approve").click()
    wait_for(browser, lambda d: d.current_url.startswith(callback), "the redirect to the client")
    answer = query_of(browser.current_url)
    assert answer["state"] == "s-42" and answer["iss"] == base and answer["code"]
    with httpx.Client() as http:
        issued = http.post(f"{base}/oauth/token/", data={
            "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": callback,
            "client_id": client_id, "code_verifier": pkce.verifier, "resource": resource})
    assert issued.status_code == 200, issued.text
    assert issued.json()["access_token"]

    browser.get(base + authorize_query(client_id, PKCE.new(), redirect_uri=callback, state="s-43"))
    wait_for(browser, lambda d: d.find_element(By.ID, "consent-deny"), "the consent page")
    browser.find_element(By.ID, "consent-deny").click()
    wait_for(browser, lambda d: d.current_url.startswith(callback), "the redirect to the client")
    assert query_of(browser.current_url) == {"error": "access_denied", "state": "s-43", "iss": base}


def test_admin_lists_clients_and_tokens_with_secrets_masked(base, browser, client):
    owner = User.objects.create_user("frank")
    client.force_login(owner)
    public = register(client)
    confidential = register(client, client_name="Confidential client",
                            token_endpoint_auth_method="client_secret_post")
    issued = code_flow(client, public["client_id"])
    User.objects.create_superuser("root", password=PASSWORD)
    log_in(browser, base, "root", PASSWORD)
    secrets = (issued["access_token"], issued["refresh_token"], confidential["client_secret"],
               public["registration_access_token"])

    browser.get(f"{base}/admin/oauth2_provider/application/")
    listing = text(browser)
    assert "Test MCP client" in listing and "Confidential client" in listing
    browser.find_element(By.LINK_TEXT, str(application_pk(confidential["client_id"]))).click()
    wait_for(browser, lambda d: "(stored hashed, not shown)" in text(d), "the client's page")
    page = browser.page_source
    assert not any(secret in page for secret in secrets)
    assert "pbkdf2_" not in page  # not even the secret's hash

    browser.get(f"{base}/admin/oauth2_provider/accesstoken/")
    listing = text(browser)
    assert "frank" in listing and RESOURCE in listing  # the user and the audience of the token
    assert "…" in listing  # the masked token column
    browser.get(f"{base}/admin/oauth2_provider/refreshtoken/")
    assert "frank" in text(browser)
    for path in ("accesstoken", "refreshtoken", "grant"):
        browser.get(f"{base}/admin/oauth2_provider/{path}/")
        assert not any(secret in browser.page_source for secret in secrets)


def application_pk(client_id: str) -> int:
    from oauth2_provider.models import Application

    return Application.objects.get(client_id=client_id).pk
