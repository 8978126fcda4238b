"""The client's metrics of the MCP semantic conventions: ``mcp.client.operation.duration`` and
``mcp.client.session.duration`` (seconds, the conventions' buckets).

Recorded when ``opentelemetry-api`` is installed and the client's ``telemetry`` option is not
False (a client passes no start time then), on the meter ``mcp_client`` of the process's
meter provider (the API's no-op one until ``opentelemetry-instrument`` or the program sets one).
Without the API nothing is imported: the check is made once, and each call then costs a global
lookup.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from mcp_protocol import methods

DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
METER_NAME = "mcp_client"
OPERATION_DURATION = "mcp.client.operation.duration"
SESSION_DURATION = "mcp.client.session.duration"

_lock = threading.Lock()
# None: not looked at yet; False: the API is not installed; else the two histograms.
_instruments: Any = None


def api_installed() -> bool:
    """Whether ``opentelemetry.metrics`` can be imported (looked up without importing it)."""
    try:
        return importlib.util.find_spec("opentelemetry") is not None and \
            importlib.util.find_spec("opentelemetry.metrics") is not None
    except (ImportError, ValueError):
        return False


def _on() -> Any:
    global _instruments
    if _instruments is None:
        with _lock:
            if _instruments is None:
                _instruments = _create() if api_installed() else False
    return _instruments or None


def _create() -> tuple[Any, Any]:
    from opentelemetry import metrics

    meter = metrics.get_meter(METER_NAME)
    operation = meter.create_histogram(
        OPERATION_DURATION, unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        description="The duration of the MCP request or notification as observed on the sender "
                    "from the time it was sent until the response or ack is received.")
    session = meter.create_histogram(
        SESSION_DURATION, unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        description="The duration of the MCP session as observed on the MCP client.")
    return operation, session


def now() -> float | None:
    """The start of something to time, or None when nothing is recorded."""
    return time.perf_counter() if _on() is not None else None


def transport_attributes(transport: Any) -> dict[str, Any]:
    """``network.*`` and ``server.*`` of a transport: HTTP over TCP to its URL's host and port,
    a pipe for a subprocess on stdio; nothing for a transport of another kind."""
    url = getattr(transport, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        attributes: dict[str, Any] = {"network.transport": "tcp", "network.protocol.name": "http"}
        if parts.hostname:
            attributes["server.address"] = parts.hostname
            attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        return attributes
    if type(transport).__name__ == "StdioTransport":
        return {"network.transport": "pipe"}
    return {}


def operation(started: float | None, method: str, params: dict | None, transport: Any,
              protocol_version: str | None, message: dict | None = None,
              error: BaseException | None = None) -> None:
    """Record one request's duration, from ``started`` (:func:`now`) to its answer ``message``
    (or the ``error`` that ended the wait)."""
    if started is None:
        return
    instruments = _on()
    if instruments is None:
        return
    attributes: dict[str, Any] = {"mcp.method.name": method, **transport_attributes(transport)}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    name = params.get("name") if isinstance(params, dict) else None
    if method == methods.TOOLS_CALL and isinstance(name, str):
        attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif method == methods.PROMPTS_GET and isinstance(name, str):
        attributes["gen_ai.prompt.name"] = name
    failure = message.get("error") if isinstance(message, dict) else None
    if isinstance(failure, dict):
        code = str(failure.get("code", "_OTHER"))
        attributes["error.type"] = attributes["rpc.response.status_code"] = code
    elif error is not None:
        attributes["error.type"] = type(error).__qualname__
    elif isinstance(message, dict) and isinstance(message.get("result"), dict) \
            and message["result"].get("isError") is True:
        attributes["error.type"] = "tool_error"
    instruments[0].record(time.perf_counter() - started, attributes)


def session(started: float | None, transport: Any, protocol_version: str | None,
            error: BaseException | None = None) -> None:
    """Record a session's duration, from ``started`` (:func:`now`, when it connected) to now."""
    if started is None:
        return
    instruments = _on()
    if instruments is None:
        return
    attributes: dict[str, Any] = dict(transport_attributes(transport))
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if error is not None:
        attributes["error.type"] = type(error).__qualname__
    instruments[1].record(time.perf_counter() - started, attributes)
