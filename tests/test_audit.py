"""The audit trail in process: one right row per tools/call, prompts/get and resources/read over
the real Streamable HTTP transport (two users, an OAuth client's bearer token, the 2026-07-28
era), failures, redaction, append-only rows, AUDIT off, retention, and the writer's batches."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_protocol.errors import InvalidParamsError
from mcp_server import InputRequiredResult, Server, ServerContext, ToolResponse, audit, ports
from mcp_server.audit.observer import AuditObserver
from mcp_server.audit.rows import trace_id_of
from mcp_server.audit.writer import AuditWriter
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import AppendOnlyError, AuditRecord
from mcp_server.redaction import REDACTED, digest

from .auth_support import (
    AuthorizationServer,
    Keys,
    bearer,
    call,
    open_session,
    post_json,
    resource_server_from,
    resource_server_settings,
    stateless_app,
)
from .http_support import log_in
from .modern_support import envelope, modern_request, post
from .peer import connected
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def audit_settings(**more: object) -> dict:
    """The trail on, with batches only an explicit flush writes (the tests wait for nothing)."""
    return {**settings.MCP_SERVER, "AUDIT": True, "AUDIT_FLUSH_INTERVAL": 3600, "AUDIT_BATCH_SIZE": 10_000,
            **more}


@pytest.fixture
def audit_on(short_lived_connections):
    with override_settings(MCP_SERVER=audit_settings()):
        assert audit.current_writer() is not None
        yield audit
    assert audit.current_writer() is None  # off again: what was queued is written, nothing observed


def build_server() -> Server:
    server = Server("audited")

    @server.tool
    def echo(message: str, api_key: str = "", server_context: ServerContext | None = None) -> str:
        """Say it back, as the caller."""
        principal = server_context.principal if server_context is not None else None
        who = principal.user.get_username() if principal is not None and principal.user is not None else "-"
        return f"{who}: {message}"

    @server.tool
    def refuse(reason: str) -> ToolResponse:
        """A tool error (isError)."""
        return ToolResponse([{"type": "text", "text": reason}], error=True)

    @server.tool
    def invalid(value: int) -> str:
        """A JSON-RPC error of its own."""
        raise InvalidParamsError(f"no good: {value}")

    @server.tool
    def crash() -> str:
        """An exception: an error result."""
        raise RuntimeError("boom")

    @server.prompt
    def greet(name: str) -> str:
        """A greeting."""
        return f"Hello {name}"

    @server.resource("note://today", name="today", mime_type="text/plain")
    def today() -> str:
        return "a note"

    return server


async def rows(**filters: object) -> list[AuditRecord]:
    def read() -> list[AuditRecord]:
        audit.flush()
        return list(AuditRecord.objects.filter(**filters).order_by("id"))
    return await run_in_thread(read)


def result_bytes(body: dict) -> int:
    return len(json.dumps(body["result"], ensure_ascii=False, separators=(",", ":")).encode())


# Who called: two users on sessions, an OAuth client with a bearer token (2026-07-28) -------------
@pytest.mark.asyncio
async def test_calls_of_two_users_leave_a_row_each_with_their_user_and_session(audit_on):
    from mcp_server.asgi import session_auth

    alice, bob = await run_in_thread(log_in, "alice"), await run_in_thread(log_in, "bob")
    transport = StreamableHTTPTransport(build_server(), enable_json_response=True)
    app = session_auth(transport.as_asgi())
    answers = {}
    for who, logged_in in (("alice", alice), ("bob", bob)):
        session = await open_session(app, logged_in["headers"])
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": f"hi from {who}"}}}
        _raw, body = await post_json(app, message, logged_in["headers"], session)
        assert body["result"]["content"][0]["text"] == f"{who}: hi from {who}"
        answers[who] = (session, body)
    await transport.close()

    found = await rows(method="tools/call")
    assert [row.username for row in found] == ["alice", "bob"]
    for row, (who, logged_in) in zip(found, (("alice", alice), ("bob", bob)), strict=True):
        session, body = answers[who]
        assert row.user_id == logged_in["user"].pk and row.session_id == session
        assert (row.name, row.outcome, row.error_code, row.request_id) == ("echo", "ok", None, 7)
        assert row.arguments == {"message": f"hi from {who}"}
        assert row.arguments_digest == digest({"message": f"hi from {who}"})
        assert row.result_size == result_bytes(body)
        assert row.protocol_version == "2025-11-25" and row.authentication == "session"
        assert row.client_id == "" and row.background_call == "" and row.trace_id is None
        assert 0 < row.duration < 60 and row.time <= timezone.now()


@pytest.mark.asyncio
async def test_an_oauth_clients_modern_call_keeps_client_subject_and_trace_id(audit_on):
    issuer = AuthorizationServer([Keys("key-1")])
    try:
        # Built on the settings in effect: the trail stays on.
        with resource_server_from(resource_server_settings(issuer)) as resource_server:
            app = stateless_app(resource_server, build_server())
            token = issuer.keys[0].mint(client_id="reporting-app", sub="svc-42")
            meta = {**envelope(), "traceparent": TRACEPARENT}
            reply = await post(app, modern_request("tools/call", "r-1", meta=meta, name="echo",
                                                   arguments={"message": "x"}), bearer(token))
            assert reply.status == 200
    finally:
        issuer.close()
    [row] = await rows(client_id="reporting-app")
    assert (row.subject, row.authentication, row.user_id, row.username) == ("svc-42", "jwt", None, "")
    assert (row.protocol_version, row.session_id, row.request_id) == ("2026-07-28", "", "r-1")
    assert row.trace_id == TRACE_ID and row.outcome == "ok"


def test_only_a_valid_traceparent_gives_a_trace_id():
    assert trace_id_of({"_meta": {"traceparent": TRACEPARENT}}) == TRACE_ID
    for bad in ("", "garbage", f"ff-{TRACE_ID}-00f067aa0ba902b7-01", f"00-{'0' * 32}-00f067aa0ba902b7-01",
                f"00-{TRACE_ID}-{'0' * 16}-01", f"00-{TRACE_ID.upper()}-00f067aa0ba902b7-01", 42):
        assert trace_id_of({"_meta": {"traceparent": bad}}) is None
    assert trace_id_of({}) is None and trace_id_of(None) is None


# What happened: failures, prompts and resources ---------------------------------------------------
@pytest.mark.asyncio
async def test_failures_prompts_and_resources_each_leave_the_right_row(audit_on):
    transport = StreamableHTTPTransport(build_server(), enable_json_response=True)
    app = transport.as_asgi()
    session = await open_session(app, {})
    requests = [
        ("tools/call", {"name": "refuse", "arguments": {"reason": "not today"}}),
        ("tools/call", {"name": "invalid", "arguments": {"value": 3}}),
        ("tools/call", {"name": "crash", "arguments": {}}),
        ("tools/call", {"name": "missing", "arguments": {}}),
        ("prompts/get", {"name": "greet", "arguments": {"name": "Ann"}}),
        ("resources/read", {"uri": "note://today"}),
        ("tools/list", {}),  # not audited
    ]
    bodies = []
    for number, (method, params) in enumerate(requests, start=10):
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        _raw, body = await post_json(app, message, {}, session)
        bodies.append(body)
    await transport.close()

    found = await rows(session_id=session)
    assert [(row.method, row.name, row.outcome, row.error_code) for row in found] == [
        ("tools/call", "refuse", "tool_error", None),
        ("tools/call", "invalid", "error", -32602),
        ("tools/call", "crash", "tool_error", None),  # a tool's exception is its error result
        ("tools/call", "missing", "error", bodies[3]["error"]["code"]),
        ("prompts/get", "greet", "ok", None),
        ("resources/read", "note://today", "ok", None),
    ]
    refused, invalid, _crash, _missing, prompt, read = found
    assert refused.result_size == result_bytes(bodies[0]) and invalid.result_size is None
    assert prompt.arguments == {"name": "Ann"} and prompt.result_size == result_bytes(bodies[4])
    assert read.arguments is None and read.arguments_digest == ""
    assert read.result_size == result_bytes(bodies[5])
    assert [row.request_id for row in found] == [10, 11, 12, 13, 14, 15]


@pytest.mark.asyncio
async def test_redaction_removes_a_secret_argument_and_the_digest_is_of_the_arguments_as_sent(audit_on):
    transport = StreamableHTTPTransport(build_server(), enable_json_response=True)
    app = transport.as_asgi()
    session = await open_session(app, {})
    arguments = {"message": "deploy", "api_key": "sk-live-very-secret"}
    _raw, body = await post_json(app, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                       "params": {"name": "echo", "arguments": arguments}}, {}, session)
    assert "result" in body
    await transport.close()
    [row] = await rows(session_id=session)
    assert row.arguments == {"message": "deploy", "api_key": REDACTED}
    assert "sk-live-very-secret" not in json.dumps(row.arguments)
    assert row.arguments_digest == digest(arguments) != digest(row.arguments)


# Off, append-only, retention ----------------------------------------------------------------------
@pytest.mark.asyncio
async def test_with_audit_off_nothing_is_observed_or_written(short_lived_connections):
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "AUDIT": False}):
        assert audit.current_writer() is None
        assert not any(isinstance(observer, AuditObserver) for observer in ports.observers())
        transport = StreamableHTTPTransport(build_server(), enable_json_response=True)
        app = transport.as_asgi()
        session = await open_session(app, {})
        _raw, body = await post_json(app, call("echo"), {}, session)
        assert body["result"]["isError"] is True  # echo needs its message; answered all the same
        await transport.close()
        assert await run_in_thread(lambda: AuditRecord.objects.count()) == 0
    # On by default.
    from mcp_server.settings import DEFAULTS

    assert DEFAULTS["AUDIT"] is True


def make_row(**fields: object) -> AuditRecord:
    values = {"time": timezone.now(), "method": "tools/call", "name": "echo", "outcome": "ok",
              "duration": 0.01, **fields}
    return AuditRecord.objects.create(**values)


def test_rows_are_append_only():
    row = make_row()
    row.outcome = "error"
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(pk=row.pk).update(outcome="error")
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.bulk_update([row], ["outcome"])
    assert AuditRecord.objects.get(pk=row.pk).outcome == "ok"


def test_deleting_a_user_keeps_the_rows_naming_them():
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("gone")
    row = make_row(user=user, username="gone")
    user.delete()
    kept = AuditRecord.objects.get(pk=row.pk)
    assert (kept.user_id, kept.username) == (row.user_id, "gone")


def test_the_retention_command_deletes_old_rows_and_keeps_new_ones():
    now = timezone.now()
    old = make_row(time=now - timedelta(days=31), name="old")
    recent = make_row(time=now - timedelta(days=29), name="recent")
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "AUDIT_RETENTION_DAYS": None}):
        call_command("mcp_clean_audit", stdout=(out := io.StringIO()))
        assert "kept forever" in out.getvalue() and AuditRecord.objects.count() == 2
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "AUDIT_RETENTION_DAYS": 30}):
        call_command("mcp_clean_audit", stdout=(out := io.StringIO()))
    assert out.getvalue().strip() == "Deleted 1 audit row(s) older than AUDIT_RETENTION_DAYS (30 days)."
    assert list(AuditRecord.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not AuditRecord.objects.filter(pk=old.pk).exists()


def test_the_celery_task_and_beat_entry_run_the_same_retention():
    from mcp_server.audit.retention import CLEAN_AUDIT_SCHEDULE
    from mcp_server.tasks import clean_audit

    make_row(time=timezone.now() - timedelta(days=400))
    make_row()
    assert clean_audit() == "deleted 1 audit row(s) older than AUDIT_RETENTION_DAYS (365 days)"
    assert AuditRecord.objects.count() == 1
    [entry] = CLEAN_AUDIT_SCHEDULE.values()
    assert entry["task"] == clean_audit.name == "mcp_server.clean_audit"
    assert settings.CELERY_BEAT_SCHEDULE["mcp-clean-audit"] == entry


# The writer: batches, and the flush when the process stops cleanly -------------------------------
def entry(number: int) -> tuple:
    params = {"name": "echo", "arguments": {"n": number}}
    response = {"jsonrpc": "2.0", "id": number, "result": {"content": []}}
    return (time.time(), 0.001, "tools/call", params, "s", number, "2025-11-25", None, None, "", response,
            None)


def test_full_batches_are_written_by_the_writers_thread_and_the_rest_at_shutdown(short_lived_connections):
    writer = AuditWriter(batch_size=5, interval=3600)
    for number in range(5):
        writer.add_request(entry(number))
    # A full batch: the thread wakes for it, long before its interval.
    wait_until(lambda: AuditRecord.objects.count() == 5, what="the full batch to be written")
    for number in range(5, 7):
        writer.add_request(entry(number))
    assert writer.pending == 2  # less than a batch waits for the interval (an hour here)...
    assert writer.stop() == 2  # ...or for the flush of a clean shutdown
    assert sorted(AuditRecord.objects.values_list("request_id", flat=True)) == list(range(7))


def test_text_with_tabs_newlines_backslashes_and_a_null_marker_is_stored_as_it_was(short_lived_connections):
    odd = "a\tb\nc\rd\\e \\N \u00e9\u65e5"
    params = {"name": odd, "arguments": {odd: odd, "path": "C:\\dir"}}
    response = {"jsonrpc": "2.0", "id": odd, "result": {"content": [{"type": "text", "text": odd}]}}
    finished = time.time()
    writer = AuditWriter(batch_size=10, interval=3600)
    writer.add_request((finished, 0.25, "tools/call", params, odd, odd, "2025-11-25", None, None, odd,
                        response, None))
    assert writer.stop() == 1
    row = AuditRecord.objects.get()
    assert (row.name, row.username, row.session_id, row.request_id) == (odd, odd, odd, odd)
    assert row.arguments == params["arguments"] and row.arguments_digest == digest(params["arguments"])
    assert row.duration == 0.25 and row.result_size == result_bytes(response)
    assert abs(row.time.timestamp() - (finished - 0.25)) < 1e-5 and row.error_code is None


def test_the_shutdown_hooks_flush_the_installed_writer(short_lived_connections):
    from celery.signals import worker_process_shutdown, worker_shutdown

    with override_settings(MCP_SERVER=audit_settings()):
        for number in range(3):
            audit.current_writer().add_request(entry(number))
        assert AuditRecord.objects.count() == 0  # queued, not written: the interval is an hour
        # What atexit and Celery's shutdown signals call.
        worker_shutdown.send(sender=None)
        assert AuditRecord.objects.count() == 3
        audit.current_writer().add_request(entry(3))
        worker_process_shutdown.send(sender=None, pid=0, exitcode=0)
        assert AuditRecord.objects.count() == 4


def test_the_writers_thread_lets_requests_run_between_rows(short_lived_connections, monkeypatch):
    """A batch is made and written with pauses of the writer's thread in between (a sleep, which
    lets go of the interpreter lock), each once the thread has held it ``HOLD_SECONDS``: made in
    one go, a batch held the request waiting for the lock for the interpreter's switch interval.
    Here every row takes that long, to make and to format."""
    import types

    from mcp_server.audit import pacing

    pauses: list[float] = []
    clock = [0.0]

    def perf_counter() -> float:
        clock[0] += pacing.HOLD_SECONDS  # each row takes that long
        return clock[0]

    monkeypatch.setattr(pacing, "time", types.SimpleNamespace(sleep=pauses.append, perf_counter=perf_counter))
    writer = AuditWriter(batch_size=100, interval=3600)
    rows = 40
    for number in range(rows):
        writer.add_request(entry(number))
    assert writer.stop() == rows
    assert AuditRecord.objects.count() == rows
    # Between the rows made, and between the rows formatted for the database.
    assert len(pauses) >= 2 * rows - 1
    assert all(pause > 0 for pause in pauses)  # a sleep of 0 hands nothing over


def test_the_writer_pauses_by_the_time_it_held_the_interpreter(monkeypatch):
    """Not every few rows: under load, a thread that lets go of the interpreter lock gets it back
    only after the event loop's switch interval, and pauses by the row starved the writer."""
    import types

    from mcp_server.audit import pacing

    pauses: list[float] = []
    clock = [0.0]
    fake_time = types.SimpleNamespace(sleep=pauses.append, perf_counter=lambda: clock[0])
    monkeypatch.setattr(pacing, "time", fake_time)
    pace = pacing.Pacer()
    for _ in range(10):
        clock[0] += pacing.HOLD_SECONDS / 4
        pace()
    assert len(pauses) == 2  # after the 4th and the 8th quarter
    clock[0] += pacing.HOLD_SECONDS / 2
    pace.restart()  # a database call let go of the lock meanwhile
    clock[0] += pacing.HOLD_SECONDS / 2
    pace()
    assert len(pauses) == 2


