"""A session's row, written and deleted by a thread of its own that keeps its connection of
Django's pool (mcp_server/http/session_rows.py): that connection is not checked before each use,
so one that the server ended (a restart, pg_terminate_backend) is replaced and its statement runs
again, unseen by the client; and once idle, it goes back to the pool."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from django.db import IntegrityError, connection, connections
from django.utils import timezone
from psycopg import errors as psycopg_errors

from mcp_server.http import session_rows, session_store
from mcp_server.http.session_statements import delete_statement, insert_statement
from mcp_server.http.session_store import SessionRecord, SessionStore
from mcp_server.models import ResourceSubscription, Session, StreamEvent

from .http_cluster import cluster, new_session, require_services
from .redis_faults import redis_server
from .services import require
from .test_database_connections import connections_of
from .waiting import wait_until


def end_connections_of(application_name: str) -> int:
    """End every connection of the server's processes, as a restart of PostgreSQL would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                       "datname = current_database() AND application_name = %s", [application_name])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_the_server_ended_is_replaced_unseen(tmp_path, django_db_blocker):
    require_services()
    name = f"mcp-rows-{uuid.uuid4().hex[:8]}"
    env = {"MCP_TEST_APPLICATION_NAME": name, "MCP_DATABASE_POOL": "2"}
    with django_db_blocker.unblock(), redis_server(tmp_path) as redis, \
            cluster(1, redis_db=0, redis_port=redis.port, env=env) as [server]:
        first = new_session(server.url)
        assert Session.objects.filter(pk=first.session_id).exists()
        assert end_connections_of(name) >= 1
        # The thread's connection is dead: the INSERT fails on it, then runs on a new one.
        second = new_session(server.url)
        assert Session.objects.filter(pk=second.session_id).exists()
        assert end_connections_of(name) >= 1
        # And the DELETE.
        assert first.delete(url=server.url).status_code == 200
        assert not Session.objects.filter(pk=first.session_id).exists()
        assert second.delete(url=server.url).status_code == 200
        assert not Session.objects.filter(pk=second.session_id).exists()
        assert call_count(name) == 0
        first.close()
        second.close()


def call_count(application_name: str) -> int:
    """Connections of the server that are in a transaction or running a statement (none once
    its requests are answered: the thread's kept connection is idle)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = %s AND state <> 'idle'", [application_name])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_kept_connection_goes_back_to_the_pool_when_idle(tmp_path, django_db_blocker, monkeypatch):
    """The pool keeps its connections open (min_size), so what is seen is that the thread's goes
    back: with a pool of one, a request that needs the ORM after a session is made gets it."""
    require_services()
    name = f"mcp-rows-{uuid.uuid4().hex[:8]}"
    env = {"MCP_TEST_APPLICATION_NAME": name, "MCP_DATABASE_POOL": "1"}
    with django_db_blocker.unblock(), redis_server(tmp_path) as redis, \
            cluster(1, redis_db=0, redis_port=redis.port, env=env) as [server]:
        client = new_session(server.url)
        # logging/setLevel writes the row through the ORM, on a connection of the same pool of
        # one: it waits for the thread to give its connection back (about a second), not 5 s.
        assert client.request("logging/setLevel", {"level": "debug"}, url=server.url).status == 200
        wait_until(lambda: connections_of(name) == 1, what="one connection: the pool's only one")
        assert client.delete(url=server.url).status_code == 200
        assert not Session.objects.filter(pk=client.session_id).exists()
        client.close()


def stored_session(principal: str) -> str:
    """A session row with a stored event and a subscription; its id."""
    session_id = uuid.uuid4().hex
    Session.objects.create(id=session_id, protocol_version="2025-11-25", principal=principal,
                           last_activity=timezone.now())
    StreamEvent.objects.create(session_id=session_id, stream="get", message={"jsonrpc": "2.0"})
    ResourceSubscription.objects.create(session_id=session_id, uri="file:///a")
    return session_id


def is_gone(session_id: str) -> bool:
    return not (Session.objects.filter(pk=session_id).exists()
                or StreamEvent.objects.filter(session_id=session_id).exists()
                or ResourceSubscription.objects.filter(session_id=session_id).exists())


@pytest.mark.django_db(transaction=True)
def test_the_delete_statement_takes_the_events_and_subscriptions_with_the_session():
    require(connection.vendor == "postgresql", "needs PostgreSQL")
    session_id = stored_session("address:1")
    connection.ensure_connection()
    [[(principal, created_at, revision)]] = delete_statement(connection.connection, False, [session_id])
    assert (principal, revision) == ("address:1", "2025-11-25") and created_at.tzinfo is not None
    assert is_gone(session_id)
    assert delete_statement(connection.connection, False, [session_id]) == [[]]


@pytest.mark.django_db(transaction=True)
def test_one_delete_statement_deletes_several_sessions_each_answered_for_itself():
    require(connection.vendor == "postgresql", "needs PostgreSQL")
    first, second = stored_session("address:4"), stored_session("address:5")
    missing = uuid.uuid4().hex
    connection.ensure_connection()
    rows = delete_statement(connection.connection, False, [second, missing, first, second])
    assert [[row[0] for row in found] for found in rows] == [["address:5"], [], ["address:4"], []]
    assert is_gone(first) and is_gone(second)


@pytest.mark.django_db(transaction=True)
def test_an_event_stored_meanwhile_makes_the_delete_lock_the_row_and_run_again(monkeypatch):
    """The one statement failed on the deferred foreign key (an event committed after it began):
    it runs again after the row's lock, and deletes everything."""
    require(connection.vendor == "postgresql", "needs PostgreSQL")
    import psycopg

    failed = []

    class RacedCursor(psycopg.Cursor):
        def execute(self, query, params=None, **kwargs):
            if not failed and str(query).startswith("WITH"):
                failed.append(query)
                raise psycopg.errors.ForeignKeyViolation("an event was stored meanwhile")
            return super().execute(query, params, **kwargs)

    monkeypatch.setattr(psycopg, "Cursor", RacedCursor)
    session_id = stored_session("address:2")
    connection.ensure_connection()
    [found] = delete_statement(connection.connection, False, [session_id])
    assert [row[0] for row in found] == ["address:2"]
    assert failed and is_gone(session_id)


