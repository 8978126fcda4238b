"""W3C Trace Context keys reserved in ``_meta`` (SEP-414).

They pass through untouched; the SDK does not depend on OpenTelemetry.
"""

TRACEPARENT_META_KEY = "traceparent"
TRACESTATE_META_KEY = "tracestate"
BAGGAGE_META_KEY = "baggage"
META_KEYS = (TRACEPARENT_META_KEY, TRACESTATE_META_KEY, BAGGAGE_META_KEY)
