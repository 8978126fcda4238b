"""One trace across the deployment: two daphne processes and a Celery worker on PostgreSQL and
Redis, each exporting its spans with the OpenTelemetry SDK (``tests/span_files.py``). A client
call that carries a ``traceparent`` yields spans on both processes and on the worker that share
its trace id, with the attributes of the MCP semantic conventions, in either era. Every message is
checked against the schema of its revision."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .celery_support import processes_and_worker
from .http_cluster import new_session
from .modern_support import MODERN, envelope, post_over_http
from .span_files import spans_of
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 10, 11
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "TELEMETRY": "native"}


@pytest.fixture(scope="module")
def spans_dir() -> Any:
    directory = Path(tempfile.mkdtemp(prefix="mcp-spans-"))
    saved = os.environ.get("MCP_TEST_SPANS_DIR")
    os.environ["MCP_TEST_SPANS_DIR"] = str(directory)  # the processes started below inherit it
    try:
        yield directory
    finally:
        if saved is None:
            os.environ.pop("MCP_TEST_SPANS_DIR", None)
        else:
            os.environ["MCP_TEST_SPANS_DIR"] = saved
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker, spans_dir):
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


def new_trace() -> tuple[str, str]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, f"00-{trace_id}-{parent_id}-01"


def in_trace(directory: Path, pid: int, trace_id: str) -> list[dict]:
    return [span for span in spans_of(directory, pid) if span["context"]["trace_id"] == f"0x{trace_id}"]


def named(spans: list[dict], name: str, kind: str) -> dict | None:
    return next((s for s in spans if s["name"] == name and s["kind"] == f"SpanKind.{kind}"), None)


def spans_everywhere(directory: Path, pids: dict[str, int], trace_id: str,
                     wanted: dict[str, tuple[str, str]]) -> dict[str, dict]:
    """Wait until each process (by role) has written its span ``(name, kind)`` of the trace."""
    found: dict[str, dict] = {}

    def complete() -> bool:
        for role, (name, kind) in wanted.items():
            span = named(in_trace(directory, pids[role], trace_id), name, kind)
            if span is not None:
                found[role] = span
        return len(found) == len(wanted)

    wait_until(complete, what=f"the spans of trace {trace_id} on {', '.join(wanted)}")
    return found


def test_handshake_era_trace_crosses_both_processes_and_the_worker(deployment, spans_dir):
    (a, b), worker = deployment
    pids = {"a": a.process.pid, "b": b.process.pid, "worker": worker.process.pid}
    trace_id, traceparent = new_trace()
    client = new_session(a.url)
    # A background call POSTed to a: it runs on the worker, its stream is served by a.
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 1},
                                             "_meta": {"progressToken": "p", "traceparent": traceparent}},
                              url=a.url)
    assert exchange.response is not None and "result" in exchange.response, exchange
    assert json.loads(exchange.response["result"]["content"][0]["text"])["pid"] == worker.process.pid
    # The next request of the session lands on the other process.
    other = client.request("tools/call", {"name": "sleepy", "arguments": {"seconds": 0},
                                          "_meta": {"traceparent": traceparent}}, url=b.url)
    assert other.response is not None and "result" in other.response, other

    spans = spans_everywhere(spans_dir, pids, trace_id, {
        "a": ("tools/call background_job", "SERVER"),
        "worker": ("tools/call background_job", "CONSUMER"),
        "b": ("tools/call sleepy", "SERVER"),
    })
    for role in ("a", "b"):
        attributes = spans[role]["attributes"]
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["mcp.protocol.version"] == client.revision
        assert attributes["mcp.session.id"] == client.session_id
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["client.address"] == "127.0.0.1"
        assert attributes["network.transport"] == "tcp"
        assert attributes["network.protocol.name"] == "http"
        assert attributes["network.protocol.version"] == "1.1"
        assert spans[role]["parent_id"] == f"0x{traceparent.split('-')[2]}"
    assert spans["a"]["attributes"]["gen_ai.tool.name"] == "background_job"
    assert spans["a"]["attributes"]["jsonrpc.request.id"] == str(exchange.response["id"])
    assert spans["b"]["attributes"]["gen_ai.tool.name"] == "sleepy"
    # The worker's span continues the span that queued the call, and links to it.
    run = spans["worker"]
    queued = spans["a"]["context"]["span_id"]
    assert run["parent_id"] == queued
    assert [link["context"]["span_id"] for link in run["links"]] == [queued]
    assert run["attributes"]["mcp.session.id"] == client.session_id
    assert run["attributes"]["gen_ai.tool.name"] == "background_job"
    assert "error.type" not in run["attributes"]


def test_modern_era_trace_crosses_both_processes_and_the_worker(deployment, spans_dir):
    (a, b), worker = deployment
    pids = {"a": a.process.pid, "b": b.process.pid, "worker": worker.process.pid}
    trace_id, traceparent = new_trace()
    meta = {**envelope(), "traceparent": traceparent}
    status, messages = post_over_http(a.url, "tools/call", 31, meta, name="background_job",
                                      arguments={"steps": 1})
    assert status == 200 and "result" in messages[-1], messages
    status, messages = post_over_http(b.url, "tools/call", 32, meta, name="sleepy", arguments={"seconds": 0})
    assert status == 200 and "result" in messages[-1], messages

    spans = spans_everywhere(spans_dir, pids, trace_id, {
        "a": ("tools/call background_job", "SERVER"),
        "worker": ("tools/call background_job", "CONSUMER"),
        "b": ("tools/call sleepy", "SERVER"),
    })
    for role in ("a", "b", "worker"):
        attributes = spans[role]["attributes"]
        assert attributes["mcp.protocol.version"] == MODERN
        assert "mcp.session.id" not in attributes  # the 2026-07-28 era has no session
    assert spans["a"]["attributes"]["jsonrpc.request.id"] == "31"
    assert spans["b"]["attributes"]["jsonrpc.request.id"] == "32"
    assert spans["b"]["attributes"]["client.address"] == "127.0.0.1"
    assert spans["worker"]["parent_id"] == spans["a"]["context"]["span_id"]


def test_a_json_rpc_error_on_the_other_process_carries_its_code(deployment, spans_dir):
    (a, b), _worker = deployment
    trace_id, traceparent = new_trace()
    client = new_session(a.url)
    failed = client.request("tools/call", {"name": "no_such_tool", "arguments": {},
                                           "_meta": {"traceparent": traceparent}}, url=b.url)
    assert failed.response is not None and "error" in failed.response, failed
    code = str(failed.response["error"]["code"])
    spans = spans_everywhere(spans_dir, {"b": b.process.pid}, trace_id,
                             {"b": ("tools/call no_such_tool", "SERVER")})
    assert spans["b"]["attributes"]["error.type"] == code
    assert spans["b"]["attributes"]["rpc.response.status_code"] == code
    assert spans["b"]["status"]["status_code"] == "ERROR"
