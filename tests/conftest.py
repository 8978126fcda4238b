from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

import pytest

from mcp_server import Server, configuration

from .harness import InProcessClient

# conformance/server and conformance/client, when tests start them, run on the interpreter (and so
# the Django) of this test run, not on .venv's: the Django 6 leg tests them on Django 6.
os.environ.setdefault("CONFORMANCE_PYTHON", sys.executable)


@pytest.fixture(autouse=True)
def _fresh_global_configuration():
    """Tests that call ``configure()`` must not leak settings into other tests."""
    saved = dict(configuration.global_configuration._values)
    yield
    configuration.global_configuration._values = saved


@pytest.fixture(scope="module")
def reference_http(tmp_path_factory):
    """The official Python SDK's reference server over HTTP, one per test module."""
    from .client_support import ReferenceHTTPServer

    server = ReferenceHTTPServer(tmp_path_factory.mktemp("reference") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def make_client():
    """``make_client(server, revision="2025-11-25", initialize=True)`` -> InProcessClient."""

    def make(server: Server, revision: str = "2025-11-25", initialize: bool = True,
             capabilities: dict | None = None) -> InProcessClient:
        client = InProcessClient(server, revision)
        if initialize:
            client.initialize(revision, capabilities)
        return client

    return make


@pytest.fixture(scope="session", autouse=True)
def _flush_survives_deadlocks():
    """Retry the test database's flush when PostgreSQL picks it as a deadlock's victim.

    Transactional tests end with a TRUNCATE of every table, while daphne processes started by the
    HTTP tests may still be storing an event (a broadcast sent from a background task after the
    response). PostgreSQL then aborts one of the two; the other side's work is done, so the flush
    only needs to run again.
    """
    from django.core.management.base import CommandError
    from django.core.management.commands import flush

    original = flush.Command.handle

    def handle(self: Any, **options: Any) -> Any:
        for attempt in range(5):
            try:
                return original(self, **options)
            except CommandError as exc:
                if attempt == 4 or "deadlock detected" not in str(exc.__cause__):
                    raise

    flush.Command.handle = handle
    yield
    flush.Command.handle = original


# Rows that flush keeps: every transactional test's flush would otherwise delete them and its
# post_migrate signal insert them all again (create_contenttypes, create_permissions).
KEPT_BY_FLUSH = ("django_content_type", "auth_permission")


@pytest.fixture(scope="session", autouse=True)
def _flush_deletes_rows():
    """On PostgreSQL, the flush after each transactional test DELETEs the rows of each table
    instead of one TRUNCATE of them all: a TRUNCATE makes new files for every table and index
    (~0.5 s a test), while the few rows a test wrote go at once. Content types and permissions
    stay, so post_migrate (which would make them again) runs only when their count changed. A
    flush that resets sequences or cascades (none of the tests') truncates as before."""
    from django.core.management.commands import flush
    from django.db import connections
    from django.db.backends.postgresql.operations import DatabaseOperations

    original_sql_flush, original_emit = DatabaseOperations.sql_flush, flush.emit_post_migrate_signal
    kept_counts: dict[str, tuple] = {}

    def sql_flush(self: Any, style: Any, tables: list[str], *, reset_sequences: bool = False,
                  allow_cascade: bool = False) -> list[str]:
        if reset_sequences or allow_cascade:
            return original_sql_flush(self, style, tables, reset_sequences=reset_sequences,
                                      allow_cascade=allow_cascade)
        # Foreign keys are checked at commit (Django makes them DEFERRABLE INITIALLY DEFERRED),
        # and flush runs these statements in one transaction: their order does not matter.
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables if table not in KEPT_BY_FLUSH]

    def kept_rows(connection: Any) -> tuple:
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {connection.ops.quote_name(table)})"
                                                 for table in KEPT_BY_FLUSH))
            return cursor.fetchone()

    def emit_post_migrate_signal(verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
        connection = connections[db]
        if connection.vendor != "postgresql":
            original_emit(verbosity, interactive, db, **kwargs)
        elif kept_counts.get(db) != kept_rows(connection):
            original_emit(verbosity, interactive, db, **kwargs)
            kept_counts[db] = kept_rows(connection)

    DatabaseOperations.sql_flush = sql_flush
    flush.emit_post_migrate_signal = emit_post_migrate_signal
    yield
    DatabaseOperations.sql_flush, flush.emit_post_migrate_signal = original_sql_flush, original_emit


def skip_summary(skipped: list[pytest.TestReport]) -> str | None:
    """One line: how many tests were skipped, grouped by reason; None when none were."""
    if not skipped:
        return None
    reasons: Counter[str] = Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    parts = [f"{reason} ({count})" for reason, count in reasons.most_common()]
    return f"Skipped {len(skipped)} test(s): " + "; ".join(parts)


def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's closing "N passed" line: one line saying which tests were skipped and why
    (a service missing, usually), so that a run that skipped the multi-process tests says so last."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    line = skip_summary(reporter.stats.get("skipped", []))
    if line is not None:
        reporter.write_line(line, yellow=True, bold=True)


@pytest.fixture
def gate(tmp_path):
    """A gate file for the background tools that wait on one (``background_job``, ``task_job``),
    opened when the test ends: a call that a failed test left waiting there does not hold a
    shared (single-task) worker."""
    path = tmp_path / "gate"
    yield path
    path.touch()


@pytest.fixture
def short_lived_connections():
    """Database connections opened on worker threads close after each use, so none is left open
    when the test database is dropped."""
    from django.db import connection

    saved = connection.settings_dict.get("CONN_MAX_AGE")
    connection.settings_dict["CONN_MAX_AGE"] = 0
    yield
    connection.settings_dict["CONN_MAX_AGE"] = saved


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Each phase's report on the item, for fixtures that act on a failure (browser screenshots)."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


# ``announced`` (a spy on the registry's change announcements, for the admin tests) and the
# ``browser`` fixture (headless Chromium) for every test module.
from .admin_support import announced  # noqa: E402, F401
from .browser import browser, chromium_process  # noqa: E402, F401
