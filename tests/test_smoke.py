"""The demo project over stdio, end to end (STDIO-01)."""

from django.db import connection

from .harness import StdioServer
from .services import REQUIRED, require


def test_ci_runs_against_postgresql():
    """.ci/run sets DATABASE_URL; the suite must really be on PostgreSQL there."""
    require(connection.vendor == "postgresql", "DATABASE_URL does not point at PostgreSQL")
    assert connection.vendor == "postgresql" or not REQUIRED


def test_stdio_round_trip_STDIO_01():
    with StdioServer() as server:
        result = server.initialize()
        assert result["serverInfo"]["name"] == "django-mcp-demo"
        response = server.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        assert response["result"]["structuredContent"] == {"sum": 5}
        assert server.close() == 0
