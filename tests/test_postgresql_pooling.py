"""Every kind of query the project makes, on two daphne processes whose connections go through
Django's connection pool (``MCP_DATABASE_POOL``), through PgBouncer in transaction mode, or both:
sessions, stored events and their resumption on the other process, background calls on a Celery
worker of the prefork pool (whose children have the same settings), a task of the Tasks extension,
the audit writer's COPY, admin, and the authorization server.

PgBouncer here is one the test starts, in front of the machine's PostgreSQL, with
``pool_mode = transaction``: whatever needs one server connection across transactions (session
advisory locks, LISTEN, WITH HOLD cursors, prepared statements, SET) would fail or go astray here.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from mcp_server.models import AuditRecord, Session, StreamEvent, ToolCall

from .celery_support import celery_worker
from .http_cluster import (
    call_tool,
    cluster,
    listening,
    new_session,
    next_event,
    open_stream,
    require_services,
)
from .modern_support import envelope, post_over_http
from .postgres_support import pgbouncer
from .redis_faults import redis_server
from .test_database_connections import connections_of
from .waiting import PATIENCE, wait_until

POOL_SIZE = "4"
# Celery's prefork pool: the worker's main process makes no query, so each child opens a pool of
# its own on its first (one opened before the fork would be inherited with its threads gone).
PREFORK = 2


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^PPid:\s+(\d+)", status, re.MULTILINE)[1])


def admin_sees_session(base: str, session_id: str, password: str) -> None:
    """Log in to admin on ``base`` and find the session in its list."""
    with httpx.Client(base_url=base, timeout=PATIENCE) as http:
        login = http.get("/admin/login/")
        assert login.status_code == 200, login.text[:500]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
        logged_in = http.post("/admin/login/", data={
            "csrfmiddlewaretoken": token, "username": "operator", "password": password, "next": "/admin/"},
            headers={"referer": f"{base}/admin/login/"})
        assert logged_in.status_code == 302, logged_in.text[:1000]
        sessions = http.get("/admin/mcp_server/session/")
        assert sessions.status_code == 200, sessions.text[:500]
        assert session_id in sessions.text


def authorization_server_registers(base: str) -> None:
    with httpx.Client(base_url=base, timeout=PATIENCE) as http:
        assert http.get("/.well-known/oauth-authorization-server").status_code == 200
        registered = http.post("/oauth/register/", json={
            "client_name": "Pooled client", "redirect_uris": ["http://127.0.0.1:9/callback"],
            "token_endpoint_auth_method": "none", "grant_types": ["authorization_code"],
            "response_types": ["code"]})
        assert registered.status_code == 201, registered.text


@pytest.mark.parametrize("route", ["pool", "pgbouncer", "pgbouncer-and-pool"])
@pytest.mark.django_db(transaction=True)
def test_every_kind_of_query_works_through_a_pool(route, tmp_path, django_db_blocker):
    require_services()
    name = f"mcp-pooled-{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    get_user_model().objects.create_superuser("operator", "operator@example.com", password)
    env = {"MCP_TEST_APPLICATION_NAME": name, **({"MCP_DATABASE_POOL": POOL_SIZE} if "pool" in route else {})}
    settings = connection.settings_dict
    # Events in the database (not Redis), so that storing and replaying them are queries too.
    mcp_settings = {"EVENT_STORE_CLASS": "mcp_server.http.event_store.DatabaseEventStore"}
    with django_db_blocker.unblock(), redis_server(tmp_path) as redis, \
            (pgbouncer(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
             if "pgbouncer" in route else contextlib.nullcontext()) as bouncer:
        if bouncer is not None:
            env["DATABASE_URL"] = bouncer.url(settings["NAME"])
        env["CELERY_BROKER_URL"] = redis.url(1)
        with cluster(2, redis_db=0, redis_port=redis.port, env=env, mcp_settings=mcp_settings,
                     wait=False) as servers, \
                celery_worker(broker_url=redis.url(1), redis_url=redis.url(0), env=env,
                              mcp_settings_json=json.dumps(mcp_settings), prefork=PREFORK) as worker:
            listening(servers)
            a, b = (server.url for server in servers)
            base_a, base_b = (url.removesuffix("/mcp") for url in (a, b))
            client = new_session(a)
            # Sessions: a row read and changed on the other process.
            assert client.request("logging/setLevel", {"level": "debug"}, url=b).status == 200
            # Events: a call's stream stored as it goes, then resumed on the other process.
            exchange = client.request("tools/call", {"name": "slow_count", "arguments": {
                "count": 3, "delay": 0.01}, "_meta": {"progressToken": "p"}}, url=a)
            assert exchange.response["result"]["content"][0]["text"], exchange.response
            first = next(event for event in exchange.events if event.id and event.message)
            resumed = open_stream(client, b, last_event_id=first.id)
            replayed = [next_event(resumed)]
            while "result" not in replayed[-1].message:
                replayed.append(next_event(resumed))
            resumed.close()
            assert replayed[-1].message == exchange.response
            # A background call on the Celery worker: its record made, taken, updated and ended.
            assert call_tool(client, b, "count_in_background", {"to": 1}) == "Counted to 1"
            ran = ToolCall.objects.get(session_id=client.session_id, tool="count_in_background")
            # Run by a child of the worker (its record says host:pid), each with a pool of its own.
            assert parent_of(int(ran.worker.rsplit(":", 1)[1])) == worker.process.pid, ran.worker
            # A task (the Tasks extension, a 2026-07-28 request): its record locked and read on the
            # other process as it is polled.
            tasks = envelope({"extensions": {"io.modelcontextprotocol/tasks": {}}})
            status, messages = post_over_http(a, "tools/call", "task-1", tasks, name="count_in_background",
                                              arguments={"to": 1})
            created = messages[-1]["result"]
            assert (status, created["resultType"]) == (200, "task"), messages

            def task_ended() -> dict | None:
                _status, answer = post_over_http(b, "tasks/get", "poll", tasks, taskId=created["taskId"])
                task = answer[-1]["result"]
                return task if task["status"] != "working" else None

            assert wait_until(task_ended, what="the task to end")["status"] == "completed"
            # Admin and the authorization server, on each process.
            admin_sees_session(base_a, client.session_id, password)
            authorization_server_registers(base_b)
            # The audit writer's batches (a COPY) reach the table.
            wait_until(lambda: AuditRecord.objects.filter(session_id=client.session_id).count() >= 2,
                       what="the audit rows of the session's two calls")
            assert StreamEvent.objects.filter(session_id=client.session_id).exists()
            assert ToolCall.objects.get(pk=ran.pk).state == "completed"
            # The session ends on the other process.
            assert client.delete(url=b).status_code == 200
            assert not Session.objects.filter(pk=client.session_id).exists()
            client.close()
            if "pool" in route and bouncer is None:
                # The pool keeps its connections open between requests (without it, none stays).
                assert connections_of(name) >= 2
            if bouncer is not None:
                stats = {row["database"]: row for row in bouncer.show("STATS")}
                assert int(stats[settings["NAME"]]["total_xact_count"]) > 0, stats
                assert "ERROR" not in bouncer.log, bouncer.log
        for process in [*servers, worker]:
            assert "Traceback" not in process.log, process.log
