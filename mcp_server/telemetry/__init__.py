"""OpenTelemetry for the server: spans and metrics of the MCP semantic conventions.

Optional: with ``MCP_SERVER["TELEMETRY"] = "off"``, or without ``opentelemetry-api`` installed (the
``telemetry`` extra), nothing here imports OpenTelemetry and nothing is recorded. The process's
tracer and meter providers (set up by ``opentelemetry-instrument`` or the project's own code)
decide where spans and metrics go; with none, the API's no-op providers take them.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

from ..settings import mcp_settings
from .scope import transport_scope as transport_scope  # set by the transports

NATIVE = "native"
PROPAGATION_ONLY = "propagation_only"
OFF = "off"
MODES = (NATIVE, PROPAGATION_ONLY, OFF)


@cache
def api_installed() -> bool:
    """Whether opentelemetry-api can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("opentelemetry") is not None and \
        importlib.util.find_spec("opentelemetry.trace") is not None


def mode() -> str:
    """The telemetry in effect: the setting, or ``"off"`` when OpenTelemetry is not installed or
    the setting is none of :data:`MODES` (which mcp_server.E050 reports)."""
    configured = mcp_settings.TELEMETRY
    if configured not in MODES or configured == OFF or not api_installed():
        return OFF
    return configured


def trace_carrier() -> dict[str, str] | None:
    """The current trace context as W3C ``traceparent``/``tracestate`` (what a background call
    keeps to link its worker's span), or None when telemetry is off or no span is current."""
    if mode() == OFF:
        return None
    from .propagation import current_carrier

    return current_carrier() or None


def background_span(call: Any, tool: Any) -> AbstractContextManager[Callable[[dict | None], None]]:
    """What a worker runs a background call (``ToolCall``) of ``tool`` within: in "native" mode a
    span linked to (and a child of) the context that queued it, current while the tool runs; in
    "propagation_only" that context made current, with no span. It gives a function that records
    the call's response (None: cancelled) on the span."""
    current = mode()
    if current == OFF:
        return contextlib.nullcontext(_ignore)
    from .worker import run_span

    return run_span(call, tool, native=current == NATIVE)


def _ignore(response: dict | None) -> None:
    return None
