"""The span of a background call on the worker that runs it.

The web process kept the context of the span that queued the call in ``ToolCall.trace_context``;
the worker's span (kind CONSUMER, as for a message taken from a queue) links to it and is its
child, so that the trace the client started goes on through the worker. Imported only when
telemetry is on: it imports OpenTelemetry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from mcp_protocol import methods, semconv

from ..redaction import redact
from . import propagation, tracing
from .tracing import _json, finish


@contextlib.contextmanager
def run_span(call: Any, tool: Any, *, native: bool) -> Iterator[Callable[[dict | None], None]]:
    carrier = call.trace_context if propagation.carried(call.trace_context) else None
    parent = propagation.extract(carrier) if carrier is not None else None
    if not native:
        token = propagation.attach(parent) if parent is not None else None
        try:
            yield lambda response: None
        finally:
            if token is not None:
                propagation.detach(token)
        return
    params = {"name": call.tool}
    attributes = semconv.message_attributes(methods.TOOLS_CALL, params, call.request_id)
    if call.protocol_version:
        attributes[semconv.PROTOCOL_VERSION] = call.protocol_version
    if call.session_id:
        attributes[semconv.SESSION_ID] = call.session_id
    capture = tool is not None and getattr(tool, "capture", False)
    if capture:
        attributes[semconv.TOOL_CALL_ARGUMENTS] = _json(redact(call.tool, call.arguments or {}))
    queued = trace.get_current_span(parent).get_span_context() if parent is not None else None
    links = [Link(queued)] if queued is not None and queued.is_valid else []
    span = tracing.tracer().start_span(semconv.span_name(methods.TOOLS_CALL, params), context=parent,
                               kind=SpanKind.CONSUMER, attributes=attributes, links=links)
    token = propagation.attach(trace.set_span_in_context(span, parent))

    def record(response: dict | None) -> None:
        if response is None:
            span.set_attribute(semconv.ERROR_TYPE, "cancelled")
            return
        finish(span, methods.TOOLS_CALL, response, None)
        result = response.get("result")
        if capture and isinstance(result, dict):
            span.set_attribute(semconv.TOOL_CALL_RESULT, _json(redact(call.tool, result)))

    try:
        yield record
    except BaseException as exc:
        span.record_exception(exc)
        raise
    finally:
        span.end()
        propagation.detach(token)