@pytest.mark.django_db(transaction=True)
def test_an_insert_run_again_after_its_connection_broke_finds_its_row():
    """Its first run may have taken effect before the connection broke: the row is its own."""
    require(connection.vendor == "postgresql", "needs PostgreSQL")
    record = SessionRecord.new(protocol_version="2025-11-25", principal="address:3")
    other = SessionRecord.new(protocol_version="2025-11-25", principal="address:6")
    connection.ensure_connection()
    insert_statement(connection.connection, False, [(record, timezone.now())])
    # Run again with another session of its batch that had not been written.
    insert_statement(connection.connection, True, [(record, timezone.now()), (other, timezone.now())])
    with pytest.raises(psycopg_errors.UniqueViolation):
        insert_statement(connection.connection, False, [(record, timezone.now())])
    assert Session.objects.get(pk=record.id).principal == "address:3"
    assert Session.objects.get(pk=other.id).principal == "address:6"


def test_statements_go_to_the_executor_while_the_thread_has_a_backlog(monkeypatch):
    """The thread runs one batch at a time: once MAX_WAITING wait for it, more go to the
    executor's threads (the ORM's path), which run side by side."""

    class Jobs:
        waiting = 0

        def qsize(self) -> int:
            return self.waiting

    class Worker:
        jobs = Jobs()

    monkeypatch.setitem(session_rows._routes, "default", session_rows.PSYCOPG)
    monkeypatch.setattr(session_rows, "_current", Worker())
    Worker.jobs.waiting = session_rows.MAX_WAITING - 1
    assert session_rows.route("default") == session_rows.PSYCOPG
    Worker.jobs.waiting = session_rows.MAX_WAITING
    assert session_rows.route("default") == ""


class FakeConnection:
    def __init__(self, vendor: str, options: dict):
        self.vendor = vendor
        self.settings_dict = {"OPTIONS": options}


def test_the_thread_serves_postgresql_with_a_pool_and_sqlite_and_the_executor_the_rest(monkeypatch):
    monkeypatch.setattr(session_rows, "_routes", {})
    monkeypatch.setattr(session_rows, "_current", None)
    monkeypatch.setattr(session_rows, "connections", {
        "pooled": FakeConnection("postgresql", {"pool": True}),
        "unpooled": FakeConnection("postgresql", {}),
        "embedded": FakeConnection("sqlite", {}),
        "other": FakeConnection("mysql", {})})
    assert [session_rows.route(using) for using in ("pooled", "unpooled", "embedded", "other")] == [
        session_rows.PSYCOPG, "", session_rows.DJANGO, ""]


