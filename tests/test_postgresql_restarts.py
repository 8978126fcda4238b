"""A PostgreSQL restart under two running daphne processes, with and without Django's connection
pool: while the server is down, what needs it gets 503 ("the database does not answer") at once,
not a hang; a background call in flight runs on; once it is back, the same processes serve again,
and the sessions opened before it are all there.

The PostgreSQL is a cluster of the test's own (tests/postgres_support.py), so stopping it touches
no other test; so is the Redis.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connections
from django.utils import timezone

from mcp_server.http.runtime import runtime_group
from mcp_server.http.session_store import SessionRecord, SessionStore
from mcp_server.http.shared_state import LocalState
from mcp_server.models import Session

from .harness import CLIENT_INFO, REPO
from .http_cluster import call_tool, cluster, new_session, require_services, twin
from .http_harness import Event, Exchange, HTTPClient
from .postgres_support import PrivatePostgres, migrate, private_postgres
from .redis_faults import redis_server
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

DATABASE = "mcp_restarts"
INTERNAL_ERROR = -32603
PROGRESS = "notifications/progress"
UNAVAILABLE = "Service Unavailable: the database does not answer; try again later"
# A request to a process whose database is down must be answered within this (the pool waits 5 s
# for a connection, a connection attempt 5 s at most): longer is a hang, and the test fails on it.
ANSWER_WITHIN = 20.0


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    require_services()
    with private_postgres() as server:
        server.create_database(DATABASE)
        migrate(server.url(DATABASE))
        yield server


def initialize(url: str) -> httpx.Response:
    """An ``initialize`` (a new session: a row written), answered within :data:`ANSWER_WITHIN`."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}}
    check_client_message(message, "2025-11-25")
    return httpx.post(url, json=message, timeout=ANSWER_WITHIN, headers={
        "accept": "application/json, text/event-stream"})


def assert_database_unavailable(status: int, headers: httpx.Headers, body: dict, request_id: object) -> None:
    assert status == 503, (status, body)
    assert int(headers["retry-after"]) >= 1
    check_server_message(body, "2025-11-25")
    assert body["id"] == request_id
    assert body["error"]["code"] == INTERNAL_ERROR
    assert body["error"]["message"] == UNAVAILABLE


def assert_refused(exchange: Exchange, request_id: object) -> None:
    """The request's answer says the database does not answer: its 503, or the JSON-RPC error on
    the response stream, when the request was taken (200) before its handler needed the database."""
    if exchange.status == 503:
        assert_database_unavailable(exchange.status, exchange.headers, exchange.response, request_id)
        return
    assert exchange.status == 200, exchange
    assert exchange.response == {"jsonrpc": "2.0", "id": request_id, "error": {
        "code": INTERNAL_ERROR, "message": UNAVAILABLE}}, exchange.response


