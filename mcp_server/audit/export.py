"""Audit rows as CSV or JSON documents: what admin's export and an auditor get, one shape."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..models import AuditRecord

# The columns of an export, in order.
COLUMNS = ["id", "time", "user_id", "username", "client_id", "subject", "authentication", "session_id",
           "request_id", "protocol_version", "method", "name", "arguments_digest", "arguments", "outcome",
           "error_code", "duration", "result_size", "background_call", "task", "trace_id"]


def as_dict(row: AuditRecord) -> dict[str, Any]:
    """A row as JSON-ready values (the time in ISO 8601, UTC)."""
    values = {column: getattr(row, column) for column in COLUMNS}
    values["time"] = row.time.isoformat()
    return values


def rows_of(queryset: Any) -> Iterator[AuditRecord]:
    return queryset.order_by("time", "id").iterator(chunk_size=2000)


def to_json(rows: Iterable[AuditRecord]) -> str:
    return json.dumps([as_dict(row) for row in rows], ensure_ascii=False, indent=1, default=str)


def to_csv(rows: Iterable[AuditRecord]) -> str:
    """CSV with a header line; JSON values (arguments, request id) as compact JSON text."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for row in rows:
        values = as_dict(row)
        for key in ("arguments", "request_id"):
            if values[key] is not None:
                values[key] = json.dumps(values[key], ensure_ascii=False, separators=(",", ":"))
        writer.writerow(["" if values[column] is None else _safe(values[column]) for column in COLUMNS])
    return out.getvalue()


def _safe(value: Any) -> Any:
    """A cell a spreadsheet would run as a formula (=, +, -, @ first) starts with a quote instead."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
