"""Settings for the stdio tests: the demo project plus a test-only app (``tests/stdio_app``).

Environment variables tune it per test:

- ``MCP_TEST_STDIO_MAX_LINE_BYTES`` sets ``MCP_SERVER["STDIO_MAX_LINE_BYTES"]``;
- ``MCP_TEST_S2C_TIMEOUT`` (seconds) sets ``MCP_SERVER["SERVER_TO_CLIENT_REQUEST_TIMEOUT"]``;
- ``MCP_TEST_INSTRUMENT=1`` writes each request's instrumentation data to stderr as a line
  ``mcp-test-instrumentation {json}`` (see :func:`report_instrumentation`);
- ``MCP_TEST_NO_LOGGING=1`` leaves the ``logging`` capability out.
"""

import json
import os
import sys

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, MCP_SERVER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.stdio_app"]

INSTRUMENTATION_PREFIX = "mcp-test-instrumentation "

MCP_SERVER = {**MCP_SERVER, "REGISTRY_IN_DATABASE": True}
if os.environ.get("MCP_TEST_STDIO_MAX_LINE_BYTES"):
    MCP_SERVER["STDIO_MAX_LINE_BYTES"] = int(os.environ["MCP_TEST_STDIO_MAX_LINE_BYTES"])
if os.environ.get("MCP_TEST_S2C_TIMEOUT"):
    MCP_SERVER["SERVER_TO_CLIENT_REQUEST_TIMEOUT"] = float(os.environ["MCP_TEST_S2C_TIMEOUT"])
if os.environ.get("MCP_TEST_INSTRUMENT"):
    MCP_SERVER["INSTRUMENTATION_CALLBACK"] = "tests.stdio_settings.report_instrumentation"
if os.environ.get("MCP_TEST_NO_LOGGING"):
    MCP_SERVER["CAPABILITIES"] = {
        name: value for name, value in MCP_SERVER["CAPABILITIES"].items() if name != "logging"
    }


def report_instrumentation(data: dict) -> None:
    """The instrumentation callback of ``MCP_TEST_INSTRUMENT``: one JSON line per request on stderr."""
    print(INSTRUMENTATION_PREFIX + json.dumps(data, default=repr), file=sys.stderr, flush=True)
