"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) for the browser tests of
admin, driven with Selenium. A test that fails leaves a screenshot of the page in
``SCREENSHOTS`` (named after the test), and says where.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .services import require
from .waiting import PATIENCE

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOTS = Path(os.environ.get("MCP_TEST_SCREENSHOTS", "/tmp/mcp-test-screenshots"))


def require_browser() -> None:
    found = shutil.which("chromium") and shutil.which("chromedriver")
    require(bool(found), "needs Debian's chromium and chromium-driver (apt-get install chromium "
                         "chromium-driver; scripts/setup installs them where it can)")


def start_chromium() -> Any:
    """A headless Chromium under chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1024", "--no-proxy-server"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PATIENCE)
    return driver


def forget_everything(driver: Any) -> bool:
    """Close the other windows, leave the page and drop every cookie (the logins of the test
    before; the pages under test keep nothing in web storage): the next test starts as in a new
    browser. False when the browser no longer answers."""
    from selenium.common.exceptions import WebDriverException

    try:
        for handle in driver.window_handles[1:]:
            driver.switch_to.window(handle)
            driver.close()
        driver.switch_to.window(driver.window_handles[0])
        driver.get("about:blank")
        driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
        return True
    except WebDriverException:
        return False


@pytest.fixture(scope="session")
def chromium_process() -> Iterator[dict[str, Any]]:
    """The run's one Chromium (started by the first browser test; about 3 s a start), in
    ``["driver"]``."""
    holder: dict[str, Any] = {}
    yield holder
    if "driver" in holder:
        holder["driver"].quit()


@pytest.fixture
def browser(request: pytest.FixtureRequest, chromium_process: dict[str, Any]) -> Iterator[Any]:
    """A headless Chromium with no cookie and no page open; on a failed test, a screenshot of
    where it was."""
    require_browser()
    if "driver" not in chromium_process:
        chromium_process["driver"] = start_chromium()
    driver = chromium_process["driver"]
    try:
        yield driver
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            path = SCREENSHOTS / f"{request.node.name}.png"
            driver.save_screenshot(str(path))
            print(f"screenshot of the failed test: {path}")
        if not forget_everything(driver):
            chromium_process.pop("driver").quit()


def log_in(driver: Any, base_url: str, username: str, password: str) -> None:
    """Through admin's own login form."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base_url}/admin/login/?next=/admin/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(driver, lambda d: "/admin/login" not in d.current_url, "the login to go through")


def wait_for(driver: Any, condition: Any, what: str, timeout: float = PATIENCE) -> Any:
    """Selenium's explicit wait: until ``condition(driver)`` is truthy. An element missing, or
    gone with the page it was on (the browser is still navigating), is looked for again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(
        condition, f"timed out waiting for {what}")
