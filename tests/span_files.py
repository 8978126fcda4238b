"""Spans of the processes a test starts (daphne, the Celery worker), each written by the
OpenTelemetry SDK to a file of the process's own as one JSON object a line, and read back."""

from __future__ import annotations

import json
import os
from pathlib import Path


def export_spans_to(directory: str) -> None:
    """Make this process's tracer provider write every span, as it ends, to ``<pid>.jsonl``."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(Path(directory) / f"{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115 - the process's life
    provider = TracerProvider(resource=Resource.create({"service.name": f"mcp-test-{os.getpid()}"}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(provider)


def spans_of(directory: Path, pid: int) -> list[dict]:
    """The spans process ``pid`` wrote so far."""
    path = directory / f"{pid}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
