"""Settings of the daphne processes that HTTP tests start: the demo plus ``tests.stdio_app``.

``MCP_TEST_HTTP_SETTINGS`` (a JSON object) overrides keys of ``MCP_SERVER``; ``DATABASE_URL`` and
``REDIS_URL`` work as for the demo; ``MCP_TEST_CELERY_QUEUE`` names the Celery queue.
"""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, INSTALLED_APPS, MCP_SERVER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.stdio_app"]
MCP_SERVER = {**MCP_SERVER, "REGISTRY_IN_DATABASE": True, "AUDIT": True,
              **json.loads(os.environ.get("MCP_TEST_HTTP_SETTINGS") or "{}")}
# Background calls' Celery queue: one of a test's own on a broker other checkouts share.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("MCP_TEST_CELERY_QUEUE") or "celery"

# Named, so that a test can end (or count) the processes' database connections and no others.
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = (
        os.environ.get("MCP_TEST_APPLICATION_NAME") or "mcp-test-server")

# The tests hand the server the test database by its real name.
if os.environ.get("MCP_TEST_SQLITE_NAME"):
    DATABASES["default"]["NAME"] = os.environ["MCP_TEST_SQLITE_NAME"]

# Static files as production serves them: only what collectstatic gathered there.
if os.environ.get("MCP_TEST_STATIC_ROOT"):
    STATIC_ROOT = os.environ["MCP_TEST_STATIC_ROOT"]
    WHITENOISE_USE_FINDERS = False

# MCP_TEST_LOG_IDS names a file: the package's and tests.stdio_app's records go there too, one JSON
# object a line with the ids of the message being served (docs/production.md, "Logging").
if os.environ.get("MCP_TEST_LOG_IDS"):
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"mcp": {"()": "mcp_server.log_context.RequestContextFilter"}},
        "formatters": {"json": {"()": "tests.log_json.JSONFormatter"}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
            "json": {"class": "logging.FileHandler", "filename": os.environ["MCP_TEST_LOG_IDS"],
                     "formatter": "json", "filters": ["mcp"]},
        },
        "root": {"handlers": ["stderr"], "level": "INFO"},
        # On named loggers, not the root: a Celery worker empties the root's handlers as it starts.
        "loggers": {name: {"handlers": ["json"], "level": "INFO"}
                    for name in ("mcp_server", "mcp_client", "stdio_app")},
    }
# Spans of this process (MCP_SERVER["TELEMETRY"]), one JSON object a line in a file of its own
# under MCP_TEST_SPANS_DIR, written as each span ends: the trace tests read every process's.
if os.environ.get("MCP_TEST_SPANS_DIR"):
    from tests.span_files import export_spans_to

    export_spans_to(os.environ["MCP_TEST_SPANS_DIR"])
