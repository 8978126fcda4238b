"""The audit trail: one append-only ``AuditRecord`` per ``tools/call``, ``prompts/get`` and
``resources/read``, in either era, on any process or worker (docs/audit.md).

``MCP_SERVER["AUDIT"]`` (on by default) makes :func:`install` add the observer to the dispatcher
and start the writer; off, nothing is observed and nothing written. The composition root calls
:func:`install` when the app is ready and again when the settings change.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import Any

from .. import ports
from ..settings import mcp_settings
from .observer import AuditObserver
from .writer import AuditWriter

_writer: AuditWriter | None = None
_observer: AuditObserver | None = None
_hooked = False


def current_writer() -> AuditWriter | None:
    """This process's writer; None while the audit trail is off."""
    return _writer


def install(trace_ids: Callable[[], str | None] | None = None) -> None:
    """Observe requests and write their rows when ``AUDIT`` is on; stop doing so when it is off
    (what was queued is written first). ``trace_ids`` gives the trace id current while a request
    finishes (telemetry's); without it a row has the trace id its client sent in ``_meta``."""
    global _writer, _observer
    if not mcp_settings.AUDIT:
        uninstall()
        return
    batch_size, interval = mcp_settings.AUDIT_BATCH_SIZE, mcp_settings.AUDIT_FLUSH_INTERVAL
    if _writer is not None and (_writer.batch_size, _writer.interval) == (batch_size, interval) \
            and _observer is not None and _observer.trace_ids == trace_ids:
        return
    uninstall()
    _writer = AuditWriter(batch_size, interval)
    _observer = AuditObserver(_writer, trace_ids)
    ports.add_observer(_observer)
    _hook_shutdown()


def uninstall() -> None:
    global _writer, _observer
    if _observer is not None:
        ports.remove_observer(_observer)
    if _writer is not None:
        _writer.stop()
    _writer = _observer = None


def flush() -> int:
    """Write the rows queued in this process now: how many."""
    return _writer.flush() if _writer is not None else 0


def call_ended(call_id: str) -> None:
    """A background call reached its final state in this process: queue its row (the record's
    conditional update makes this happen once per call, wherever it ends)."""
    if _writer is not None:
        _writer.add_call(call_id)


def _shutdown(**_kwargs: Any) -> None:
    if _writer is not None:
        _writer.stop()


def _hook_shutdown() -> None:
    """Rows still queued are written when the process stops cleanly: at interpreter exit (daphne
    and uvicorn return from their loop on SIGTERM/SIGINT, then exit), and when a Celery worker
    (or a prefork child, which leaves without running ``atexit``) shuts down."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    atexit.register(_shutdown)
    try:
        from celery.signals import worker_process_shutdown, worker_shutdown
    except ImportError:  # Celery is a dependency, but the trail works without it
        return
    worker_shutdown.connect(_shutdown, weak=False)
    worker_process_shutdown.connect(_shutdown, weak=False)
