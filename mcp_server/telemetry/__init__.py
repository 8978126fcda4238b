"""OpenTelemetry for the server: spans and metrics of the MCP semantic conventions.

Optional: with ``MCP_SERVER["TELEMETRY"] = "off"``, or without ``opentelemetry-api`` installed (the
``telemetry`` extra), nothing here imports OpenTelemetry and nothing is recorded. The process's
tracer and meter providers (set up by ``opentelemetry-instrument`` or the project's own code)
decide where spans and metrics go; with none, the API's no-op providers take them.
"""

from __future__ import annotations

import importlib.util
from functools import cache

from ..settings import mcp_settings

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
    """The telemetry in effect: the setting, or ``"off"`` when OpenTelemetry is not installed."""
    configured = mcp_settings.TELEMETRY
    if configured not in MODES:
        raise ValueError(f"MCP_SERVER['TELEMETRY'] must be one of {', '.join(MODES)}, "
                         f"not {configured!r}")
    if configured == OFF or not api_installed():
        return OFF
    return configured
