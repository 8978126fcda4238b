"""Inserting a batch of audit rows in one statement: a COPY with PostgreSQL and psycopg 3, else an
``executemany`` of a prepared INSERT.

``bulk_create`` costs about a hundred microseconds of CPU per row of this width (a model instance,
then every field's preparation), several times what a whole stateless ``tools/call`` costs at the
margin; the row's values are plain here (ints, strings, a datetime, JSON text already made), so
the driver adapts them directly.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections, router

from ..models import AuditRecord
from .rows import COLUMNS, JSON_COLUMNS, Encoded

_JSON_AT = tuple(COLUMNS.index(name) for name in JSON_COLUMNS)
_TIME_AT = COLUMNS.index("time")
# The statements, by database alias: made once.
_statements: dict[tuple[str, str], str] = {}


def _statement(connection: Any, kind: str) -> str:
    key = (connection.alias, kind)
    statement = _statements.get(key)
    if statement is None:
        statement = _statements[key] = (_copy_sql if kind == "copy" else _sql)(connection)
    return statement


def _sql(connection: Any) -> str:
    quote = connection.ops.quote_name
    fields = [_field(name) for name in COLUMNS]
    # PostgreSQL takes JSON text into jsonb only when told; other backends store the text.
    json_slot = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    slots = [json_slot if name in JSON_COLUMNS else "%s" for name in COLUMNS]
    return (f"INSERT INTO {quote(AuditRecord._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
            f"VALUES ({', '.join(slots)})")


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)  # request ids: rare


def _encode(value: Any) -> str | None:
    if value is None or isinstance(value, Encoded):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _JSON.encode(value)


def _copy_sql(connection: Any) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(_field(name).column) for name in COLUMNS)
    return f"COPY {quote(AuditRecord._meta.db_table)} ({columns}) FROM STDIN"


def _field(name: str) -> Any:
    return AuditRecord._meta.get_field("user" if name == "user_id" else name)


def insert(rows: list[tuple]) -> None:
    """Write ``rows`` (values in ``rows.COLUMNS`` order) on the database that ``AuditRecord``
    writes to: with PostgreSQL and psycopg 3, one COPY (a few microseconds a row); elsewhere one
    ``executemany`` of an INSERT."""
    connection = connections[router.db_for_write(AuditRecord)]
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        raw = connection.connection
        if hasattr(raw, "pipeline"):  # psycopg 3 (psycopg2 has no write_row)
            with connection.cursor() as cursor, cursor.cursor.copy(_statement(connection, "copy")) as copy:
                for row in rows:
                    values = list(row)
                    for at in _JSON_AT:
                        values[at] = _encode(values[at])
                    copy.write_row(values)
            return
    adapt_time = connection.ops.adapt_datetimefield_value
    params = []
    for row in rows:
        values = list(row)
        for at in _JSON_AT:
            values[at] = _encode(values[at])
        values[_TIME_AT] = adapt_time(values[_TIME_AT])
        params.append(values)
    with connection.cursor() as cursor:
        cursor.executemany(_statement(connection, "insert"), params)