@pytest.fixture
def rows_thread(monkeypatch):
    """A session rows' thread of the test's own, whose connection is closed at the end."""
    require(connection.vendor == "postgresql", "needs PostgreSQL")
    monkeypatch.setattr(session_rows, "_current", None)
    yield
    if session_rows._current is not None:
        asyncio.run(session_rows.run("default", closing, None))


def closing(_connection, _retried, items: list) -> list:
    connections["default"].close()  # the thread's own connection
    return [None] * len(items)


def run_together(statement, items: list) -> list:
    """``statement``'s answers (or errors) for ``items``, each asked by a task of its own while
    the thread is busy, so that they all wait for it together."""
    busy = threading.Event()

    def held(_connection, _retried, held_items: list) -> list:
        busy.wait(60)  # a bound for a broken test, not a pace: set at once below
        return [None] * len(held_items)

    async def main() -> list:
        holding = asyncio.ensure_future(session_rows.run("default", held, None))
        asking = [asyncio.ensure_future(session_rows.run("default", statement, item)) for item in items]
        await asyncio.sleep(0)  # each task has queued its job
        busy.set()
        await holding
        return await asyncio.gather(*asking, return_exceptions=True)

    return asyncio.run(main())


@pytest.mark.django_db(transaction=True)
def test_statements_waiting_together_run_as_one_and_each_caller_gets_its_own_answer(rows_thread):
    sessions = [stored_session(f"address:{number}") for number in range(3)]
    batches = []

    def deleting(psycopg_connection, retried, session_ids: list) -> list:
        batches.append(list(session_ids))
        return delete_statement(psycopg_connection, retried, session_ids)

    asked = [*sessions, uuid.uuid4().hex]
    answers = run_together(deleting, asked)
    assert batches == [asked]
    principals = [[row[0] for row in found] for found in answers]
    assert principals == [["address:0"], ["address:1"], ["address:2"], []]
    assert all(is_gone(session_id) for session_id in sessions)


@pytest.mark.django_db(transaction=True)
def test_a_row_that_fails_its_batch_fails_only_its_own_caller(rows_thread):
    """The batch's one statement fails whole; then each runs alone, and only the row already
    there gets its error."""
    there = SessionRecord.new(protocol_version="2025-11-25", principal="address:7")
    connection.ensure_connection()
    insert_statement(connection.connection, False, [(there, timezone.now())])
    new = [SessionRecord.new(protocol_version="2025-11-25", principal=f"address:{n}") for n in (8, 9)]
    batches = []

    def inserting(psycopg_connection, retried, rows: list) -> list:
        batches.append(len(rows))
        return insert_statement(psycopg_connection, retried, rows)

    now = timezone.now()
    answers = run_together(inserting, [(new[0], now), (there, now), (new[1], now)])
    assert batches == [3, 1, 1, 1]
    assert answers[0] is None and answers[2] is None and isinstance(answers[1], IntegrityError)
    assert sorted(Session.objects.filter(pk__in=[record.id for record in new]).values_list(
        "principal", flat=True)) == ["address:8", "address:9"]


@pytest.mark.django_db(transaction=True)
def test_on_the_django_route_each_session_is_written_and_answered_alone(rows_thread):
    """SQLite's route: the ORM's path for each session in turn on the thread; a row that fails
    fails its own caller only, and the others are written once."""
    there = SessionRecord.new(protocol_version="2025-11-25", principal="address:10")
    SessionStore._insert(there, False, False)
    new = [SessionRecord.new(protocol_version="2025-11-25", principal=f"address:{n}") for n in (11, 12)]
    answers = run_together(session_store._insert_each, [new[0], there, new[1]])
    assert answers[0] == (None, None) and answers[2] == (None, None)
    assert isinstance(answers[1], IntegrityError)
    assert Session.objects.filter(pk__in=[record.id for record in new]).count() == 2
    missing = uuid.uuid4().hex
    gone = run_together(session_store._delete_each, [(new[1].id, False), (missing, False), (there.id, True)])
    assert gone == [["address:12"], [], ["address:10"]]
    assert list(Session.objects.values_list("principal", flat=True)) == ["address:11"]
