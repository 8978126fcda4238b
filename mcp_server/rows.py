"""Plain ``INSERT`` statements for the rows written on the hot path.

The ORM's ``create()`` builds a model instance, runs each field's hooks and encodes JSON fields a
second time: half the cost of storing an SSE event, and a tenth of a whole session's. Where the
database has ``INSERT ... RETURNING`` (PostgreSQL, SQLite 3.35+) one statement does it; elsewhere
the ORM does.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import threading
from contextlib import AbstractContextManager
from typing import Any

from django.db import connections, models

# The writers of this process on SQLite, one at a time (see writing()).
_sqlite_writer = threading.Lock()


def writing(using: str) -> AbstractContextManager[Any]:
    """Held around a write to the database ``using``: on SQLite, one writer of this process at a
    time, queued on a lock that wakes the next one as soon as it is let go; elsewhere nothing.

    SQLite has one writer, and the others wait in its busy handler, which sleeps 1, 2, 5... then
    100 ms between tries and lets a newcomer in first: at 16 sessions at once, a session's
    INSERT or DELETE waited hundreds of milliseconds for a lock held a fraction of one. A writer
    in another process still waits in the busy handler (``timeout``)."""
    if connections[using].vendor == "sqlite":
        return _sqlite_writer
    return contextlib.nullcontext()


def insert_row(using: str, model: type[models.Model], values: dict[str, Any]) -> Any:
    """Insert one row of ``model`` and return its primary key.

    ``values`` are keyed by field name; a JSON field's value is given as JSON text (already
    encoded, as it goes on the wire), a date-time as an aware ``datetime``.
    """
    connection = connections[using]
    fields = [model._meta.get_field(name) for name in values]
    if connection.vendor not in ("postgresql", "sqlite"):
        decoded = {field.name: json.loads(value) if isinstance(field, models.JSONField) else value
                   for field, value in zip(fields, values.values(), strict=True)}
        return model.objects.using(using).create(**decoded).pk
    quote = connection.ops.quote_name
    jsonb = connection.vendor == "postgresql"
    marks = ", ".join("%s::jsonb" if jsonb and isinstance(field, models.JSONField) else "%s"
                      for field in fields)
    params = [connection.ops.adapt_datetimefield_value(value)
              if isinstance(value, datetime.datetime) else value for value in values.values()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(model._meta.db_table)} "
            f"({', '.join(quote(field.column) for field in fields)}) VALUES ({marks}) "
            f"RETURNING {quote(model._meta.pk.column)}", params)
        return cursor.fetchone()[0]
