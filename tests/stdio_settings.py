"""Settings for the stdio tests: the demo project plus a test-only app (``tests/stdio_app``).

``MCP_TEST_STDIO_MAX_LINE_BYTES`` sets ``MCP_SERVER["STDIO_MAX_LINE_BYTES"]``.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS, MCP_SERVER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.stdio_app"]

MCP_SERVER = {**MCP_SERVER}
if os.environ.get("MCP_TEST_STDIO_MAX_LINE_BYTES"):
    MCP_SERVER["STDIO_MAX_LINE_BYTES"] = int(os.environ["MCP_TEST_STDIO_MAX_LINE_BYTES"])