def query(postgres: PrivatePostgres, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(postgres.url(DATABASE).replace("postgres://", "postgresql://")) as db:
        return db.execute(sql, params).fetchall()


def call_states(postgres: PrivatePostgres, session_id: str) -> set[str]:
    """The states of the session's background call records."""
    rows = query(postgres, "SELECT state FROM mcp_server_toolcall WHERE session_id = %s", session_id)
    return {state for (state,) in rows}


def serves_new_sessions(url: str) -> bool:
    response = initialize(url)
    if response.status_code == 503:  # not yet: the pool (or the server) is still coming back
        return False
    assert response.status_code == 200, response.text
    check_server_message(response.json(), "2025-11-25", "initialize")
    return True


# Stopped "fast" (its connections ended, as a restart does) and "immediate" (a crash: recovery at
# the next start).
@pytest.mark.parametrize(("pool", "stop"), [(None, "fast"), ("4", "immediate")],
                         ids=["connection-per-request", "pool"])
def test_a_postgresql_restart_fails_requests_fast_and_the_processes_serve_again_by_themselves(
        postgres, tmp_path, pool, stop):
    env = {"DATABASE_URL": postgres.url(DATABASE), "MCP_TEST_APPLICATION_NAME": "mcp-restarts",
           **({"MCP_DATABASE_POOL": pool} if pool else {})}
    with redis_server(tmp_path) as redis, cluster(2, redis_db=0, redis_port=redis.port, env=env) as servers:
        urls = [server.url for server in servers]
        # A session opened on one process and used on both, with a background call (a ToolCall row).
        kept = new_session(urls[0])
        assert call_tool(kept, urls[1], "echo", {"message": "before"}) == "before"
        assert call_tool(kept, urls[0], "count_in_background", {"to": 1}) == "Counted to 1"
        assert kept.request("logging/setLevel", {"level": "debug"}, url=urls[1]).status == 200

        # A background call in flight across the restart (its record written at each step).
        events: list[Event] = []

        def progress() -> int:
            return sum(1 for event in events if event.message and event.message.get("method") == PROGRESS)

        flying = twin(kept, urls[1])
        calls = ThreadPoolExecutor(1)
        in_flight = calls.submit(
            flying.request, "tools/call", {"name": "count_in_background", "arguments": {"to": 6},
                                           "_meta": {"progressToken": "flight"}},
            url=urls[1], on_event=events.append)
        wait_until(progress, what="progress from the background call")

        postgres.stop(stop)
        # Its last steps while the database is down: the record could not take their progress (it
        # is written every half second), and the call ran on to its end, whose final state cannot
        # be written yet either.
        wait_until(lambda: progress() == 6, what="the background call to run to its end")

        # Side by side (with the pool, each waits its 5 s for a connection), on every process: a
        # new session needs its row, a change of the kept session its row, a background call its
        # record. Each is refused at once, with the reason.
        def refused_initialize(url: str) -> None:
            response = initialize(url)
            assert_database_unavailable(response.status_code, response.headers, response.json(), 1)

        def refused(url: str, method: str, params: dict, request_id: int) -> None:
            down = HTTPClient(url, timeout=ANSWER_WITHIN)
            down.session_id, down.revision = kept.session_id, kept.revision
            assert_refused(down.request(method, params, request_id=request_id, url=url), request_id)
            down.close()

        with ThreadPoolExecutor(6) as side_by_side:
            checks = [side_by_side.submit(refused_initialize, url) for url in urls]
            # (Ids of their own: one session's requests in flight at once.)
            checks += [side_by_side.submit(refused, url, "logging/setLevel", {"level": "info"}, 10 + index)
                       for index, url in enumerate(urls)]
            checks += [side_by_side.submit(refused, url, "tools/call", {
                "name": "count_in_background", "arguments": {"to": 1}}, 20 + index)
                for index, url in enumerate(urls)]
            for check in checks:
                check.result(PATIENCE)

        postgres.start()
        # The same processes, not restarted, serve again by themselves.
        for url in urls:
            wait_until(lambda url=url: serves_new_sessions(url), what=f"{url} to serve new sessions again")
        assert all(server.process.poll() is None for server in servers)
        # No session was lost: the one opened before the restart works on both processes.
        for url in urls:
            assert kept.request("ping", url=url).response["result"] == {}
            assert kept.request("logging/setLevel", {"level": "warning"}, url=url).status == 200
            assert call_tool(kept, url, "echo", {"message": "after"}) == "after"
            assert call_tool(kept, url, "count_in_background", {"to": 1}) == "Counted to 1"
        # The call in flight ran on, and ended with its result, its record with it.
        assert in_flight.result(PATIENCE).response["result"]["content"][0]["text"] == "Counted to 6"
        calls.shutdown()
        flying.close()
        assert call_states(postgres, kept.session_id) == {"completed"}
        # Its audit row too (written by the audit writer, which kept it while the database was away).
        [(flight,)] = query(postgres, "SELECT id FROM mcp_server_toolcall WHERE session_id = %s AND "
                            "arguments = '{\"to\": 6}'::jsonb", kept.session_id)
        wait_until(lambda: query(postgres, "SELECT outcome FROM mcp_server_auditrecord "
                                 "WHERE background_call = %s", flight) == [("ok",)],
                   what="the audit row of the call in flight")
        assert kept.delete(url=urls[1]).status_code == 200
        kept.close()


def test_the_pool_setting_is_refused_when_it_is_not_a_size() -> None:
    """``MCP_DATABASE_POOL`` names a size; anything else stops the process with the reason."""
    for value, reason in (("many", "MCP_DATABASE_POOL is a number of connections"),
                          ("-1", "MCP_DATABASE_POOL is a number of connections")):
        done = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"], cwd=REPO, capture_output=True, text=True,
            env={**_environment(), "DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEVELOPMENT": "1",
                 "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/nowhere", "MCP_DATABASE_POOL": value},
            timeout=60, check=False)
        assert done.returncode != 0 and reason in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=REPO, capture_output=True, text=True,
        env={**_environment(), "DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEVELOPMENT": "1",
             "MCP_DATABASE_POOL": "4"}, timeout=60, check=False)
    assert done.returncode != 0 and "MCP_DATABASE_POOL needs PostgreSQL" in done.stderr, done.stderr


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}


@pytest.mark.django_db(transaction=True)
async def test_activity_the_database_refused_is_written_at_the_next_flush(monkeypatch,
                                                                         short_lived_connections):
    """Sessions used while the database is away keep their activity for the next flush: their
    rows do not look idle for longer than they were."""
    state = LocalState()
    store = SessionStore(state, 60, runtime_group("restarts"))
    record = SessionRecord.new(protocol_version="2025-11-25", principal="address:1")
    await store.create(record)
    long_ago = timezone.now() - datetime.timedelta(hours=1)
    await sync_to_async(Session.objects.update)(last_activity=long_ago)
    assert await store.load(record.id) is not None  # used

    write = SessionStore._write_activity

    def refused(session_ids: set[str]) -> None:
        raise OperationalError("the database system is shutting down")

    monkeypatch.setattr(SessionStore, "_write_activity", staticmethod(refused))
    with pytest.raises(OperationalError):
        await store.flush_activity()
    monkeypatch.setattr(SessionStore, "_write_activity", staticmethod(write))
    await store.flush_activity()
    row = await sync_to_async(Session.objects.get)(pk=record.id)
    assert row.last_activity > long_ago
    await sync_to_async(connections.close_all)()  # that thread's, before the test database goes
