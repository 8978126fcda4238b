"""The MCP server's admin in headless Chromium, on two daphne processes sharing PostgreSQL and
Redis: admin is served by the first, MCP clients talk to the second. A tool disabled in admin is
gone for a client of the other process; a prompt defined in admin is served there; a background
call running there is cancelled from admin; a session held open there is terminated from admin.
A failed test leaves a screenshot (tests/browser.py)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from mcp_server.models import ToolCall

from .browser import log_in, wait_for
from .http_cluster import call_tool, cluster, ends, events_until, new_session, open_stream, require_services
from .http_harness import HTTPClient
from .http_support import in_thread
from .waiting import PATIENCE, SLOW_STEPS, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 12
PASSWORD = "a long test password"
TOOLS_CHANGED, PROMPTS_CHANGED = "notifications/tools/list_changed", "notifications/prompts/list_changed"


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker):
    require_services()
    # No broker: a background call runs in the web process that received it (embedded default).
    with django_db_blocker.unblock(), cluster(2, redis_db=REDIS_DB, env={"CELERY_BROKER_URL": ""}) as servers:
        yield servers


@pytest.fixture
def admin(servers, browser) -> str:
    """The browser logged in to the first process's admin; its base URL."""
    User.objects.create_superuser("root", password=PASSWORD)
    base = servers[0].url.removesuffix("/mcp")
    log_in(browser, base, "root", PASSWORD)
    return base


