"""What one session of the model query tool has read so far, in rows and bytes, in Django's cache.

A session's row in the database has no room for tool state, and a handshake session's requests
land on any process: the counters live in the cache named by ``MCP_SERVER["QUERY_BUDGET_CACHE"]``,
which every process must share (Redis, Memcached, the database cache) for the budget to hold
across them. They expire after ``SESSION_IDLE_TIMEOUT`` seconds without a query, as the session
does. A request with no session (2026-07-28 requests, stateless HTTP) counts against its user.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.cache import caches

from ..settings import mcp_settings

_PREFIX = "mcp_server:query_budget:"


def budget_key(server_context: Any) -> str:
    """Whose budget a call spends: its session's, else its user's, else its client's."""
    session = getattr(server_context, "session", None)
    if getattr(session, "id", None):
        return f"session:{session.id}"
    principal = getattr(server_context, "principal", None)
    if getattr(principal, "user_id", None) is not None:
        return f"user:{principal.user_id}"
    if getattr(session, "principal_key", None):
        return str(session.principal_key)
    # stdio and in-process servers: one process serves one session.
    return f"process:{os.getpid()}:{id(session)}"


class SessionBudget:
    """The rows and bytes a session may still read (None: no limit)."""

    def __init__(self, key: str) -> None:
        self.rows_key = f"{_PREFIX}{key}:rows"
        self.bytes_key = f"{_PREFIX}{key}:bytes"
        self.max_rows = mcp_settings.QUERY_SESSION_MAX_ROWS
        self.max_bytes = mcp_settings.QUERY_SESSION_MAX_BYTES
        self.cache = caches[mcp_settings.QUERY_BUDGET_CACHE]
        self.timeout = mcp_settings.SESSION_IDLE_TIMEOUT

    def remaining(self) -> tuple[int | None, int | None]:
        if self.max_rows is None and self.max_bytes is None:
            return None, None
        used = self.cache.get_many([self.rows_key, self.bytes_key])
        rows = None if self.max_rows is None else max(0, self.max_rows - used.get(self.rows_key, 0))
        size = None if self.max_bytes is None else max(0, self.max_bytes - used.get(self.bytes_key, 0))
        return rows, size

    def spend(self, rows: int, size: int) -> None:
        """Count what a call returned; concurrent calls of one session may each spend what was
        left when they started, so a budget can be overrun by at most those calls' results."""
        for key, amount, limit in ((self.rows_key, rows, self.max_rows),
                                   (self.bytes_key, size, self.max_bytes)):
            if limit is None:
                continue
            self.cache.add(key, 0, self.timeout)
            try:
                self.cache.incr(key, amount)
            except ValueError:  # expired between add and incr
                self.cache.add(key, amount, self.timeout)
            self.cache.touch(key, self.timeout)
