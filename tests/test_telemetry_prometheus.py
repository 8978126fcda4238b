"""Prometheus scrapes the metrics: ``opentelemetry-exporter-prometheus``'s reader serves them with
``prometheus_client``'s HTTP server, on a free 127.0.0.1 port of a server process.

Two ways a deployment sets it up: the demo under ``opentelemetry-instrument`` with
``OTEL_METRICS_EXPORTER=prometheus`` (no code change), and a process that builds the reader and
starts the HTTP server itself (as a project's ``asgi.py`` would).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .harness import REPO
from .http_harness import database_env, free_port, stop_process
from .waiting import PATIENCE, wait_until
from .wire import check_server_message  # noqa: F401 - the child checks each answer with it

BIN = Path(sys.executable).parent
BOUNDS = ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "30", "60", "120", "300", "+Inf"]

CLIENT = """
import asyncio, sys
from mcp_client import AsyncClient
from tests.client_support import CheckedHTTPTransport

async def main():
    client = AsyncClient(CheckedHTTPTransport(sys.argv[1]), mode="legacy")
    await client.connect()
    answer = await client.call_tool("echo", {"message": "scraped"})
    assert answer.content[0]["text"] == "scraped", answer
    await client.close()

asyncio.run(main())
"""

# A process that sets the reader up in code, serves one stateless tools/call in process, then
# waits for its stdin to close while Prometheus scrapes it.
EXPLICIT = """
import asyncio, json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

start_http_server(port=int(sys.argv[1]), addr="127.0.0.1")
metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

import django
django.setup()
import httpx
from mcp_server import Server
from mcp_server.http import StreamableHTTPTransport
from mcp_server.site import install
from tests.wire import check_server_message

install()
server = Server("scraped")

@server.tool
async def shout(text: str) -> str:
    \"\"\"Says it louder.\"\"\"
    return text.upper()

async def main():
    transport = StreamableHTTPTransport(server, stateless=True)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-11-25"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=transport.as_asgi())) as http:
        answer = await http.post("http://127.0.0.1/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "shout", "arguments": {"text": "hi"}}})
    message = answer.json() if answer.headers["content-type"].startswith("application/json") else \\
        json.loads([line[5:] for line in answer.text.splitlines() if line.startswith("data:")][-1])
    check_server_message(message, "2025-11-25")
    assert message["result"]["content"][0]["text"] == "HI", message
    await transport.close()

asyncio.run(main())
print("served", flush=True)
sys.stdin.read()
"""


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def scrape(port: int) -> str:
    answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert answer.status_code == 200
    return answer.text


def buckets_of(text: str, name: str, **labels: str) -> list[str]:
    """The ``le`` bounds of ``name``'s bucket series whose labels include ``labels``."""
    found = []
    for line in text.splitlines():
        match = re.match(rf"^{name}_bucket\{{(.*)\}} ", line)
        if match and all(f'{key}="{value}"' in match.group(1) for key, value in labels.items()):
            found.append(re.search(r'le="([^"]+)"', match.group(1)).group(1))
    return found


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """What the daphne process writes is committed: the tests run on a transactional database."""


def test_the_demo_under_opentelemetry_instrument_serves_a_scrape(django_db_blocker):
    port, metrics_port = free_port(), free_port()
    with django_db_blocker.unblock():
        database = database_env()
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("OTEL_")}
    env = {**base, "DJANGO_SETTINGS_MODULE": "tests.http_settings", "PYTHONUNBUFFERED": "1", **database,
           "OTEL_SERVICE_NAME": "mcp-demo", "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
           "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port)}
    log = Path(f"/tmp/mcp-prometheus-daphne-{port}.log")
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [str(BIN / "opentelemetry-instrument"), str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port),
             "project.asgi:application"], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: (listening(port) and listening(metrics_port)) or server.poll() is not None,
                   PATIENCE, "daphne and its metrics endpoint listening")
        assert server.poll() is None, log.read_text()
        done = subprocess.run([sys.executable, "-c", CLIENT, f"http://127.0.0.1:{port}/mcp"], cwd=REPO,
                              env=base, capture_output=True, text=True, timeout=PATIENCE)
        assert done.returncode == 0, done.stderr
        text = wait_until(lambda: (lambda t: t if "mcp_server_session_duration_seconds_bucket" in t
                                   else None)(scrape(metrics_port)), PATIENCE, "the session's duration")
    finally:
        stop_process(server)
    assert "# TYPE mcp_server_operation_duration_seconds histogram" in text
    assert buckets_of(text, "mcp_server_operation_duration_seconds", mcp_method_name="tools/call",
                      gen_ai_tool_name="echo") == BOUNDS
    assert buckets_of(text, "mcp_server_session_duration_seconds",
                      mcp_protocol_version="2025-11-25") == BOUNDS
    assert "mcp_session_id" not in text
    assert re.search(r"^mcp_server_get_stream_count(\{[^}]*\})? ", text, re.M)


def test_a_reader_set_up_in_code_serves_a_scrape():
    metrics_port = free_port()
    child = subprocess.Popen([sys.executable, "-c", EXPLICIT, str(metrics_port)], cwd=REPO,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "served", child.stderr.read()
        text = scrape(metrics_port)
    finally:
        child.stdin.close()
        stop_process(child)
    assert buckets_of(text, "mcp_server_operation_duration_seconds", mcp_method_name="tools/call",
                      gen_ai_tool_name="shout") == BOUNDS
    count = r'^mcp_server_operation_duration_seconds_count\{[^}]*gen_ai_tool_name="shout"[^}]*\} 1\.0$'
    assert re.search(count, text, re.M), text
