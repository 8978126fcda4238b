"""Whether the client makes spans: its ``telemetry`` option, without importing OpenTelemetry.

``None`` (the default) means on when ``opentelemetry-api`` is installed (the ``telemetry``
extra); ``False`` imports nothing; ``True`` without the API is an error. The spans themselves
are :mod:`mcp_client.tracing`'s, imported only when on.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from typing import Any


@cache
def api_installed() -> bool:
    """Whether opentelemetry-api can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("opentelemetry") is not None and \
        importlib.util.find_spec("opentelemetry.trace") is not None


def tracing_for(option: bool | None) -> Any:
    """The client's tracing (:class:`mcp_client.tracing.ClientTracing`), or None when off."""
    if option is not None and not isinstance(option, bool):
        raise ValueError(f"telemetry must be True, False or None (on when OpenTelemetry is installed), "
                         f"not {option!r}")
    if option is False or (option is None and not api_installed()):
        return None
    if not api_installed():
        raise ValueError("telemetry=True needs opentelemetry-api: pip install 'django-mcp-sdk[telemetry]'")
    from .tracing import ClientTracing

    return ClientTracing()
