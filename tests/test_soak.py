"""The fleet soak (``bench/soak``), two minutes of it: 4 daphne processes behind the round-robin
proxy, 2 Celery workers, PostgreSQL and Redis, mixed traffic of both protocol eras, while every
web process is restarted in turn (SIGTERM: it drains) and a worker is killed with SIGKILL.

The soak checks every message against the schema, every operation's outcome and its bound, the
stored events (resumes), and each process's memory; it exits 1 on any failure, a web process that
does not exit after SIGTERM included. Here its periods are scaled down so that a whole rolling
restart (4 restarts, 20 s apart) and two worker kills fit in the 120 s of traffic. Also: the
round-robin proxy passes a request a stopped upstream refused on to the next one, and the
worker-death errors the soak expects are the project's own.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from typing import Any
from urllib.parse import quote

import psycopg
from django.conf import settings

from conformance.proxy import Proxy
from mcp_server.background.launch import WORKER_STOPPED
from mcp_server.http.liveness import REQUEST_STOPPED

from .harness import REPO
from .http_cluster import REDIS_HOST, REDIS_PORT, RedisLease, require_services
from .http_harness import free_port

# Two Redis databases of the soak's own here: its state and its Celery broker (leased).
REDIS_DB, BROKER_DB = 0, 1
DURATION = 120
RESTART_PERIOD = 20  # restarts from 20 s on, one process after the other: each of the 4 once
KILL_PERIOD = 45     # kills at 45 and 90 s: each worker once
OP_TIMEOUT = 60      # an operation's bound: past it, a failure
# A bound on the whole run, past which the soak itself hangs: start-up of 4 web processes and 2
# workers on a loaded machine, the traffic, its last operations, a restart's drain and the stop.
RUN_BOUND = DURATION + 2 * OP_TIMEOUT + 240


def bench_soak() -> Any:
    """``bench/soak.py`` as a module."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
    finally:
        sys.path.remove(str(REPO / "bench"))
    return soak


def soak_database() -> tuple[str, str]:
    """The URL of a database of the soak's own beside the test database (the soak drops and
    creates it), and that of the server's ``postgres`` database, to drop it afterwards."""
    database = settings.DATABASES["default"]
    user = quote(database.get("USER") or "postgres")
    password = f":{quote(database['PASSWORD'])}" if database.get("PASSWORD") else ""
    host, port = database.get("HOST") or "127.0.0.1", database.get("PORT") or 5432
    base = f"postgres://{user}{password}@{host}:{port}"
    return f"{base}/{database['NAME']}_soak", f"{base}/postgres"


def test_a_two_minute_soak_with_a_rolling_restart_and_worker_kills_loses_nothing():
    require_services()
    url, admin = soak_database()
    leases = [RedisLease(REDIS_DB), RedisLease(BROKER_DB)]  # each flushes its database
    for lease in leases:
        lease.acquire()
    try:
        result = subprocess.run(
            [sys.executable, str(REPO / "bench" / "soak.py"), "--duration", str(DURATION),
             "--restart-period", str(RESTART_PERIOD), "--kill-period", str(KILL_PERIOD),
             "--workers", "8", "--warmup", "15", "--op-timeout", str(OP_TIMEOUT), "--no-flush",
             "--postgres-url", url,
             "--redis-url", f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}",
             "--broker-url", f"redis://{REDIS_HOST}:{REDIS_PORT}/{BROKER_DB}"],
            cwd=REPO, env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            capture_output=True, text=True, timeout=RUN_BOUND)
    finally:
        for lease in leases:
            lease.release()
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    report = result.stdout
    # The soak's verdict: every operation ended with its result or the documented error of a
    # worker it killed, within its bound; no stored event lost or repeated; no message off the
    # schema; no process that died, would not stop (drain) or start; memory within ±10 %.
    assert result.returncode == 0, f"{report}\n{result.stderr[-6000:]}"
    outcomes = r"^outcomes: [\d,]+ results, \d+ expected errors, 0 failures"
    assert re.search(outcomes, report, re.MULTILINE), report
    assert "RSS: within ±10% in all" in report, report
    longest = re.search(r"^Longest wait for any operation to end: ([\d.]+) s", report, re.MULTILINE)
    assert longest and float(longest.group(1)) <= OP_TIMEOUT, report
    # What the run went through: each web process restarted (it drained and exited 0), each
    # worker killed, and both eras' operations done (none may be missing from the mix).
    restarted = set(re.findall(r"daphne (\d): SIGTERM, drained and exited 0 ", report))
    assert restarted == {"1", "2", "3", "4"}, report
    assert len(re.findall(r"celery worker \d: SIGKILL", report)) >= 2, report
    for kind in bench_soak().MIX:
        done = re.search(rf"^\| {kind} \| ([\d,]+) \|", report, re.MULTILINE)
        assert done and int(done.group(1).replace(",", "")) > 0, (kind, report)


def test_the_worker_death_errors_the_soak_expects_are_the_projects_own():
    soak = bench_soak()
    assert (soak.WORKER_STOPPED, soak.REQUEST_STOPPED) == (WORKER_STOPPED, REQUEST_STOPPED)


async def test_the_proxy_passes_a_request_a_stopped_upstream_refused_to_the_next_one():
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nserved")
        await writer.drain()
        writer.close()

    live = await asyncio.start_server(upstream, "127.0.0.1", 0)
    stopped = free_port()  # nothing listens there: the connection is refused
    proxy = Proxy([("127.0.0.1", stopped), ("127.0.0.1", live.sockets[0].getsockname()[1])], None)
    front = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", front.sockets[0].getsockname()[1])
        for _ in range(3):  # on one kept-alive connection, whichever upstream's turn it is
            writer.write(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            assert await reader.readexactly(6) == b"served"
        writer.close()
        assert (proxy.counts, proxy.skipped) == ([0, 3], [3, 0])
    finally:
        front.close()
        live.close()
