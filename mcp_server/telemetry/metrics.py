"""Metrics: the MCP semantic conventions' histograms, and the project's own under ``mcp.*``.

Recorded only when :func:`~mcp_server.telemetry.mode` is ``"native"``: every function here asks
first, and with any other mode returns before OpenTelemetry is imported. The instruments are
made on first use, on the meter ``mcp_server`` of the process's meter provider (the API's proxy
until ``opentelemetry-instrument`` or the project's code sets one, which then takes them over).

docs/metrics.md lists the names, units, buckets and attributes.
"""

from __future__ import annotations

import datetime
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mcp_protocol import methods
from mcp_protocol.cancellation import CancelledError

from . import NATIVE, mode

if TYPE_CHECKING:
    from ..context import ServerContext

# The boundaries the conventions recommend for all four MCP duration histograms (seconds).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
METER_NAME = "mcp_server"

OPERATION_DURATION = "mcp.server.operation.duration"
SESSION_DURATION = "mcp.server.session.duration"
GET_STREAMS = "mcp.server.get_stream.count"
LISTEN_STREAMS = "mcp.server.listen_stream.count"
SESSIONS = "mcp.server.session.count"
REFUSALS = "mcp.server.refusals"
AUTH_FAILURES = "mcp.server.auth.failures"
QUEUE_WAIT = "mcp.server.background_call.queue_wait"
RUN_TIME = "mcp.server.background_call.duration"
TASK_CHANGES = "mcp.server.task.status_changes"

_lock = threading.Lock()
_instruments: _Instruments | None = None
# The HTTP runtimes of this process (one per event loop), which the gauges read when collected.
_runtimes: weakref.WeakSet = weakref.WeakSet()


_recorded: Any = None  # providers.metrics_recorded, imported on first use (it imports OpenTelemetry)


def _metrics_recorded() -> bool:
    global _recorded
    if _recorded is None:
        from .providers import metrics_recorded

        _recorded = metrics_recorded
    return _recorded()


def enabled() -> bool:
    """Whether metrics are recorded (``TELEMETRY`` is ``"native"`` and the API is installed)."""
    return mode() == NATIVE


def _on() -> _Instruments | None:
    if mode() != NATIVE:
        return None
    return _instruments or _create()


def _create() -> _Instruments:
    global _instruments
    with _lock:
        if _instruments is None:
            _instruments = _Instruments()
    return _instruments


class _Instruments:
    def __init__(self) -> None:
        from opentelemetry import metrics

        meter = metrics.get_meter(METER_NAME)

        def durations(name: str, description: str) -> Any:
            return meter.create_histogram(name, unit="s", description=description,
                                          explicit_bucket_boundaries_advisory=DURATION_BUCKETS)

        self.operation = durations(OPERATION_DURATION, "MCP request or notification duration as observed "
                                   "on the receiver from the time it was received until the result is sent.")
        self.session = durations(SESSION_DURATION, "The duration of the MCP session as observed on the "
                                 "MCP server.")
        self.queue_wait = durations(QUEUE_WAIT, "How long a background tool call waited in the queue "
                                    "before a worker took it.")
        self.run_time = durations(RUN_TIME, "How long a background tool call ran on its worker.")
        self.refusals = meter.create_counter(REFUSALS, unit="{refusal}",
                                             description="Requests refused at a limit (429 or 503).")
        self.auth_failures = meter.create_counter(AUTH_FAILURES, unit="{failure}",
                                                  description="Requests refused by authentication.")
        self.task_changes = meter.create_counter(TASK_CHANGES, unit="{change}",
                                                 description="Changes of a task's status (Tasks extension).")
        meter.create_observable_up_down_counter(
            GET_STREAMS, [_observer(_get_streams)], unit="{stream}",
            description="GET (listening and resumed) SSE streams open in this process.")
        meter.create_observable_up_down_counter(
            LISTEN_STREAMS, [_observer(_listen_streams)], unit="{stream}",
            description="subscriptions/listen streams open in this process.")
        meter.create_observable_up_down_counter(
            SESSIONS, [_observer(_live_sessions)], unit="{session}",
            description="Sessions with a stream open or a request in flight in this process.")


# Request durations -------------------------------------------------------------------------------
class OperationMetrics:
    """The :class:`~mcp_server.ports.RequestObserver` recording ``mcp.server.operation.duration``
    (``site.install`` adds it when metrics are on)."""

    def request_started(self, ctx: ServerContext) -> None:
        return None

    def request_finished(self, state: Any, ctx: ServerContext, response: dict | None,
                         error: BaseException | None, duration: float) -> None:
        # With no SDK configured the measurement would go nowhere: its attributes are not made.
        if not _metrics_recorded():
            return
        instruments = _on()
        if instruments is not None:
            instruments.operation.record(duration, operation_attributes(ctx, response, error))


OPERATION_METRICS = OperationMetrics()


def operation_attributes(ctx: ServerContext, response: dict | None,
                         error: BaseException | None) -> dict[str, Any]:
    """The attributes of one request's duration: low cardinality only (no session or request
    id; a tool or prompt name only when the server has it, so a client cannot make up names)."""
    attributes: dict[str, Any] = {"mcp.method.name": ctx.method}
    version = ctx.protocol_version
    if version:
        attributes["mcp.protocol.version"] = version
    params = ctx.params if isinstance(ctx.params, dict) else {}
    name = params.get("name")
    if ctx.method == methods.TOOLS_CALL and isinstance(name, str) \
            and ctx.server.known_tool(name) is not None:
        attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif ctx.method == methods.PROMPTS_GET and isinstance(name, str) and name in ctx.server.prompts:
        attributes["gen_ai.prompt.name"] = name
    attributes.update(network_attributes(ctx.session))
    error_type = _error_type(ctx, response, error)
    if error_type is not None:
        attributes["error.type"] = error_type
        if error_type.lstrip("-").isdigit():
            attributes["rpc.response.status_code"] = error_type
    return attributes


