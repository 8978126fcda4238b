"""The audit trail across processes: two daphne processes and a Celery worker on PostgreSQL and
Redis. A background call's row is written once, by the worker that ends it, with its call id and
outcome; a 2026-07-28 call keeps its trace id; a daphne process stopped cleanly writes what it
had queued."""

from __future__ import annotations

import json

import pytest

from mcp_server.models import AuditRecord, ToolCall
from mcp_server.redaction import digest

from .celery_support import processes_and_worker
from .http_cluster import new_session, require_services
from .http_harness import DaphneServer
from .modern_support import envelope, post_over_http
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 7, 8
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1, "AUDIT": True, "AUDIT_FLUSH_INTERVAL": 0.2}
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


def row_of(**filters: object) -> AuditRecord:
    return wait_until(lambda: AuditRecord.objects.filter(**filters).first(), what=f"an audit row {filters}")


def test_a_background_call_on_the_worker_leaves_one_row_with_its_call_id_and_outcome(deployment):
    (a, b), worker = deployment
    client = new_session(a.url)
    exchange = client.request("tools/call", {"name": "background_job", "arguments": {"steps": 1}},
                              request_id=41, url=b.url)
    assert exchange.response is not None, exchange
    result = exchange.response["result"]
    assert json.loads(result["content"][0]["text"])["pid"] == worker.process.pid
    call = ToolCall.objects.get(session_id=client.session_id)
    row = row_of(background_call=call.id)
    assert (row.method, row.name, row.outcome, row.error_code) == ("tools/call", "background_job", "ok", None)
    assert (row.session_id, row.request_id, row.task) == (client.session_id, 41, False)
    assert row.arguments == {"steps": 1} and row.arguments_digest == digest({"steps": 1})
    assert row.result_size == len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
    assert row.time == call.created_at and row.duration > 0

    # Calls refused before anything is queued: their rows (written by the web process) say why;
    # and the first call still has one row.
    invalid = client.request("tools/call", {"name": "background_job", "arguments": {"steps": "many"}},
                             request_id=42, url=a.url)
    assert invalid.response["result"]["isError"] is True, invalid
    failing = client.request("tools/call", {"name": "no_such_tool", "arguments": {}}, request_id=43,
                             url=a.url)
    assert failing.response is not None and "error" in failing.response, failing
    refused = row_of(session_id=client.session_id, outcome="tool_error")
    assert (refused.name, refused.request_id, refused.background_call) == ("background_job", 42, "")
    failed = row_of(session_id=client.session_id, outcome="error")
    assert (failed.name, failed.error_code, failed.request_id) == ("no_such_tool", -32602, 43)
    assert AuditRecord.objects.filter(background_call=call.id).count() == 1
    assert AuditRecord.objects.filter(session_id=client.session_id).count() == 3


def test_a_modern_call_keeps_its_trace_id_and_no_session(deployment):
    (a, _b), _worker = deployment
    meta = {**envelope(), "traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"}
    status, messages = post_over_http(a.url, "tools/call", "modern-1", meta, name="echo",
                                      arguments={"message": "traced"})
    assert status == 200 and "result" in messages[-1], messages
    row = row_of(trace_id=TRACE_ID)
    assert (row.protocol_version, row.session_id, row.request_id) == ("2026-07-28", "", "modern-1")
    assert (row.name, row.outcome, row.arguments) == ("echo", "ok", {"message": "traced"})


def test_a_task_gets_its_row_when_it_ends_not_when_it_is_created(deployment, tmp_path):
    (a, _b), worker = deployment
    gate = tmp_path / "gate"
    capabilities = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    status, messages = post_over_http(a.url, "tools/call", "task-1", envelope(capabilities), name="task_job",
                                      arguments={"gate": str(gate)})
    created = messages[-1]["result"]
    assert status == 200 and created["resultType"] == "task", messages
    task_id = created["taskId"]
    wait_until(lambda: ToolCall.objects.filter(id=task_id, state=ToolCall.State.RUNNING).exists(),
               what="the worker to start the task")
    assert not AuditRecord.objects.filter(background_call=task_id).exists()  # answered, not ended
    gate.touch()
    row = row_of(background_call=task_id)
    assert (row.task, row.outcome, row.name, row.request_id) == (True, "ok", "task_job", "task-1")
    assert row.protocol_version == "2026-07-28" and row.result_size > 0
    assert ToolCall.objects.get(id=task_id).runner and worker.process.poll() is None
    assert AuditRecord.objects.filter(background_call=task_id).count() == 1


def test_rows_queued_in_a_process_are_written_when_it_stops_cleanly(django_db_blocker):
    require_services()
    # Batches of a thousand, an hour apart: only the flush at shutdown can write these rows.
    server = DaphneServer(mcp_settings={"AUDIT": True, "AUDIT_BATCH_SIZE": 1000,
                                        "AUDIT_FLUSH_INTERVAL": 3600})
    try:
        client = new_session(server.url)
        for number in range(5):
            exchange = client.request("tools/call", {"name": "echo", "arguments": {"message": str(number)}})
            assert exchange.response is not None and "result" in exchange.response
        assert not AuditRecord.objects.filter(session_id=client.session_id).exists()
    finally:
        server.stop()  # SIGTERM: daphne returns from its reactor, and the process exits
    assert server.process.returncode == 0, server.log
    rows = AuditRecord.objects.filter(session_id=client.session_id).order_by("request_id")
    assert [row.arguments for row in rows] == [{"message": str(number)} for number in range(5)], server.log
