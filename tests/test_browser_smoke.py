"""The browser tests' own check: headless Chromium logs in to the demo's admin on daphne."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from selenium.webdriver.common.by import By

from .browser import log_in
from .http_harness import DaphneServer

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_chromium_logs_in_to_admin(browser):
    User.objects.create_superuser("root", password="a long test password")
    server = DaphneServer()
    try:
        base = server.url.removesuffix("/mcp")
        log_in(browser, base, "root", "a long test password")
        assert "Site administration" in browser.find_element(By.TAG_NAME, "body").text
    finally:
        server.stop()
