"""The audit trail's admin in headless Chromium, on a daphne process: rows left by real calls of
two users are filtered (user, OAuth client, outcome, date), searched, and exported as CSV and JSON
with the filters applied; the page offers no way to add, change or delete a row."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client as DjangoClient
from django.utils import timezone
from selenium.webdriver.common.by import By

from mcp_server.models import AuditRecord

from .admin_support import action
from .browser import log_in, wait_for
from .http_cluster import call_tool, cluster, new_session, require_services
from .http_harness import HTTPClient
from .http_support import log_in as session_of
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 9
PASSWORD = "a long test password"
LIST = "/admin/mcp_server/auditrecord/"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    require_services()
    options = {"AUDIT": True, "AUDIT_FLUSH_INTERVAL": 0.2}
    with django_db_blocker.unblock(), cluster(1, redis_db=REDIS_DB, env={"CELERY_BROKER_URL": ""},
                                              mcp_settings=options) as servers:
        yield servers[0]


def calls_of(url: str, username: str, messages: list[str]) -> HTTPClient:
    """A session of ``username`` (logged in: its cookie), calling echo once per message."""
    logged_in = session_of(username)
    client = HTTPClient(url)
    client.http.headers["cookie"] = logged_in["headers"]["cookie"]
    client.initialize()
    for message in messages:
        assert call_tool(client, url, "echo", {"message": message}) == message
    return client


@pytest.fixture
def trail(server) -> dict:
    alice = calls_of(server.url, "alice", ["one", "two"])
    bob = calls_of(server.url, "bob", ["three"])
    failing = new_session(server.url)
    exchange = failing.request("tools/call", {"name": "no_such_tool", "arguments": {}}, url=server.url)
    assert "error" in exchange.response
    # An OAuth client's row, as its bearer-token call leaves it (tests/test_audit.py makes one).
    AuditRecord.objects.create(time=timezone.now(), method="tools/call", name="echo", outcome="ok",
                               duration=0.001, client_id="reporting-app", subject="svc-42")
    wait_until(lambda: AuditRecord.objects.count() == 5, what="the five audit rows")
    return {"alice": alice.session_id, "bob": bob.session_id, "failing": failing.session_id}


@pytest.fixture
def admin(server, browser) -> str:
    User.objects.create_superuser("root", password=PASSWORD)
    base = server.url.removesuffix("/mcp")
    log_in(browser, base, "root", PASSWORD)
    return base


def listed(driver) -> list[str]:
    """The session ids of the listed rows (one column of the changelist)."""
    return [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#result_list td.field-session_id")]


def fetched(driver, link_id: str) -> str:
    """What the export link (as the page offers it, filters included) downloads, fetched by the
    page itself with its session."""
    href = driver.find_element(By.ID, link_id).get_attribute("href")
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text()).then(done);", href)


def test_admin_filters_and_exports_the_trail(admin, browser, trail):
    browser.get(f"{admin}{LIST}")
    wait_for(browser, lambda d: len(listed(d)) == 5, "the five rows")
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "Add MCP audit record" not in page and "Delete selected" not in page
    # Filtered by user, from the sidebar.
    browser.find_element(By.CSS_SELECTOR, "#changelist-filter a[href*='username=alice']").click()
    wait_for(browser, lambda d: listed(d) == [trail["alice"]] * 2, "alice's two rows")
    exported = list(csv.DictReader(io.StringIO(fetched(browser, "mcp-audit-export-csv"))))
    assert [(row["username"], row["name"], row["outcome"], json.loads(row["arguments"]))
            for row in exported] == [("alice", "echo", "ok", {"message": "one"}),
                                     ("alice", "echo", "ok", {"message": "two"})]
    assert all(row["session_id"] == trail["alice"] and row["arguments_digest"] for row in exported)
    document = json.loads(fetched(browser, "mcp-audit-export-json"))
    assert [item["arguments"] for item in document] == [{"message": "one"}, {"message": "two"}]
    alice_id = User.objects.get(username="alice").pk
    assert {item["user_id"] for item in document} == {alice_id}

    # By outcome, then by OAuth client.
    browser.get(f"{admin}{LIST}")
    browser.find_element(By.CSS_SELECTOR, "#changelist-filter a[href*='outcome__exact=error']").click()
    wait_for(browser, lambda d: listed(d) == [trail["failing"]], "the failed call's row")
    [failed] = json.loads(fetched(browser, "mcp-audit-export-json"))
    assert (failed["name"], failed["error_code"]) == ("no_such_tool", -32602)
    browser.get(f"{admin}{LIST}")
    browser.find_element(By.CSS_SELECTOR, "#changelist-filter a[href*='client_id=reporting-app']").click()
    wait_for(browser, lambda d: "client_id=reporting-app" in d.current_url and len(listed(d)) == 1,
             "the client's row")
    [client_row] = list(csv.DictReader(io.StringIO(fetched(browser, "mcp-audit-export-csv"))))
    assert (client_row["client_id"], client_row["subject"]) == ("reporting-app", "svc-42")

    # By date: every row is of today, so the date hierarchy offers that day at once.
    browser.get(f"{admin}{LIST}")
    browser.find_element(By.CSS_SELECTOR, "#changelist a[href*='time__day=']").click()
    wait_for(browser, lambda d: "time__day=" in d.current_url and len(listed(d)) == 5, "the day's rows")
    assert len(json.loads(fetched(browser, "mcp-audit-export-json"))) == 5
    # And a search.
    browser.get(f"{admin}{LIST}?q=bob")
    wait_for(browser, lambda d: listed(d) == [trail["bob"]], "bob's row, searched")
    searched = csv.DictReader(io.StringIO(fetched(browser, "mcp-audit-export-csv")))
    assert [row["session_id"] for row in searched] == [trail["bob"]]


def test_the_export_actions_and_views_need_the_view_permission(trail):
    viewer = User.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    client = DjangoClient()
    client.force_login(viewer)
    assert client.get(f"{LIST}export/csv/").status_code == 403
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_auditrecord"))
    pks = list(AuditRecord.objects.filter(username="bob").values_list("pk", flat=True))
    response = action(client, LIST, "export_json", pks)
    assert response["Content-Disposition"].startswith('attachment; filename="mcp-audit-')
    assert [item["username"] for item in json.loads(response.content)] == ["bob"]
    response = client.get(f"{LIST}export/csv/", {"outcome__exact": "error"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert [row["name"] for row in csv.DictReader(io.StringIO(response.content.decode()))] == ["no_such_tool"]
    assert client.get(f"{LIST}export/xml/").status_code == 404
    # Read-only even for a superuser: no add, change or delete.
    root = User.objects.create_superuser("root2", password=PASSWORD)
    client.force_login(root)
    assert client.get(f"{LIST}add/").status_code == 403
    row = AuditRecord.objects.first()
    assert client.post(f"{LIST}{row.pk}/change/", {"outcome": "error"}).status_code == 403
    assert client.post(f"{LIST}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditRecord.objects.filter(pk=row.pk, outcome=row.outcome).exists()
