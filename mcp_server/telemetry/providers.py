"""Whether anybody receives what the server would record: with no SDK configured (the API's
proxy or no-op providers), a span or a measurement costs its attributes and context work and
goes nowhere, so the observers skip that work and keep only the propagation of the caller's
trace context. Imported only when telemetry is on: it imports OpenTelemetry."""

from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.metrics._internal import _ProxyMeterProvider

# What ``get_tracer_provider`` / ``get_meter_provider`` give while no SDK is configured.
_UNRECORDED_TRACER_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_UNRECORDED_METER_PROVIDERS = (_ProxyMeterProvider, NoOpMeterProvider)


def spans_recorded(tracer: trace.Tracer) -> bool:
    """False when ``tracer`` makes only non-recording spans: a no-op tracer, or the API's proxy
    while the process's provider is still the proxy or a no-op one (nobody configured an SDK).
    Asked per request: a provider set later takes effect at the next one."""
    if isinstance(tracer, trace.NoOpTracer):
        return False
    if isinstance(tracer, trace.ProxyTracer):
        return not isinstance(trace.get_tracer_provider(), _UNRECORDED_TRACER_PROVIDERS)
    return True


def metrics_recorded() -> bool:
    """False while the process's meter provider is the API's proxy or a no-op one."""
    return not isinstance(metrics.get_meter_provider(), _UNRECORDED_METER_PROVIDERS)
