"""Inserting a batch of audit rows: with PostgreSQL and psycopg 3, one binary COPY; elsewhere one
``executemany`` of an INSERT.

``bulk_create`` costs about a hundred microseconds of CPU per row of this width (a model instance,
then every field's preparation), several times what a whole stateless ``tools/call`` costs at the
margin. The row's values are plain here (ints, strings, a datetime, JSON text already made), and
a binary COPY writes them with no text formatting at all (a float or a time in text costs more
than the rest of the row).
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
    return f"COPY {quote(AuditRecord._meta.db_table)} ({columns}) FROM STDIN (FORMAT BINARY)"


# The PostgreSQL column types, as psycopg names them for a binary COPY.
_BINARY_TYPES = {"integer": "int4", "bigint": "int8", "smallint": "int2", "varchar": "text", "text": "text",
                 "jsonb": "jsonb", "timestamp with time zone": "timestamptz", "double precision": "float8",
                 "boolean": "bool", "uuid": "uuid"}
_types: dict[str, list[str]] = {}


def _copy_types(connection: Any) -> list[str]:
    types = _types.get(connection.alias)
    if types is None:
        names = []
        for name in COLUMNS:
            field = _field(name)
            db_type = (field.target_field if field.is_relation else field).db_type(connection) or ""
            names.append(_BINARY_TYPES[db_type.split("(")[0].strip()])
        types = _types[connection.alias] = names
    return types


def _jsonb_dumper() -> Any:
    """A psycopg dumper writing JSON text already made as binary jsonb (version 1, then the text)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class JsonbText(Dumper):
        format = Format.BINARY

        def dump(self, obj: str) -> bytes:
            return b"\x01" + obj.encode("utf-8", "surrogatepass")

    return JsonbText


def _encoded(value: Any) -> Encoded | None:
    text = _encode(value)
    return text if text is None or isinstance(text, Encoded) else Encoded(text)


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
        if hasattr(raw, "pipeline"):  # psycopg 3 (psycopg2 has no binary write_row)
            with connection.cursor() as cursor:
                raw_cursor = cursor.cursor
                jsonb = _jsonb_dumper()
                jsonb.oid = raw_cursor.adapters.types["jsonb"].oid
                raw_cursor.adapters.register_dumper(Encoded, jsonb)
                with raw_cursor.copy(_statement(connection, "copy")) as copy:
                    copy.set_types(_copy_types(connection))
                    for row in rows:
                        values = list(row)
                        for at in _JSON_AT:
                            values[at] = _encoded(values[at])
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
