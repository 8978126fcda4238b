"""Inserting a batch of audit rows: one COPY with PostgreSQL and psycopg 3, else multi-row INSERTs
in one transaction.

``bulk_create`` costs about a hundred microseconds of CPU per row of this width (a model instance,
then every field's preparation), several times what a whole stateless ``tools/call`` costs at the
margin. The COPY's text is made here, the whole batch in one join: the row's values are plain
(ints, strings, a time, JSON text already made), and their types known by column, so this costs
less than the driver's ``write_row`` (which looks each value's type up and formats a time through
``datetime.__str__``, a third of its cost).
"""

from __future__ import annotations

import json
import select
import time
from datetime import UTC, datetime
from typing import Any

from django.db import connections, router, transaction

from ..models import AuditRecord
from ..rows import writing
from .pacing import Pacer
from .rows import COLUMNS, JSON_COLUMNS

_REQUEST_ID_AT = COLUMNS.index("request_id")
_TIME_AT = COLUMNS.index("time")
_DURATION_AT = COLUMNS.index("duration")
# The statements, by database alias: made once.
_statements: dict[tuple[str, str], Any] = {}


def _copy_statement(connection: Any) -> bytes:
    key = (connection.alias, "copy")
    statement = _statements.get(key)
    if statement is None:
        statement = _statements[key] = f"COPY {_table_and_columns(connection)} FROM STDIN".encode()
    return statement


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)  # request ids: rare


def _encode(value: Any) -> str | None:
    if value is None:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _JSON.encode(value)