def body(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def saved(driver, what: str) -> None:
    wait_for(driver, lambda d: "successfully" in body(d), f"{what} to be saved")


def run_action(driver, name: str, selected: list[str]) -> None:
    """Tick the rows ``selected`` (their primary keys) of a changelist and run the action."""
    for pk in selected:
        driver.find_element(By.CSS_SELECTOR, f'input[name="_selected_action"][value="{pk}"]').click()
    Select(driver.find_element(By.NAME, "action")).select_by_value(name)
    driver.find_element(By.CSS_SELECTOR, 'button[name="index"]').click()


def names(client: HTTPClient, url: str, method: str = "tools/list", key: str = "tools") -> set[str]:
    return {entry["name"] for entry in client.request(method, {}, url=url).response["result"][key]}


def test_a_tool_disabled_in_admin_is_gone_for_a_client_of_the_other_process(servers, browser, admin):
    a, b = servers
    watcher = new_session(b.url)
    stream = open_stream(watcher, b.url)
    try:
        assert "echo" in names(watcher, b.url)
        browser.get(f"{admin}/admin/mcp_server/primitivesetting/?kind__exact=tool&q=echo")
        browser.find_element(By.LINK_TEXT, "echo").click()
        enabled = wait_for(browser, lambda d: d.find_element(By.NAME, "enabled"), "the change form")
        assert enabled.is_selected()
        enabled.click()
        browser.find_element(By.NAME, "_save").click()
        saved(browser, "the tool's setting")
        events_until(stream, TOOLS_CHANGED)
        assert "echo" not in names(watcher, b.url)
        refused = watcher.request("tools/call", {"name": "echo", "arguments": {"message": "x"}}, url=b.url)
        assert refused.response["error"]["message"] == "Tool not found: echo"

        # A prompt disabled next, with the changelist's action: the stream got one tools
        # list_changed for the save above, none since.
        browser.get(f"{admin}/admin/mcp_server/primitivesetting/?kind__exact=prompt&q=greeting")
        href = browser.find_element(By.LINK_TEXT, "greeting").get_attribute("href")
        row = re.search(r"/(\d+)/change/", href).group(1)
        run_action(browser, "disable_selected", [row])
        wait_for(browser, lambda d: "1 disabled, 0 left as they were." in body(d), "the action's message")
        events = events_until(stream, PROMPTS_CHANGED)
        assert [e.message["method"] for e in events if "list_changed" in e.message.get("method", "")] == [
            PROMPTS_CHANGED]
        assert "greeting" not in names(watcher, b.url, "prompts/list", "prompts")
    finally:
        stream.close()
        # Code's state again in every process (the database's flush after the test sends nothing).
        for kind, name in (("tool", "echo"), ("prompt", "greeting")):
            call_tool(new_session(a.url), a.url, "shape_registry", {"kind": kind, "name": name})


def test_a_prompt_defined_in_admin_is_served_by_the_other_process(servers, browser, admin):
    _a, b = servers
    watcher = new_session(b.url)
    stream = open_stream(watcher, b.url)
    try:
        browser.get(f"{admin}/admin/mcp_server/storedprompt/add/")
        browser.find_element(By.NAME, "name").send_keys("haiku")
        browser.find_element(By.NAME, "description").send_keys("A haiku on a topic")
        arguments = browser.find_element(By.NAME, "arguments")
        arguments.clear()
        arguments.send_keys('[{"name": "topic", "description": "What about", "required": true}]')
        browser.find_element(By.NAME, "messages").send_keys(
            '[{"role": "user", "text": "Write a haiku about {subject}."}]')
        browser.find_element(By.NAME, "_save").click()
        # Refused, with the reason on the field; corrected, saved.
        wait_for(browser, lambda d: "message 1 uses {subject}, which no argument declares" in body(d),
                 "the form's message")
        messages = browser.find_element(By.NAME, "messages")
        messages.clear()
        messages.send_keys('[{"role": "user", "text": "Write a haiku about {topic}."}]')
        browser.find_element(By.NAME, "_save").click()
        saved(browser, "the prompt")

        events_until(stream, PROMPTS_CHANGED)
        listed = watcher.request("prompts/list", {}, url=b.url).response["result"]["prompts"]
        assert {"name": "haiku", "description": "A haiku on a topic", "arguments": [
            {"name": "topic", "description": "What about", "required": True}]} in listed
        got = watcher.request("prompts/get", {"name": "haiku", "arguments": {"topic": "autumn rain"}},
                              url=b.url).response["result"]
        assert got["messages"] == [
            {"role": "user", "content": {"type": "text", "text": "Write a haiku about autumn rain."}}]
    finally:
        stream.close()


def test_a_background_call_on_the_other_process_is_cancelled_from_admin(servers, browser, admin):
    _a, b = servers
    client = new_session(b.url)
    future = in_thread(client.request, "tools/call", {
        "name": "count_in_background", "arguments": {"to": SLOW_STEPS}}, request_id="long", url=b.url)
    call = wait_until(lambda: ToolCall.objects.filter(request_id="long", state="running", progress__gte=1)
                      .first(), what="the call to run and report progress")
    assert call.worker.endswith(f":{b.process.pid}")

    browser.get(f"{admin}/admin/mcp_server/toolcall/?state__exact=running")
    row = browser.find_element(By.CSS_SELECTOR, f'input[name="_selected_action"][value="{call.pk}"]') \
        .find_element(By.XPATH, "./ancestor::tr").text
    assert "count_in_background" in row and f"/{SLOW_STEPS}" in row and str(b.process.pid) in row
    run_action(browser, "cancel_selected", [call.pk])
    wait_for(browser, lambda d: "asked 1 running call(s) to stop" in body(d), "the action's message")

    exchange = future.result(PATIENCE)
    assert exchange.status == 200
    assert exchange.response is None  # the stream ended with no response for that id
    assert not [e for e in exchange.events if e.message and e.message.get("id") == "long"]
    assert wait_until(lambda: ToolCall.objects.get(pk=call.pk).state == "cancelled",
                      what="the record to say cancelled")


def test_a_session_held_open_on_the_other_process_is_terminated_from_admin(servers, browser, admin):
    a, b = servers
    client = new_session(b.url)
    stream = open_stream(client, b.url)
    try:
        browser.get(f"{admin}/admin/mcp_server/session/?q={client.session_id}")
        row = browser.find_element(
            By.CSS_SELECTOR, f'input[name="_selected_action"][value="{client.session_id}"]') \
            .find_element(By.XPATH, "./ancestor::tr")
        assert "test-client" in row.text and "1.0.0" in row.text
        assert row.find_element(By.CSS_SELECTOR, ".field-open_now").text == "1"  # its GET stream
        run_action(browser, "terminate_selected", [client.session_id])
        wait_for(browser, lambda d: "Terminated 1 session(s)" in body(d), "the action's message")
        ends(stream)  # ended by the process holding it
        assert client.request("ping", url=b.url).status == 404
        assert client.request("ping", url=a.url).status == 404
    finally:
        stream.close()
