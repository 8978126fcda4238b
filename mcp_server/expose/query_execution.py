"""Running the query tool's reads: one read-only transaction on the chosen alias, bounded by
PostgreSQL's ``statement_timeout`` when one is set.

``statement_timeout`` is PostgreSQL's: on another backend a timeout is refused (the system check
``mcp_server.E111`` at start-up, an error here), never silently ignored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connections, transaction

from .refusals import Refused

# PostgreSQL's SQLSTATE for a statement cancelled, by statement_timeout among others.
QUERY_CANCELED = "57014"


def check_timeout_backend(alias: str) -> None:
    if alias not in connections:
        raise ImproperlyConfigured(f"the query tool reads from the database {alias!r}, which "
                                   "DATABASES does not define")
    if connections[alias].vendor != "postgresql":
        raise ImproperlyConfigured(
            f"a statement timeout for the query tool needs PostgreSQL, and the database {alias!r} "
            f"is {connections[alias].vendor}: set QUERY_STATEMENT_TIMEOUT (or statement_timeout=) "
            "to None there")


@contextlib.contextmanager
def read_only(alias: str, timeout: float | None) -> Iterator[None]:
    """A transaction on ``alias`` that writes nothing and whose statements stop after ``timeout``
    seconds (PostgreSQL); a statement stopped so becomes :class:`Refused`."""
    if timeout is not None:
        check_timeout_backend(alias)
    connection = connections[alias]
    outermost = not connection.in_atomic_block
    with transaction.atomic(using=alias):
        previous = None
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                if outermost:  # inside a caller's transaction, its access mode is its own
                    cursor.execute("SET TRANSACTION READ ONLY")
                if timeout is not None:
                    if not outermost:
                        cursor.execute("SELECT current_setting('statement_timeout')")
                        (previous,) = cursor.fetchone()
                    # set_config(..., true) is SET LOCAL: it ends with the transaction.
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)",
                                   [f"{max(1, round(timeout * 1000))}ms"])
        try:
            yield
        except OperationalError as exc:
            cause = exc.__cause__
            code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
            if code == QUERY_CANCELED and timeout is not None:
                raise Refused(f"The query ran for longer than the statement timeout ({timeout:g} s) "
                              "and the database stopped it. Ask for less: narrower filters, fewer "
                              "rows, or no ordering on a field without an index.") from None
            if code == QUERY_CANCELED:
                raise Refused("The database cancelled the query; nothing was read.") from None
            raise
        if previous is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