def _table_and_columns(connection: Any) -> str:
    """``table (column, ...)``, quoted for ``connection``, the columns in ``rows.COLUMNS`` order."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(_field(name).column) for name in COLUMNS)
    return f"{quote(AuditRecord._meta.db_table)} ({columns})"


def _field(name: str) -> Any:
    return AuditRecord._meta.get_field("user" if name == "user_id" else name)


# Rows an INSERT holds at most (fewer where the backend's parameters run out): its text is kept
# for each number of rows up to this.
ROWS_PER_STATEMENT = 100


def insert(rows: list[tuple], pace: Pacer | None = None) -> None:
    """Write ``rows`` (values in ``rows.COLUMNS`` order) on the database that ``AuditRecord``
    writes to: with PostgreSQL and psycopg 3, one COPY (a few microseconds a row); elsewhere as
    few multi-row INSERTs as the backend's limit on parameters allows, in one transaction.

    ``pace`` is called between rows (the writer's :class:`~.pacing.Pacer`). A statement lets go
    of the interpreter lock while the database works, and under load gets it back only after
    the event loop's switch interval: one statement per row (an ``executemany``) held the
    writer to a couple of hundred rows a second."""
    pace = pace or Pacer()
    connection = connections[router.db_for_write(AuditRecord)]
    pgconn = None
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        pgconn = getattr(connection.connection, "pgconn", None)  # psycopg 3's (psycopg2 has none)
    if pgconn is not None:
        copy(pgconn, _copy_statement(connection), copy_text(rows, pace))
    else:
        insert_values(connection, rows, pace)
    pace.restart()  # the database's work let go of the interpreter lock: the thread has just had it back


def insert_values(connection: Any, rows: list[tuple], pace: Pacer) -> None:
    """``rows`` written on ``connection`` with multi-row INSERTs in one transaction: all or none."""
    adapt_time = connection.ops.adapt_datetimefield_value
    params = []
    for row in rows:
        pace()
        values = list(row)
        values[_REQUEST_ID_AT] = _encode(values[_REQUEST_ID_AT])  # the arguments are JSON text already
        when = values[_TIME_AT]
        if isinstance(when, float):
            when = datetime.fromtimestamp(when, UTC)
        values[_TIME_AT] = adapt_time(when)
        values[_DURATION_AT] = round(values[_DURATION_AT], 6)  # what a row keeps: microseconds
        params.append(values)
    max_params = connection.features.max_query_params or ROWS_PER_STATEMENT * len(COLUMNS)
    per_statement = max(1, min(ROWS_PER_STATEMENT, max_params // len(COLUMNS)))
    # SQLite's requests' writes wait for the batch (one writer there in any case), not longer.
    with writing(connection.alias), transaction.atomic(using=connection.alias), \
            connection.cursor() as cursor:
        for start in range(0, len(params), per_statement):
            chunk = params[start:start + per_statement]
            cursor.execute(_insert_sql(connection, len(chunk)), [value for row in chunk for value in row])


def _insert_sql(connection: Any, count: int) -> str:
    """An INSERT of ``count`` rows, as the backend writes several rows' VALUES."""
    key = (connection.alias, f"insert {count}")
    statement = _statements.get(key)
    if statement is None:
        # PostgreSQL takes JSON text into jsonb only when told; other backends store the text.
        json_slot = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
        slots = [json_slot if name in JSON_COLUMNS else "%s" for name in COLUMNS]
        fields = [_field(name) for name in COLUMNS]
        statement = _statements[key] = (f"INSERT INTO {_table_and_columns(connection)} "
                                        f"{connection.ops.bulk_insert_sql(fields, [slots] * count)}")
    return statement


def copy(pgconn: Any, statement: bytes, data: bytes) -> None:
    """Run ``statement`` (a COPY FROM STDIN) with ``data`` through libpq's own calls, as psycopg's
    ``pq`` module exposes them: psycopg's cursor and ``Copy`` objects cost several times more (a
    hundred Python calls) than formatting a small batch. This thread's connection is in
    autocommit and never in an atomic block, what Django's wrapper would check at each batch;
    it is made blocking for the COPY alone (psycopg keeps it non-blocking for its own waits)."""
    from psycopg import DatabaseError, pq

    blocking = pgconn.nonblocking
    pgconn.nonblocking = 0
    try:
        result = pgconn.exec_(statement)
        if result.status != pq.ExecStatus.COPY_IN:
            raise DatabaseError(_message(result.error_message or pgconn.error_message))
        if pgconn.put_copy_data(data) != 1 or pgconn.put_copy_end() != 1:
            raise DatabaseError(_message(pgconn.error_message))
        failure = None
        while (result := _next_result(pgconn)) is not None:  # until libpq says the COPY is over
            if result.status != pq.ExecStatus.COMMAND_OK and failure is None:
                failure = DatabaseError(_message(result.error_message or pgconn.error_message))
        if failure is not None:
            raise failure
    finally:
        pgconn.nonblocking = blocking


def _next_result(pgconn: Any) -> Any:
    """``pgconn.get_result()`` once it would not wait: psycopg calls ``PQgetResult`` holding the
    interpreter lock, so waiting in it for the server to store the rows held every request of the
    process (15 % of the time the lock was held, under load). The wait is a ``poll``, which lets
    go of the lock."""
    if pgconn.is_busy():
        waiting = select.poll()
        waiting.register(pgconn.socket, select.POLLIN)
        while pgconn.is_busy():
            waiting.poll()
            pgconn.consume_input()
    return pgconn.get_result()


def _message(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").strip() or "the COPY of audit rows failed"


# COPY's text format: a tab between columns, a newline after each row, \N for NULL, and a
# backslash before a backslash, tab, newline or carriage return inside a value.
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NULL = "\\N"
_SEPARATORS = len(COLUMNS) - 1
# The last second formatted, and its text (strftime costs more than a row): kept between batches.
_last_second = (-1, "")


def _line(when: str, user_id: str | None, username: str, client_id: str, subject: str,
          authentication: str, session_id: str, request_id: str | None, protocol_version: str,
          method: str, name: str, arguments_digest: str, arguments: str | None, outcome: str,
          code: str, duration: str, size: str, background_call: str, task: str,
          trace_id: str | None) -> str:
    """One row's line: its values as text already (``code``, ``duration``, ``size`` and ``task``
    formatted), None where a nullable text column holds NULL."""
    return "\t".join((
        when, _NULL if user_id is None else user_id, username, client_id, subject, authentication,
        session_id, _NULL if request_id is None else request_id, protocol_version, method, name,
        arguments_digest, _NULL if arguments is None else arguments, outcome, code, duration, size,
        background_call, task, _NULL if trace_id is None else trace_id))


def copy_text(rows: list[tuple], pace: Pacer | None = None) -> bytes:
    """``rows`` in COPY's text format, UTF-8. A row's time is a datetime, or (a request's row)
    seconds since the epoch: formatted here, the date and time of day once a second."""
    pace = pace or Pacer()
    lines = []
    global _last_second
    second, prefix = _last_second
    for row in rows:
        pace()
        (when, user_id, username, client_id, subject, authentication, session_id, request_id,
         protocol_version, method, name, arguments_digest, arguments, outcome, code, duration,
         size, background_call, task, trace_id) = row
        if isinstance(when, float):
            seconds, micros = divmod(round(when * 1_000_000), 1_000_000)
            if seconds != second:
                second = seconds
                prefix = time.strftime("%Y-%m-%d %H:%M:%S.", time.gmtime(seconds))
            when = f"{prefix}{str(1_000_000 + micros)[1:]}+00"  # six digits, without a format spec
        else:
            when = when.isoformat()
        request_id = str(request_id) if type(request_id) is int else _encode(request_id)
        if user_id is not None:
            user_id = str(user_id)
        code = _NULL if code is None else str(code)
        duration = f"{round(duration * 1_000_000)}e-6"
        size = _NULL if size is None else str(size)
        task = "t" if task else "f"
        line = _line(when, user_id, username, client_id, subject, authentication, session_id, request_id,
                     protocol_version, method, name, arguments_digest, arguments, outcome, code,
                     duration, size, background_call, task, trace_id)
        # Text any caller may have chosen (names, ids, JSON) is escaped when it holds a tab, a
        # backslash, a newline or a carriage return: looked for on the line as a whole, where the
        # 19 separators are the only tabs and the NULL markers the only backslashes.
        if line.count("\t") != _SEPARATORS or "\n" in line or "\r" in line or line.count("\\") != (
                (user_id is None) + (request_id is None) + (arguments is None) + (code is _NULL)
                + (size is _NULL) + (trace_id is None)):
            (user_id, username, client_id, subject, authentication, session_id, request_id,
             protocol_version, name, arguments, background_call, trace_id) = (
                None if value is None else value.translate(_ESCAPES) for value in
                (user_id, username, client_id, subject, authentication, session_id, request_id,
                 protocol_version, name, arguments, background_call, trace_id))
            line = _line(when, user_id, username, client_id, subject, authentication, session_id,
                         request_id, protocol_version, method, name, arguments_digest, arguments,
                         outcome, code, duration, size, background_call, task, trace_id)
        lines.append(line)
    _last_second = (second, prefix)  # one store: another thread's batch reads a matching pair
    lines.append("")
    text = "\n".join(lines)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a client's JSON may hold one) is kept as U+FFFD
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
