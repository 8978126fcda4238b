"""Settings of the test suite: the demo project, on a development machine.

``DJANGO_DEVELOPMENT=1`` lets the demo's settings use their insecure development key when
``DJANGO_SECRET_KEY`` is not set; it is set in the environment, so the processes the tests start
(daphne, stdio servers, management commands) inherit it.
"""

import os

os.environ.setdefault("DJANGO_DEVELOPMENT", "1")

from project.settings import *  # noqa: F403
from project.settings import MCP_SERVER

# In-process tests use the default server without database access unless they ask for it, so its
# registry is the code's alone here; the servers the tests start as processes (daphne, stdio:
# tests.http_settings, tests.stdio_settings) read the admin-shaped registry, as a project does.
MCP_SERVER = {**MCP_SERVER, "REGISTRY_IN_DATABASE": False,
              # In process the audit trail is on where a test says so (tests/test_audit*.py): its
              # writer thread would otherwise write into whichever test database is open. The
              # servers the tests start (tests.http_settings) keep it on, as a project does.
              "AUDIT": False}

# The in-process test runner renames the database as it makes the test database, and Django's
# PostgreSQL backend keeps one pool per alias for the process's life, made with the name of its
# first connection: the tests run without the demo's pool, as do the servers they start
# (tests.http_settings), unless MCP_DATABASE_POOL asks for one (tests/test_postgresql_pooling.py,
# tests/test_postgresql_restarts.py).
if not os.environ.get("MCP_DATABASE_POOL"):
    DATABASES["default"].get("OPTIONS", {}).pop("pool", None)  # noqa: F405

# DRF's TokenAuthentication, accepted as it is by the endpoint (tests/test_auth_resource_server.py).
INSTALLED_APPS = [*INSTALLED_APPS, "rest_framework.authtoken"]  # noqa: F405

# The client's database token storage (mcp_client.contrib.django), with fixed test keys: the first
# encrypts, both decrypt.
INSTALLED_APPS = [*INSTALLED_APPS, "mcp_client.contrib.django"]
MCP_CLIENT = {"OAUTH_ENCRYPTION_KEYS": ["ONnMDKb3cqZyXIjrgv8k3s0vDlmsMUmXGYi_fi3SmoY=",
                                        "8pkh9I4itxyiWfhRYBfpBfmLltRs2n2xFhMZa7f7QrI="]}

# A second alias to the same database, as a read replica would be: the model query tool reads from
# the alias it is given (tests/test_expose_model_query.py). In tests it mirrors the test database.
DATABASES = {**DATABASES, "replica": {**DATABASES["default"], "TEST": {"MIRROR": "default"}}}  # noqa: F405
