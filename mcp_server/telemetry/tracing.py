"""A SERVER span per message the server serves (``MCP_SERVER["TELEMETRY"] = "native"``), and the
trace context made current for the handler (``"propagation_only"``): request observers
(:class:`mcp_server.ports.RequestObserver`) that ``site.install`` registers.

The span's parent is the context the client sent in ``params._meta`` (``traceparent``,
``tracestate``, ``baggage``); the span that was current when the message arrived (the HTTP server
span of Django's or ASGI's instrumentation) is then a link. A message without a context in its
``_meta`` is a child of that current span (or a root when there is none). Imported only when
telemetry is on: it imports OpenTelemetry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from mcp_protocol import methods, semconv
from mcp_protocol.cancellation import CancelledError
from mcp_protocol.errors import MCPError

from ..errors import AnsweredElsewhere
from ..redaction import redact
from . import propagation
from .providers import spans_recorded
from .scope import transport_scope

if TYPE_CHECKING:
    from ..context import ServerContext

TRACER_NAME = "mcp_server"
# error.type of a request cancelled before it answered (it has no JSON-RPC code: no response).
CANCELLED = "cancelled"


_tracer: trace.Tracer | None = None


def tracer() -> trace.Tracer:
    # Looked up once: before the process sets its provider it is a proxy that follows it there.
    global _tracer
    if _tracer is None:
        _tracer = trace.get_tracer(TRACER_NAME)
    return _tracer


def current_trace_id() -> str | None:
    """The trace id of the span current now, or None: while a request's observers finish, its
    own span's ("native"), or the one its client sent or the HTTP server span ("propagation_only")."""
    if not otel_context.get_current():
        return None  # nothing current at all (the usual request with no SDK): no span to read
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class SpanObserver:
    """Makes the span of each request and notification, current while its handler runs. With no
    SDK configured (:func:`~.providers.spans_recorded`) it makes none: the span would go nowhere,
    and only the client's context from ``_meta`` is made current, as :class:`PropagationObserver`
    does."""

    def request_started(self, ctx: ServerContext) -> Any:
        if not spans_recorded(tracer()):
            return None, _carried(ctx.meta), None
        attributes = semconv.message_attributes(ctx.method, ctx.params, ctx.request_id)
        attributes.update(session_attributes(ctx.session))
        tool = capturing_tool(ctx)
        if tool is not None:
            attributes[semconv.TOOL_CALL_ARGUMENTS] = _json(redact(tool, ctx.params.get("arguments") or {}))
        parent, links = parent_and_links(ctx.meta)
        span = tracer().start_span(semconv.span_name(ctx.method, ctx.params), context=parent,
                                   kind=SpanKind.SERVER, attributes=attributes, links=links)
        token = propagation.attach(trace.set_span_in_context(span, parent))
        return span, token, tool

    def request_finished(self, state: Any, ctx: ServerContext, response: dict | None,
                         error: BaseException | None, duration: float) -> None:
        span, token, tool = state
        if span is None:
            if token is not None:
                propagation.detach(token)
            return
        try:
            if span.is_recording():
                finish(span, ctx.method, response, error)
                if ctx.session.protocol_version and ctx.method == methods.INITIALIZE:
                    span.set_attribute(semconv.PROTOCOL_VERSION, ctx.session.protocol_version)
                result = (response or {}).get("result")
                if tool is not None and isinstance(result, dict) and "error" not in (response or {}):
                    span.set_attribute(semconv.TOOL_CALL_RESULT, _json(redact(tool, result)))
        finally:
            span.end()
            propagation.detach(token)

    def notification_started(self, session: Any, method: str, params: Any) -> Callable[[], None]:
        if not spans_recorded(tracer()):
            carried = _carried(params.get("_meta") if isinstance(params, dict) else None)
            return _nothing if carried is None else lambda: propagation.detach(carried)
        attributes = semconv.message_attributes(method, params)
        attributes.update(session_attributes(session))
        meta = params.get("_meta") if isinstance(params, dict) else None
        parent, links = parent_and_links(meta)
        span = tracer().start_span(semconv.span_name(method, params), context=parent,
                                   kind=SpanKind.SERVER, attributes=attributes, links=links)
        token = propagation.attach(trace.set_span_in_context(span, parent))

        def done() -> None:
            span.end()
            propagation.detach(token)

        return done


