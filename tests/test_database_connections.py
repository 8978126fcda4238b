"""A process keeps no idle PostgreSQL connection: under ASGI, a connection kept per thread
(``CONN_MAX_AGE``) is never reused, and a flood of anonymous requests to Django's views once left
20 to 49 of them open per process, until the shared server refused every process. Each is now
closed once its request, or worker-thread call, ends."""

from __future__ import annotations

import concurrent.futures
import uuid

import httpx
import pytest
from django.db import connection

from .http_harness import DaphneServer, database_env
from .services import require
from .waiting import PATIENCE, wait_until

REQUESTS, IN_PARALLEL = 80, 8


def connections_of(application_name: str) -> int:
    with connection.cursor() as cursor:
        # This database's only: CI's other leg runs servers of the same name on a database of its own.
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = %s", [application_name])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_flood_of_anonymous_requests_leaves_no_connection_open(django_db_blocker):
    require(connection.vendor == "postgresql", "needs PostgreSQL: set "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres")
    name = f"mcp-flood-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        server = DaphneServer(env={**database_env(), "MCP_TEST_APPLICATION_NAME": name})
    try:
        # The authorization page of the demo's authorization server, with a session cookie: the
        # session is looked up in the database (and found to be nobody's) on every request.
        url = server.url.replace("/mcp", "/oauth/authorize/?client_id=nobody&response_type=code")

        def visit(_index: int) -> int:
            return httpx.get(url, cookies={"sessionid": "x" * 32}, timeout=PATIENCE).status_code

        with concurrent.futures.ThreadPoolExecutor(IN_PARALLEL) as pool:
            statuses = list(pool.map(visit, range(REQUESTS)))
        assert set(statuses) == {302}, statuses  # to the login page
        wait_until(lambda: connections_of(name) == 0, what="the process to hold no connection")
        # And the process still serves what needs the database.
        assert httpx.get(url, cookies={"sessionid": "y" * 32}, timeout=PATIENCE).status_code == 302
    finally:
        server.stop()
