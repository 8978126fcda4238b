"""A CLIENT span per request the client sends, named and described as the MCP semantic
conventions say, and its context injected into the request's ``params._meta`` (``traceparent``,
``tracestate``, ``baggage``) so that the server's span is its child. Keys the caller put in
``_meta`` are kept: a ``traceparent`` of the caller's own wins. Imported only when the client's
telemetry is on: it imports OpenTelemetry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from mcp_protocol import semconv

from .errors import ServerError

TRACER_NAME = "mcp_client"


_tracer: trace.Tracer | None = None


def tracer() -> trace.Tracer:
    # Looked up once: before the process sets its provider it is a proxy that follows it there.
    global _tracer
    if _tracer is None:
        _tracer = trace.get_tracer(TRACER_NAME)
    return _tracer


class ClientTracing:
    """The spans of one client's requests."""

    @contextlib.contextmanager
    def request(self, client: Any, method: str, params: Any,
                request_id: Any) -> Iterator[tuple[dict[str, str], Callable[[Any], None]]]:
        """Within it the request is sent with the carrier it gives; the function it gives records
        the result. An exception leaving it is recorded as the span's error."""
        attributes = semconv.message_attributes(method, params, request_id)
        attributes.update(connection_attributes(client))
        span = tracer().start_span(semconv.span_name(method, params), kind=SpanKind.CLIENT,
                                      attributes=attributes)
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))

        def record(result: Any) -> None:
            attributes, description = semconv.outcome(method, {"result": result})
            if attributes:
                span.set_attributes(attributes)
                span.set_status(Status(StatusCode.ERROR, description))

        try:
            yield carrier, record
        except ServerError as exc:
            code = str(exc.code)
            span.set_attributes({semconv.ERROR_TYPE: code, semconv.RESPONSE_STATUS_CODE: code})
            span.set_status(Status(StatusCode.ERROR, exc.message))
            raise
        except BaseException as exc:
            span.set_attribute(semconv.ERROR_TYPE, type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
        finally:
            span.end()


def connection_attributes(client: Any) -> dict[str, Any]:
    """mcp.protocol.version, mcp.session.id (handshake era), server.address/port and network.*."""
    attributes: dict[str, Any] = {}
    version = getattr(client, "protocol_version", None)
    if version:
        attributes[semconv.PROTOCOL_VERSION] = version
    transport = client.transport
    session_id = getattr(transport, "session_id", None)
    if session_id and not getattr(client, "is_modern", False):
        attributes[semconv.SESSION_ID] = session_id
    url = getattr(transport, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes[semconv.NETWORK_PROTOCOL_NAME] = "http"
        attributes[semconv.NETWORK_TRANSPORT] = "tcp"
        if parts.hostname:
            attributes[semconv.SERVER_ADDRESS] = parts.hostname
            attributes[semconv.SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    elif getattr(transport, "command", None) is not None:
        attributes[semconv.NETWORK_TRANSPORT] = "pipe"
    return attributes