class PropagationObserver:
    """No spans: the client's context from ``_meta`` is made current while the handler runs, so
    that background calls and outgoing requests carry it on."""

    def request_started(self, ctx: ServerContext) -> Any:
        return _carried(ctx.meta)

    def request_finished(self, state: Any, ctx: ServerContext, response: dict | None,
                         error: BaseException | None, duration: float) -> None:
        if state is not None:
            propagation.detach(state)


def _carried(meta: Any) -> object | None:
    """The token of the client's context from ``_meta`` made current, or None when it sent none."""
    if not propagation.carried(meta):
        return None
    return propagation.attach(propagation.extract(meta))


def _nothing() -> None:
    return None


def parent_and_links(meta: Any) -> tuple[Any, list[Link]]:
    """The parent context (None: the current one) and links of a message's span."""
    if not propagation.carried(meta):
        return None, []
    ambient = trace.get_current_span().get_span_context()
    return propagation.extract(meta), [Link(ambient)] if ambient.is_valid else []


def session_attributes(session: Any) -> dict[str, Any]:
    """mcp.protocol.version, mcp.session.id (handshake era), and the connection's attributes."""
    attributes: dict[str, Any] = {}
    version = session.protocol_version
    if version:
        attributes[semconv.PROTOCOL_VERSION] = version
    if not session.is_modern and session.id:
        attributes[semconv.SESSION_ID] = session.id
    attributes.update(network_attributes(transport_scope.get()))
    return attributes


def network_attributes(scope: dict | None) -> dict[str, Any]:
    """client.address/port and network.* of an ASGI HTTP scope, or of stdio (a pipe)."""
    if scope is None:
        return {}
    if scope.get("type") == "stdio":
        return {semconv.NETWORK_TRANSPORT: "pipe"}
    attributes: dict[str, Any] = {semconv.NETWORK_PROTOCOL_NAME: "http"}
    version = scope.get("http_version")
    if version:
        attributes[semconv.NETWORK_PROTOCOL_VERSION] = str(version)
    # HTTP/3 runs on QUIC; every other version on TCP (a Unix socket has no client address).
    client = scope.get("client")
    attributes[semconv.NETWORK_TRANSPORT] = "quic" if version == "3" else "tcp" if client else "unix"
    if client:
        attributes[semconv.CLIENT_ADDRESS] = str(client[0])
        if len(client) > 1 and client[1] is not None:
            attributes[semconv.CLIENT_PORT] = int(client[1])
    return attributes


def finish(span: trace.Span, method: str, response: dict | None, error: BaseException | None) -> None:
    """The outcome on the span: error.type, rpc.response.status_code and an ERROR status."""
    attributes, description = semconv.outcome(method, response)
    if response is None and isinstance(error, CancelledError):
        attributes, description = {semconv.ERROR_TYPE: CANCELLED}, str(error) or CANCELLED
    if attributes:
        span.set_attributes(attributes)
    if description is not None:
        span.set_status(Status(StatusCode.ERROR, description))
    if error is not None and not isinstance(error, MCPError | CancelledError | AnsweredElsewhere):
        span.record_exception(error)


def capturing_tool(ctx: ServerContext) -> str | None:
    """The name of the tool a ``tools/call`` calls when that tool opted into capture
    (``Tool.capture``): its arguments and result go on the span, redacted; None otherwise."""
    if ctx.method != methods.TOOLS_CALL or not isinstance(ctx.params, dict):
        return None
    name = ctx.params.get("name")
    tool = ctx.server.known_tool(name) if isinstance(name, str) else None
    return name if tool is not None and getattr(tool, "capture", False) else None


def _json(value: Any) -> str:
    # Span attributes take no mappings: the conventions allow the JSON text.
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
