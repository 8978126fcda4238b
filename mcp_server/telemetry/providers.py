"""Whether anybody receives what the server would record: with no SDK configured (the API's
proxy or no-op providers), a span or a measurement costs its attributes and context work and
goes nowhere, so the observers skip that work and keep only the propagation of the caller's
trace context. Imported only when telemetry is on: it imports OpenTelemetry."""

from __future__ import annotations

import os

from opentelemetry import metrics, trace
from opentelemetry.environment_variables import OTEL_PYTHON_METER_PROVIDER, OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.metrics._internal import _ProxyMeterProvider

# What ``get_tracer_provider`` / ``get_meter_provider`` give while no SDK is configured.
_UNRECORDED_TRACER_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_UNRECORDED_METER_PROVIDERS = (_ProxyMeterProvider, NoOpMeterProvider)

# While no provider is set, the API's getters look their environment variable up in os.environ
# each time (a KeyError raised and caught: several microseconds, twice a request). A provider is
# set through set_tracer_provider / set_meter_provider, which keep it in the API's module global,
# or named by that variable, which a process has from its start: so while the variable is absent
# and the global is None, the getter would give its proxy, and it is not asked. It is asked when
# the variable was set, when the global is not where this version of the API keeps it, or when
# the getter was replaced (a test's, or a wrapper's).
_MISSING = object()
_get_tracer_provider = trace.get_tracer_provider
_get_meter_provider = metrics.get_meter_provider
_TRACER_NAMED = OTEL_PYTHON_TRACER_PROVIDER in os.environ
_METER_NAMED = OTEL_PYTHON_METER_PROVIDER in os.environ


# What kind of tracer each class is: a no-op one, the API's proxy, or another (an SDK's).
_NO_OP, _PROXY, _SDK = "no-op", "proxy", "sdk"
_tracer_kinds: dict[type, str] = {}


def spans_recorded(tracer: trace.Tracer) -> bool:
    """False when ``tracer`` makes only non-recording spans: a no-op tracer, or the API's proxy
    while the process's provider is still the proxy or a no-op one (nobody configured an SDK).
    Asked per request: a provider set later takes effect at the next one."""
    kind = _tracer_kinds.get(type(tracer))
    if kind is None:  # isinstance of the API's abstract classes costs more than the rest
        kind = _tracer_kinds[type(tracer)] = (
            _NO_OP if isinstance(tracer, trace.NoOpTracer)
            else _PROXY if isinstance(tracer, trace.ProxyTracer) else _SDK)
    if kind is _NO_OP:
        return False
    if kind is _PROXY:
        if getattr(trace, "_TRACER_PROVIDER", _MISSING) is None and not _TRACER_NAMED \
                and trace.get_tracer_provider is _get_tracer_provider:
            return False  # what the getter would say, without reading os.environ
        return not isinstance(trace.get_tracer_provider(), _UNRECORDED_TRACER_PROVIDERS)
    return True


def metrics_recorded() -> bool:
    """False while the process's meter provider is the API's proxy or a no-op one."""
    if getattr(metrics_internal, "_METER_PROVIDER", _MISSING) is None and not _METER_NAMED \
            and metrics.get_meter_provider is _get_meter_provider:
        return False  # as spans_recorded
    return not isinstance(metrics.get_meter_provider(), _UNRECORDED_METER_PROVIDERS)
