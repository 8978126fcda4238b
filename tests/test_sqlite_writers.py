"""On SQLite, this process's writers take turns on a lock of their own (``mcp_server.rows.writing``),
which wakes the next as soon as it is let go, rather than in SQLite's busy handler, which sleeps
up to 100 ms between tries: sessions' INSERTs and DELETEs, their activity, the audit trail's rows.
Elsewhere the guard is nothing."""

from __future__ import annotations

import contextlib

from django.db import connections, router

from mcp_server import rows
from mcp_server.audit import insert as audit_insert
from mcp_server.http import session_store
from mcp_server.http.session_store import SessionRecord, SessionStore
from mcp_server.models import AuditRecord, Session


def test_the_guard_is_one_lock_on_sqlite_and_nothing_elsewhere(transactional_db):
    using = router.db_for_write(Session)
    guard = rows.writing(using)
    if connections[using].vendor != "sqlite":
        assert isinstance(guard, contextlib.nullcontext)
        return
    with guard:
        assert not rows.writing(using).acquire(blocking=False)  # another writer waits its turn
    assert guard.acquire(blocking=False)
    guard.release()


def test_a_sessions_rows_and_the_audit_rows_are_written_holding_it(transactional_db, monkeypatch):
    using = router.db_for_write(Session)
    if connections[using].vendor != "sqlite":
        assert isinstance(rows.writing(using), contextlib.nullcontext)
        return
    held: list[tuple[str, bool]] = []
    real_insert_row = session_store.insert_row

    def insert_row(*args, **kwargs):
        held.append(("session", rows._sqlite_writer.locked()))
        return real_insert_row(*args, **kwargs)

    monkeypatch.setattr(session_store, "insert_row", insert_row)
    record = SessionRecord.new(protocol_version="2025-11-25", principal="p")
    record.server = "here"
    SessionStore._insert(record, True, True)
    assert SessionStore._delete_rows([record.id]) == ["p"]
    with rows.writing(using):  # the DELETE took it: it is free again
        pass
    cursor_class = type(connections[AuditRecord.objects.db].cursor())
    execute = cursor_class.execute

    def recording(cursor, *args, **kwargs):
        held.append(("audit", rows._sqlite_writer.locked()))
        return execute(cursor, *args, **kwargs)

    monkeypatch.setattr(cursor_class, "execute", recording)
    audit_insert.insert([_audit_row()])
    # The audit batch's statements (Django's BEGIN on SQLite, the INSERT) all hold it.
    assert held[0] == ("session", True) and set(held[1:]) == {("audit", True)}
    assert AuditRecord.objects.count() == 1


def _audit_row() -> tuple:
    import time

    values = {"time": time.time(), "user_id": None, "username": "", "client_id": "", "subject": "",
              "authentication": "", "session_id": "s", "request_id": 1, "protocol_version": "2025-11-25",
              "method": "tools/call", "name": "echo", "arguments_digest": "", "arguments": "{}",
              "outcome": "ok", "error_code": None, "duration": 0.001, "result_size": 2,
              "background_call": "", "task": False, "trace_id": None}
    from mcp_server.audit.rows import COLUMNS

    assert set(values) == set(COLUMNS)
    return tuple(values[name] for name in COLUMNS)

