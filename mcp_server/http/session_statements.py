"""The SQL that deletes sessions with what belongs to them, and the statements that
``session_rows``' thread runs on its psycopg connection: the INSERT of sessions and their
DELETE, each for all the sessions waiting for it at once (one round trip, one transaction).

Plain SQL: the ORM's query building costs several times the queries themselves here, and
Django's cascade would first load every session row and ask each related table. Nothing else
points at a session, and no signal listens to these models. Table and column names are the
models', quoted as Django quotes them on PostgreSQL.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session_store import SessionRecord

_INSERT_COLUMNS = ("id", "protocol_version", "client_info", "client_capabilities", "log_level",
                   "owner_id", "origin", "principal", "server", "created_at", "last_activity",
                   "stored_events", "stored_bytes")


def delete_sql(quote: Callable[[str], str], marks: str) -> tuple[list[str], str, str]:
    """What deletes the sessions whose ids ``marks`` stands for, with their stored events and
    subscriptions: the three DELETEs; the rows' lock, which selects the ids of those still there;
    and, for PostgreSQL, the three in one statement returning each session's principal, creation
    time, revision and id."""
    from ..models import ResourceSubscription, Session, StreamEvent

    table, events, subscriptions = (quote(model._meta.db_table) for model in
                                    (Session, StreamEvent, ResourceSubscription))
    session_id, id_ = quote("session_id"), quote("id")
    deletes = [f"DELETE FROM {events} WHERE {session_id} IN ({marks})",
               f"DELETE FROM {subscriptions} WHERE {session_id} IN ({marks})",
               f"DELETE FROM {table} WHERE {id_} IN ({marks})"]
    lock = f"SELECT {id_} FROM {table} WHERE {id_} IN ({marks}) ORDER BY {id_} FOR UPDATE"
    returning = ", ".join(quote(column) for column in ("principal", "created_at", "protocol_version", "id"))
    return deletes, lock, f"WITH e AS ({deletes[0]}), s AS ({deletes[1]}) {deletes[2]} RETURNING {returning}"


def json_text(value: Any) -> str:
    """JSON text of a session's JSON field, as the ORM would have written it."""
    return json.dumps(value, separators=(",", ":"))


def _quote(name: str) -> str:
    """A name quoted as Django quotes it on PostgreSQL."""
    return f'"{name}"'


@functools.cache
def _sql(count: int) -> tuple[str, str, str]:
    """For ``count`` sessions (at most session_rows.MAX_BATCH, so few are kept): the INSERT, the
    DELETE in one statement, and the rows' lock that the DELETE follows when it has to."""
    from ..models import Session

    table = _quote(Session._meta.db_table)
    columns = ", ".join(_quote(column) for column in _INSERT_COLUMNS)
    row = ", ".join("%s::jsonb" if column.startswith("client_") else "%s" for column in _INSERT_COLUMNS)
    rows = ", ".join([f"({row})"] * count)
    _deletes, lock, delete = delete_sql(_quote, ", ".join(["%s"] * count))
    return f"INSERT INTO {table} ({columns}) VALUES {rows}", delete, lock


def insert_statement(connection: Any, retried: bool,
                     rows: Sequence[tuple[SessionRecord, datetime.datetime]]) -> list[None]:
    """Insert new sessions, each ``(record, now)``. Run again (``retried``) after its connection
    broke, its first run may have taken effect: a row already there is then its own (the ids are
    new and random), and is left as it is."""
    import psycopg

    values: list[Any] = []
    for record, now in rows:
        values += (record.id, record.protocol_version, json_text(record.client_info),
                   json_text(record.client_capabilities), record.log_level, record.owner_id,
                   record.origin, record.principal, record.server, now, now, 0, 0)
    insert = _sql(len(rows))[0]
    psycopg.Cursor(connection).execute(f"{insert} ON CONFLICT (id) DO NOTHING" if retried else insert, values)
    return [None] * len(rows)


def delete_statement(connection: Any, retried: bool, session_ids: Sequence[str]) -> list[list[tuple]]:
    """Delete sessions with their stored events and subscriptions; for each id, the session's
    principal, creation time and revision, if it was there (a list of one row, or empty).

    One statement, which sees the events stored before it began. An event stored by a request of
    one of them that committed meanwhile makes the deferred foreign key fail it (nothing is
    deleted then); it runs again after the rows' lock, as ``SessionStore._delete_rows`` always
    does: every event stored before the lock is seen, and one stored after it waits for the
    delete, then fails.
    """
    import psycopg

    _insert, delete, lock = _sql(len(session_ids))
    ids = list(session_ids)
    try:
        rows = psycopg.Cursor(connection).execute(delete, ids * 3).fetchall()
    except psycopg.errors.ForeignKeyViolation:
        # The simple query protocol runs both in one round trip and one transaction, each
        # statement with a snapshot of its own.
        cursor = psycopg.ClientCursor(connection)
        cursor.execute(f"{lock}; {delete}", ids * 4)
        cursor.nextset()
        rows = cursor.fetchall()
    gone = {row[-1]: row[:-1] for row in rows}
    # An id asked twice at once: the first asker deleted it, the second found it gone.
    return [[gone.pop(session_id)] if session_id in gone else [] for session_id in ids]