def network_attributes(session: Any) -> dict[str, str]:
    """``network.*`` of a session: HTTP (over TCP) when its transport counts it against a
    principal, which every HTTP request is; a pipe on stdio (no listen stream there); nothing
    for a server called in process."""
    if session.principal_key is not None:
        return {"network.transport": "tcp", "network.protocol.name": "http"}
    if not session.listen_supported:
        return {"network.transport": "pipe"}
    return {}


def _error_type(ctx: ServerContext, response: dict | None, error: BaseException | None) -> str | None:
    if response is None:  # cancelled (no response), or answered by another process
        return "cancelled" if ctx.cancellation.cancelled or isinstance(error, CancelledError) else None
    failure = response.get("error")
    if isinstance(failure, dict):
        return str(failure.get("code", "_OTHER"))
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error"
    return None


# Sessions ----------------------------------------------------------------------------------------
def sessions_ended(rows: Iterable[tuple[datetime.datetime, str]]) -> None:
    """Record ``mcp.server.session.duration`` for sessions that ended (a DELETE, an expiry, the
    reaper, an operator): each row is its creation time and protocol revision."""
    # With no SDK configured the measurement would go nowhere: its attributes are not made.
    if not _metrics_recorded():
        return
    instruments = _on()
    if instruments is None:
        return
    now = datetime.datetime.now(datetime.UTC)
    for created_at, protocol_version in rows:
        if created_at.tzinfo is None:  # USE_TZ = False: naive local times on both sides
            seconds = (datetime.datetime.now() - created_at).total_seconds()
        else:
            seconds = (now - created_at).total_seconds()
        instruments.session.record(max(0.0, seconds), {
            "mcp.protocol.version": protocol_version, "network.transport": "tcp",
            "network.protocol.name": "http"})


def stdio_session_ended(seconds: float, protocol_version: str | None, error: BaseException | None) -> None:
    """Record ``mcp.server.session.duration`` for a stdio session (its connection: from the
    transport starting to read to the end of its input); ``error`` closed it early."""
    instruments = _on()
    if instruments is None:
        return
    attributes = {"network.transport": "pipe"}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if error is not None:
        attributes["error.type"] = type(error).__qualname__
    instruments.session.record(seconds, attributes)


# Gauges, read when collected ----------------------------------------------------------------------
def watch_runtime(runtime: Any) -> None:
    """Let the gauges count ``runtime``'s streams and sessions (an HTTP runtime, as it starts)."""
    _runtimes.add(runtime)
    _on()  # the gauges exist from the first runtime on, even before a request is recorded


def _observer(count: Any) -> Any:
    def callback(options: Any) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        if mode() != NATIVE:
            return []
        return [Observation(sum(_retrying(count, runtime) for runtime in list(_runtimes)))]
    return callback


def _retrying(count: Any, runtime: Any) -> int:
    # The collector's thread reads dicts the event loop changes: a copy made while one changes
    # size raises, and the next try sees it settled.
    for _ in range(5):
        try:
            return count(runtime)
        except RuntimeError:
            continue
    return 0


def _get_streams(runtime: Any) -> int:
    return len(runtime.streams)


def _listen_streams(runtime: Any) -> int:
    return len(runtime.listens)


def _live_sessions(runtime: Any) -> int:
    sessions = {session for session, _stream in list(runtime.streams)}
    sessions.update(owner for owner, _key in list(runtime.in_flight) if owner != "call")
    return len(sessions)


# Counters ----------------------------------------------------------------------------------------
def refused(limit: str, status: int) -> None:
    """A request refused at ``limit`` (see docs/metrics.md for the names), answered ``status``."""
    instruments = _on()
    if instruments is not None:
        instruments.refusals.add(1, {"mcp.limit": limit, "http.response.status_code": status})


def auth_failed(reason: str) -> None:
    """A request refused by authentication; ``reason`` is the OAuth error code (``invalid_token``,
    ``insufficient_scope``, ``invalid_request``), ``missing_credential`` or ``unavailable``."""
    instruments = _on()
    if instruments is not None:
        instruments.auth_failures.add(1, {"error.type": reason})


def task_changed(status: str) -> None:
    """A task's status changed to ``status`` (``working``, ``input_required``, ``completed``...)."""
    instruments = _on()
    if instruments is not None:
        instruments.task_changes.add(1, {"mcp.task.status": status})


# Background calls --------------------------------------------------------------------------------
def background_call_started(tool: str, created_at: datetime.datetime | None,
                            started_at: datetime.datetime | None) -> None:
    """A worker (or the web process) took a background call: the time it waited since queued."""
    instruments = _on()
    if instruments is not None and created_at is not None and started_at is not None:
        wait = max(0.0, (started_at - created_at).total_seconds())
        instruments.queue_wait.record(wait, {"gen_ai.tool.name": tool})


def background_call_ran(tool: str, state: str, seconds: float) -> None:
    """A background call ended in ``state`` (completed, failed, cancelled) after ``seconds``."""
    instruments = _on()
    if instruments is not None:
        instruments.run_time.record(seconds, {"gen_ai.tool.name": tool, "mcp.background_call.state": state})
