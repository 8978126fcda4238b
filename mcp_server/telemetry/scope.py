"""The connection the message being served came on, for the spans' client.address and network.*:
the ASGI scope of the HTTP request (set by the Streamable HTTP endpoint), ``{"type": "stdio"}`` on
stdio; None elsewhere (in process, a background worker). Setting it costs a context variable, and
imports nothing of OpenTelemetry."""

from __future__ import annotations

from contextvars import ContextVar

transport_scope: ContextVar[dict | None] = ContextVar("mcp_transport_scope", default=None)