def _made_rows(count: int) -> list[tuple]:
    from mcp_server.audit.pacing import Pacer

    return AuditWriter()._rows([("request", entry(number)) for number in range(count)], Pacer())


def test_without_copy_a_batch_is_a_few_multi_row_inserts_in_one_transaction(short_lived_connections):
    """Where there is no COPY (SQLite, the embedded default), a batch is written as multi-row
    INSERTs, as many rows each as the backend's parameters allow: a statement per row lets go of
    the interpreter lock for each row, and under load the writer gets it back only after the
    event loop's switch interval (it fell behind the calls it records)."""
    from django.db import connections, router
    from django.test.utils import CaptureQueriesContext

    from mcp_server.audit import insert as insert_module
    from mcp_server.audit.pacing import Pacer
    from mcp_server.audit.rows import COLUMNS

    connection = connections[router.db_for_write(AuditRecord)]
    rows = _made_rows(120)
    limit = connection.features.max_query_params or 10**6
    per_statement = min(insert_module.ROWS_PER_STATEMENT, limit // len(COLUMNS))
    with CaptureQueriesContext(connection) as queries:
        insert_module.insert_values(connection, rows, Pacer())
    inserts = [query["sql"] for query in queries if query["sql"].startswith("INSERT")]
    assert len(inserts) == -(-120 // per_statement)  # one statement per row group, not per row
    assert sorted(AuditRecord.objects.values_list("request_id", flat=True)) == list(range(120))
    row = AuditRecord.objects.get(request_id=7)
    assert (row.method, row.name, row.arguments, row.outcome) == ("tools/call", "echo", {"n": 7}, "ok")


def test_without_copy_a_batch_is_written_whole_or_not_at_all(short_lived_connections):
    """The batch's statements are one transaction: a row the database refuses in its last
    statement leaves none of it written, so the writer's retry writes no row twice."""
    from django.db import IntegrityError, connections, router

    from mcp_server.audit import insert as insert_module
    from mcp_server.audit.pacing import Pacer
    from mcp_server.audit.rows import COLUMNS

    connection = connections[router.db_for_write(AuditRecord)]
    rows = _made_rows(120)
    method_at = COLUMNS.index("method")
    rows[-1] = (*rows[-1][:method_at], None, *rows[-1][method_at + 1:])  # NOT NULL
    with pytest.raises(IntegrityError):
        insert_module.insert_values(connection, rows, Pacer())
    assert AuditRecord.objects.count() == 0


def test_rows_the_database_refuses_are_kept_for_the_next_flush(short_lived_connections, monkeypatch):
    import mcp_server.audit.writer as writer_module

    writer = AuditWriter(batch_size=100, interval=3600)
    writer.add_request(entry(1))
    real = writer_module.insert

    def refuse(rows: list, pace) -> None:
        raise RuntimeError("database away")

    monkeypatch.setattr(writer_module, "insert", refuse)
    assert writer.flush() == 0 and writer.pending == 1
    monkeypatch.setattr(writer_module, "insert", real)
    assert writer.stop() == 1 and AuditRecord.objects.count() == 1


def test_a_backlog_is_made_and_written_a_batch_at_a_time(short_lived_connections, monkeypatch):
    """A backlog (a burst's rows) is made into rows a batch at a time, each written before the
    next is made: made in one go, it held the interpreter and then freed it all at once. A batch
    the database refuses stays queued with everything after it, and the batches before it count."""
    import mcp_server.audit.writer as writer_module

    writer = AuditWriter(batch_size=10, interval=3600)
    monkeypatch.setattr(writer, "_ring", lambda: None)  # the thread sleeps: this test flushes
    for number in range(25):
        writer.add_request(entry(number))
    real = writer_module.insert
    written: list[int] = []

    def once_then_refuse(rows: list, pace) -> None:
        if written:
            raise RuntimeError("database away")
        written.append(len(rows))
        real(rows, pace)

    monkeypatch.setattr(writer_module, "insert", once_then_refuse)
    assert writer.flush() == 10 and written == [10] and writer.pending == 15

    def counting(rows: list, pace) -> None:
        written.append(len(rows))
        real(rows, pace)

    monkeypatch.setattr(writer_module, "insert", counting)
    assert writer.stop() == 15 and written == [10, 10, 5]
    assert sorted(AuditRecord.objects.values_list("request_id", flat=True)) == list(range(25))


def test_the_copys_answer_is_awaited_outside_the_interpreter_lock():
    """psycopg's ``get_result`` waits for the server holding the interpreter lock (every request
    of the process waited with it): the writer waits in ``poll``, which lets go of the lock,
    until libpq has the answer, and only then takes it."""
    import socket

    from mcp_server.audit import insert as insert_module

    ours, theirs = socket.socketpair()

    class Connection:
        socket = ours.fileno()
        busy = 2  # two reads before libpq has the whole answer
        consumed = 0

        def is_busy(self) -> bool:
            return self.busy > 0

        def consume_input(self) -> None:
            self.consumed += 1
            self.busy -= 1

        def get_result(self) -> str:
            assert not self.is_busy(), "get_result would have waited holding the interpreter lock"
            return "result"

    with ours, theirs:
        theirs.send(b"answer")  # readable: each poll returns at once
        connection = Connection()
        assert insert_module._next_result(connection) == "result"
        assert connection.consumed == 2


def test_a_copy_the_database_refuses_raises_and_leaves_the_connection_usable(short_lived_connections):
    """The COPY runs on libpq's own calls: a refusal (here a row the table cannot take) is an
    error the writer keeps its rows for, and the connection serves the next batch."""
    from django.db import connections, router

    from mcp_server.audit import insert as insert_module

    connection = connections[router.db_for_write(AuditRecord)]
    if connection.vendor != "postgresql":
        pytest.skip("the COPY path is PostgreSQL's")
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    statement = insert_module._copy_statement(connection)
    import psycopg

    with pytest.raises(psycopg.DatabaseError):
        insert_module.copy(pgconn, statement, b"not a row\n")
    assert pgconn.nonblocking == 1  # as psycopg keeps it
    writer = AuditWriter(batch_size=100, interval=3600)
    writer.add_request(entry(1))
    assert writer.flush() == 1 and AuditRecord.objects.count() == 1


# A background call run in the web process (no broker): one row, with its call id -----------------
@pytest.mark.asyncio
async def test_a_background_call_run_here_leaves_one_row_with_its_call_id(audit_on):
    from mcp_server.models import ToolCall

    server = Server("audited-background")

    @server.tool(background=True)
    def slow_sum(a: int, b: int) -> str:
        """Add, in the background."""
        return str(a + b)

    transport = StreamableHTTPTransport(server, enable_json_response=True)
    app = transport.as_asgi()
    session = await open_session(app, {})
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "slow_sum", "arguments": {"a": 2, "b": 3}}}
    _raw, body = await post_json(app, message, {}, session)
    assert body["result"]["content"][0]["text"] == "5"
    await transport.close()
    [row] = await rows(session_id=session)
    call = await run_in_thread(ToolCall.objects.get)
    assert (row.background_call, row.name, row.outcome, row.request_id) == (call.id, "slow_sum", "ok", 5)
    assert row.arguments == {"a": 2, "b": 3} and row.result_size == result_bytes(body)
    assert row.time == call.created_at


