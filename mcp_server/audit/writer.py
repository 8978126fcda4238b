"""The audit trail's writer: rows queued in memory by the request's task, written in batches
(one INSERT each, ``insert.py``) by a thread of their own, so that a call never waits for the database.

A batch is written when ``AUDIT_BATCH_SIZE`` rows are waiting, or ``AUDIT_FLUSH_INTERVAL``
seconds after the first of them; what is left is written when the process stops cleanly
(``atexit``, and Celery's ``worker_shutdown`` / ``worker_process_shutdown``, connected by
:func:`mcp_server.audit.install`). The thread is started lazily, and again in a forked child.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import deque
from typing import Any

from django.db import connections, router

from ..models import AuditRecord, ToolCall
from ..ports import awaited_sizes
from ..redaction import redactor
from .insert import insert
from .pacing import Pacer
from .rows import RESPONSE_AT, call_row, request_row

logger = logging.getLogger("mcp_server.audit")
# Rows kept while the database refuses them; past this the oldest are dropped (and logged).
MAX_PENDING = 100_000


class AuditWriter:
    """Queue of audit rows of this process. ``add_request`` and ``add_call`` cost a list append;
    :meth:`flush` writes everything queued, on the calling thread."""

    def __init__(self, batch_size: int = 100, interval: float = 1.0):
        self.batch_size = max(1, int(batch_size))
        self.interval = interval
        self._pending: deque[tuple[str, Any]] = deque()
        self._flush_lock = threading.Lock()
        self._bell = _bell()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        # A forked child starts empty: what the parent had queued is the parent's to write.
        child_reset = weakref.WeakMethod(self._forget)
        os.register_at_fork(after_in_child=lambda: (method := child_reset()) and method())

    def _forget(self) -> None:
        self._pending.clear()
        awaited_sizes.clear()
        self._flush_lock = threading.Lock()
        self._pid = self._thread = None

    # Producers (any thread, the event loop included): no I/O, no lock.
    def add_request(self, entry: tuple) -> None:
        # _add, inline: this runs for every call.
        pending = self._pending
        pending.append(("request", entry))
        if self._thread is None:
            self._start()
        elif len(pending) >= self.batch_size:
            self._ring()

    def add_call(self, call_id: str) -> None:
        """A background call reached its final state: its row is made from its record."""
        self._add(("call", call_id))

    def _add(self, item: tuple[str, Any]) -> None:
        pending = self._pending
        pending.append(item)
        # No thread yet, or a forked child's (_forget, at the fork, forgot the parent's): no
        # getpid() here, a system call on every call's path.
        if self._thread is None:
            self._start()
        elif len(pending) >= self.batch_size:
            self._ring()

    def _ring(self) -> None:
        try:  # noqa: SIM105 - contextlib.suppress costs more, and this runs on a call's path
            self._bell.release()
        except RuntimeError:  # rung already, not heard yet
            pass

    def _start(self) -> None:
        with self._flush_lock:
            if self._pid == os.getpid():
                return
            self._bell = _bell()
            self._pid = os.getpid()
            self._stopped = False
            self._thread = threading.Thread(target=self._run, name="mcp-audit", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        # The thread keeps its database connection between batches (a connection per batch
        # would cost more than the rows), and closes it when the writer stops. A connection of
        # Django's pool goes back to it after each batch instead: kept, it would hold one of the
        # pool's few places for good, and getting it again costs nothing.
        connection = connections[router.db_for_write(AuditRecord)]
        pooled = getattr(connection, "pool", None) is not None
        try:
            while not self._stopped:
                self._bell.acquire(timeout=self.interval)  # rung early when a batch is full
                if self._stopped:
                    return
                if self._pending:
                    self.flush()
                    if pooled:
                        connection.close()
        finally:
            connections.close_all()

    # Writing.
    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Write every row queued so far: how many were written. Never raises: rows the
        database refused stay queued for the next flush.

        A batch at a time, each made just before it is written: a backlog made in one go
        (thousands of rows after a burst) would hold the interpreter for tens of milliseconds,
        and free them all at once afterwards, while requests wait."""
        written = 0
        pace = Pacer()
        with self._flush_lock:
            # Only this lock's holder takes from the left; a row queued meanwhile is taken next time.
            pending = self._pending
            left = len(pending)
            while left:
                items = [pending.popleft() for _ in range(min(left, self.batch_size))]
                left -= len(items)
                try:
                    rows = self._rows(items, pace)
                    if rows:
                        insert(rows, pace)
                except Exception:
                    logger.exception("writing %d audit rows failed; they are kept for the next attempt",
                                     len(items))
                    self._requeue(items)
                    connections[router.db_for_write(AuditRecord)].close()  # a new one next time
                    return written
                written += len(rows)
                if left:
                    pace()
        return written

    def _rows(self, items: list[tuple[str, Any]], pace: Pacer) -> list[tuple]:
        rows = []
        redact = redactor()
        call_ids = [value for kind, value in items if kind == "call"]
        calls = ToolCall.objects.select_related("owner").in_bulk(call_ids) if call_ids else {}
        for kind, value in items:
            pace()
            try:
                if kind == "request":
                    rows.append(request_row(value, redact))
                elif value in calls:
                    rows.append(call_row(calls[value], redact))
            except Exception:  # one odd entry must not cost the batch its rows
                logger.exception("an audit row could not be made of %r", value)
        return rows

    def _requeue(self, items: list[tuple[str, Any]]) -> None:
        self._pending.extendleft(reversed(items))
        excess = len(self._pending) - MAX_PENDING
        if excess > 0:
            for _ in range(excess):
                kind, value = self._pending.popleft()
                if kind == "request":
                    awaited_sizes.pop(id(value[RESPONSE_AT]), None)
            logger.error("dropped %d audit rows: the database has refused them too long", excess)

    def stop(self) -> int:
        """Write what is queued and stop the thread (the process is stopping)."""
        self._stopped = True
        self._ring()
        return self.flush()


def _bell() -> threading.Lock:
    """What wakes the writer's thread early: a held lock that a producer releases (one C call,
    where an Event's set takes a condition and notifies) and the thread acquires again."""
    bell = threading.Lock()
    bell.acquire()
    return bell
