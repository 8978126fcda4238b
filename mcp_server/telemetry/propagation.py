"""Trace context in and out of ``_meta`` and background-call records, through the process's
configured propagators (W3C Trace Context and Baggage by default; ``OTEL_PROPAGATORS`` changes
them). Imported only when telemetry is on: it imports OpenTelemetry."""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate

from mcp_protocol.trace_context import META_KEYS


def carried(meta: Any) -> bool:
    """Whether a ``_meta`` (or a stored carrier) holds a trace context to continue."""
    if not meta or not isinstance(meta, dict):
        return False  # the usual request: no _meta, or none of these in it
    for key in META_KEYS:  # noqa: SIM110 - any() of a generator costs more, for every request
        if isinstance(meta.get(key), str):
            return True
    return False


def extract(carrier: dict) -> otel_context.Context:
    """The context a carrier holds, on a fresh context (the ambient span is not its parent)."""
    return propagate.extract({key: value for key, value in carrier.items()
                              if key in META_KEYS and isinstance(value, str)},
                             context=otel_context.Context())


def current_carrier(context: otel_context.Context | None = None) -> dict[str, str]:
    """The current (or given) context as a carrier: traceparent, tracestate, baggage."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier


def attach(context: otel_context.Context) -> object:
    return otel_context.attach(context)


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]
