"""Try it in headless Chromium: log in to the demo's admin on daphne, fill a tool's form, run it,
and see its progress and result as they come."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from selenium.webdriver.common.by import By

from mcp_server.models import ToolCall

from .browser import log_in, wait_for
from .http_support import running
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

PASSWORD = "a long test password"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with running(django_db_blocker) as server:
        yield server


@pytest.fixture
def admin_page(browser, server):
    """The browser, logged in as a superuser to admin on the daphne process; its base URL."""
    User.objects.create_superuser("root", password=PASSWORD)
    base = server.url.removesuffix("/mcp")
    log_in(browser, base, "root", PASSWORD)
    return browser, base


def open_try_it(driver, base: str, tool: str, **arguments: str) -> None:
    driver.get(base + reverse("mcp_server_try_it", args=[tool]))
    for name, value in arguments.items():
        field = driver.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)


def run(driver, outcome: str = "result") -> str:
    """Press Run; the result's text once the call ended with ``outcome``."""
    driver.find_element(By.ID, "try-it-run").click()
    result = driver.find_element(By.ID, "try-it-result")
    wait_for(driver, lambda d: result.get_attribute("data-outcome"), "the call to end")
    assert result.get_attribute("data-outcome") == outcome, result.text
    return result.text


def test_try_it_runs_add_and_shows_the_sum(admin_page):
    driver, base = admin_page
    open_try_it(driver, base, "add", a="2", b="3")
    text = run(driver)
    assert '{"sum": 5}' in text  # the text content block
    structured = driver.find_element(By.CLASS_NAME, "try-it-structured").text
    assert structured.replace(" ", "").replace("\n", "") == '{"sum":5}'
    assert driver.find_element(By.ID, "try-it-status").text == "Done."


def test_try_it_shows_field_errors_before_anything_runs(admin_page):
    driver, base = admin_page
    open_try_it(driver, base, "add", a="2")
    driver.find_element(By.ID, "try-it-run").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".field-b .errorlist"), "the field's error")
    assert driver.find_element(By.CSS_SELECTOR, ".field-b .errorlist").text == "This field is required."
    assert not driver.find_element(By.ID, "try-it-output").is_displayed()
    # Corrected, the same form runs.
    driver.find_element(By.NAME, "b").send_keys("40")
    assert '{"sum": 42}' in run(driver)
    assert not driver.find_elements(By.CSS_SELECTOR, ".errorlist")


def test_try_it_shows_progress_before_the_result(admin_page):
    driver, base = admin_page
    open_try_it(driver, base, "slow_count", count="3", delay="0.05")
    assert "Counted to 3" in run(driver)
    progress = driver.find_elements(By.CSS_SELECTOR, "#try-it-events .try-it-progress")
    assert [item.text for item in progress] == [
        f"progress {step} of 3: counted {step}" for step in (1, 2, 3)]
    # Each event is shown as its bytes arrive: the first progress came in an earlier read of the
    # stream than the result, the tool then still counting.
    first_read = int(progress[0].get_attribute("data-read"))
    result_read = int(driver.find_element(By.ID, "try-it-result").get_attribute("data-read"))
    assert first_read < result_read


def test_stop_cancels_the_call(admin_page):
    driver, base = admin_page
    open_try_it(driver, base, "count_in_background", to="600")
    driver.find_element(By.ID, "try-it-run").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#try-it-events .try-it-progress"),
             "the first progress")
    driver.find_element(By.ID, "try-it-stop").click()
    result = driver.find_element(By.ID, "try-it-result")
    wait_for(driver, lambda d: result.get_attribute("data-outcome") == "cancelled", "the page to stop")
    # The page going away reached the tool: its call is cancelled, as admin's running calls show.
    call = wait_until(lambda: ToolCall.objects.filter(tool="count_in_background",
                                                      state=ToolCall.State.CANCELLED).first(),
                      what="the call to be cancelled")
    assert call.owner.username == "root" and call.progress < 600