@pytest.mark.parametrize("value", [{}, {"b": 1, "a": [1, 2.5, None, True]}, {"ü": "日本", "x": {"y": "z"}},
                                   {"when": timezone.now()}, ["list", {"nested": {"k": "v"}}]])
def test_the_writers_digest_and_size_are_the_policys_digest_and_the_wires_bytes(value):
    from mcp_protocol import jsonrpc
    from mcp_server.audit import rows as audit_rows

    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    assert digest(value) == hashlib.sha256(canonical.encode()).hexdigest()
    if not isinstance(value, dict) or "when" not in value:
        assert audit_rows.result_size(value) == len(jsonrpc.encode(value).encode("utf-8"))


def test_a_lone_surrogate_still_makes_a_row():
    from mcp_protocol import jsonrpc
    from mcp_server.audit import rows as audit_rows

    value = {"text": "half \ud800 a pair"}
    assert len(digest(value)) == 64
    assert audit_rows.result_size(value) == len(jsonrpc.encode(value).encode("utf-8"))


@pytest.mark.parametrize("request_id", [0, 7, -12, 10**20, "abc", "日本-1", 'q"uote\\'])
def test_the_size_a_transport_noted_less_the_envelope_is_the_results_size(request_id):
    """The row's result size comes from the transport's encoding of the whole response, less
    what jsonrpc.response() puts around the result; without a note it is encoded once more."""
    from mcp_protocol import jsonrpc
    from mcp_server.audit import rows as audit_rows
    from mcp_server.redaction import redactor

    result = {"content": [{"type": "text", "text": "ünïcode"}], "isError": False}
    response = jsonrpc.response(request_id, result)
    entry = (time.time(), 0.01, "tools/call", {"name": "echo", "arguments": {}}, None, request_id,
             "2025-11-25", None, None, "", response, None)
    expected = len(jsonrpc.encode(result).encode("utf-8"))
    computed = audit_rows.request_row(entry, redactor())[audit_rows.COLUMNS.index("result_size")]
    ports.awaited_sizes[id(response)] = None
    try:
        ports.note_encoded(response, jsonrpc.encode(response))
        assert ports.awaited_sizes[id(response)] == len(jsonrpc.encode(response).encode("utf-8"))
        noted = audit_rows.request_row(entry, redactor())[audit_rows.COLUMNS.index("result_size")]
        assert id(response) not in ports.awaited_sizes  # taken by the row
    finally:
        ports.awaited_sizes.pop(id(response), None)
    assert computed == noted == expected


