"""The audit trail's :class:`~mcp_server.ports.RequestObserver`: what the dispatcher served, queued
for the writer. On the call's path it only gathers references (no JSON, no hashing, no I/O)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..ports import awaited_sizes
from .rows import AUDITED_METHODS
from .writer import AuditWriter

if TYPE_CHECKING:
    from ..context import ServerContext


class AuditObserver:
    """Queues a row for each ``tools/call``, ``prompts/get`` and ``resources/read``.

    A background call's row is not made here: the call ends wherever it runs (a Celery worker,
    after this request answered with a task or handed its stream over), and the process that
    records its end queues its row (:func:`mcp_server.audit.call_ended`), once per call.
    """

    def __init__(self, writer: AuditWriter, trace_ids: Callable[[], str | None] | None = None):
        self.writer = writer
        self.trace_ids = trace_ids  # the trace id current as a request finishes (telemetry's)

    def request_started(self, ctx: ServerContext) -> Any:
        return None

    def request_finished(self, state: Any, ctx: ServerContext, response: dict | None,
                         error: BaseException | None, duration: float) -> None:
        method = ctx.method
        if method not in AUDITED_METHODS or "background_call" in ctx.instrumentation:
            return
        session = ctx.session
        principal = session.principal
        user = principal.user if principal is not None else None
        user_id = getattr(user, "pk", None) if user is not None else session.user_id
        username = user.get_username() if user is not None and hasattr(user, "get_username") else ""
        if response is not None and "result" in response:
            awaited_sizes[id(response)] = None  # the transport notes its size as it encodes it
        self.writer.add_request((
            time.time(), duration, method, ctx.params, None if session.is_modern else session.id,
            ctx.request_id, session.protocol_version, principal, user_id, username, response,
            None if self.trace_ids is None else self.trace_ids(),
        ))
