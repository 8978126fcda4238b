"""The standard way to switch telemetry on: the demo under ``opentelemetry-instrument`` with the
standard ``OTEL_*`` variables exports over OTLP/HTTP to a collector, with no code change.

The collector is a small HTTP server of the test's own, decoding what it receives with
``opentelemetry-proto``. A client session with ``mcp_client``, run under the same variables in a
process of its own, adds the client's histograms; its messages go through the schema checks.
"""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from .harness import REPO
from .http_harness import database_env, free_port, stop_process
from .waiting import PATIENCE, wait_until

BIN = Path(sys.executable).parent
HISTOGRAMS = ("mcp.server.operation.duration", "mcp.server.session.duration",
              "mcp.client.operation.duration", "mcp.client.session.duration")
BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]

CLIENT = """
import asyncio, sys
from mcp_client import AsyncClient
from tests.client_support import CheckedHTTPTransport

async def main():
    client = AsyncClient(CheckedHTTPTransport(sys.argv[1]), mode="legacy")
    await client.connect()
    answer = await client.call_tool("echo", {"message": "traced"})
    assert answer.content[0]["text"] == "traced", answer
    await client.close()

asyncio.run(main())
"""


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1: what arrives on ``/v1/traces`` and ``/v1/metrics``."""

    def __init__(self):
        self.spans: list = []  # (service name, span)
        self.metrics: list = []  # (service name, metric)
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    collector.take_traces(body)
                    answer = ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    collector.take_metrics(body)
                    answer = ExportMetricsServiceResponse()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                payload = answer.SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="otlp-collector")
        self.thread.start()

    @staticmethod
    def _service(resource) -> str:
        return next((attribute.value.string_value for attribute in resource.attributes
                     if attribute.key == "service.name"), "")

    def take_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                service = self._service(resource_spans.resource)
                for scope in resource_spans.scope_spans:
                    self.spans.extend((service, span) for span in scope.spans)

    def take_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self.lock:
            for resource_metrics in request.resource_metrics:
                service = self._service(resource_metrics.resource)
                for scope in resource_metrics.scope_metrics:
                    self.metrics.extend((service, metric) for metric in scope.metrics)

    def metric_names(self) -> set[str]:
        with self.lock:
            return {metric.name for _service, metric in self.metrics}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def otel_env(endpoint: str, service: str) -> dict[str, str]:
    return {"OTEL_SERVICE_NAME": service, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "OTEL_BSP_SCHEDULE_DELAY": "200"}


@pytest.fixture(scope="module")
def exported(django_db_setup, django_db_blocker):
    """The demo under opentelemetry-instrument, and a client session against it: the collector."""
    collector = Collector()
    port = free_port()
    with django_db_blocker.unblock():
        database = database_env()
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("OTEL_")}
    log = Path(f"/tmp/mcp-otlp-daphne-{port}.log")
    server_env = {**base, "DJANGO_SETTINGS_MODULE": "tests.http_settings", "PYTHONUNBUFFERED": "1",
                  **database, **otel_env(collector.endpoint, "mcp-demo")}
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [str(BIN / "opentelemetry-instrument"), str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port),
             "project.asgi:application"], cwd=REPO, env=server_env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _listening(port) or server.poll() is not None, PATIENCE, "daphne listening")
        assert server.poll() is None, log.read_text()
        client_env = {**base, "PYTHONUNBUFFERED": "1", **otel_env(collector.endpoint, "mcp-client")}
        done = subprocess.run([str(BIN / "opentelemetry-instrument"), sys.executable, "-c", CLIENT,
                               f"http://127.0.0.1:{port}/mcp"], cwd=REPO, env=client_env,
                              capture_output=True, text=True, timeout=PATIENCE)
        assert done.returncode == 0, done.stderr
        wait_until(lambda: set(HISTOGRAMS) <= collector.metric_names(), PATIENCE,
                   "the four MCP histograms at the collector")
        yield collector
    finally:
        stop_process(server)
        collector.stop()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """What the daphne process writes is committed: the tests run on a transactional database."""


def test_the_four_histograms_arrive_with_units_buckets_and_services(exported):
    with exported.lock:
        found = {(service, metric.name): metric for service, metric in exported.metrics
                 if metric.name in HISTOGRAMS}
    for service, name in (("mcp-demo", HISTOGRAMS[0]), ("mcp-demo", HISTOGRAMS[1]),
                          ("mcp-client", HISTOGRAMS[2]), ("mcp-client", HISTOGRAMS[3])):
        metric = found[(service, name)]
        assert metric.unit == "s"
        points = metric.histogram.data_points
        assert points and all(list(point.explicit_bounds) == BUCKETS for point in points), name
        for point in points:
            keys = {attribute.key for attribute in point.attributes}
            assert "mcp.session.id" not in keys
    calls = [point for point in found[("mcp-demo", HISTOGRAMS[0])].histogram.data_points
             if {(a.key, a.value.string_value) for a in point.attributes} >= {
                 ("mcp.method.name", "tools/call"), ("gen_ai.tool.name", "echo")}]
    assert calls and calls[-1].count >= 1


def test_the_client_and_server_spans_of_a_call_arrive_in_one_trace(exported):
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    def tool_call_spans() -> tuple[list, list]:
        with exported.lock:
            spans = [(service, span) for service, span in exported.spans if span.name == "tools/call echo"]
        return ([span for service, span in spans if service == "mcp-client"
                 and span.kind == Span.SpanKind.SPAN_KIND_CLIENT],
                [span for service, span in spans if service == "mcp-demo"
                 and span.kind == Span.SpanKind.SPAN_KIND_SERVER])

    wait_until(lambda: all(tool_call_spans()), PATIENCE, "the client's and the server's tools/call spans")
    client_spans, server_spans = tool_call_spans()
    # The client put its context in params._meta: the server's span is its child, in its trace.
    parents = {(span.trace_id, span.span_id) for span in client_spans}
    assert any((span.trace_id, span.parent_span_id) in parents for span in server_spans)
    attributes = {a.key: a.value.string_value for a in server_spans[0].attributes}
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "echo"