# A cancelled call and an input_required answer ---------------------------------------------------
@pytest.mark.asyncio
async def test_a_cancelled_call_and_an_input_required_answer_leave_their_rows(audit_on):
    server = build_server()
    started = asyncio.Event()

    @server.tool
    async def wait_forever(server_context: ServerContext) -> str:
        """Runs until its client cancels it, watching its token as a long handler does."""
        started.set()
        for _ in range(6000):  # bounded: 30 s
            if server_context.cancelled():
                return "stopped"  # returned, yet never sent
            await asyncio.sleep(0.005)
        raise AssertionError("never cancelled")

    @server.tool
    def ask_name() -> InputRequiredResult:
        """Asks its client for a name first (2026-07-28)."""
        form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return InputRequiredResult({"name": InputRequiredResult.form_elicitation("Your name?", form)})

    peer = await connected(server)
    call = peer.start_tool("wait_forever", {}, request_id="w-1")
    await asyncio.wait_for(started.wait(), 30)
    await peer.cancel("w-1", "changed my mind")
    assert await asyncio.wait_for(call, 30) is None  # a cancelled request gets no response

    transport = StreamableHTTPTransport(server, stateless=True)
    try:
        meta = envelope({"elicitation": {"form": {}}})
        message = modern_request("tools/call", "a-1", meta=meta, name="ask_name", arguments={})
        reply = await post(transport.as_asgi(), message)
        assert reply.result["resultType"] == "input_required"
    finally:
        await transport.close()

    [cancelled] = await rows(name="wait_forever")
    assert (cancelled.outcome, cancelled.error_code, cancelled.result_size) == ("cancelled", None, None)
    assert cancelled.request_id == "w-1"
    [asked] = await rows(name="ask_name")
    assert (asked.outcome, asked.request_id) == ("input_required", "a-1")
    assert asked.protocol_version == "2026-07-28"
    assert asked.result_size == result_bytes({"result": reply.result})
