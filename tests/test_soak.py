"""The fleet soak (``bench/soak``), two minutes of it: 4 daphne processes behind the round-robin
proxy, 2 Celery workers, PostgreSQL and Redis, mixed traffic of both protocol eras, while every
web process is restarted in turn (SIGTERM: it drains) and a worker is killed with SIGKILL.

The soak checks every message against the schema, every call's outcome and bound, the stored
events (resumes), and each process's memory; it exits 1 on any failure. Here its periods are
scaled down so that a whole rolling restart (4 restarts, 20 s apart) and two worker kills fit in
the 120 s of traffic. Also: the round-robin proxy passes a request a stopped upstream refused on
to the next one, and the worker-death error the soak expects is the project's own.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from urllib.parse import quote

from django.conf import settings

from conformance.proxy import Proxy
from mcp_server.background.launch import WORKER_STOPPED
from mcp_server.http.liveness import REQUEST_STOPPED

from .harness import REPO
from .http_cluster import REDIS_HOST, REDIS_PORT, RedisLease, require_services
from .http_harness import free_port

# Two Redis databases no other test module uses: the soak's and its Celery broker's.
REDIS_DB, BROKER_DB = 0, 1
DURATION = 120
RESTART_PERIOD = 20  # restarts at 20, 40, 60 and 80 s: each of the 4 processes once
KILL_PERIOD = 45     # kills at 45 and 90 s: each worker once
# A bound on the whole run: start-up, the traffic, its last operations (each bounded by the
# soak's own --op-timeout) and the stop.
RUN_BOUND = DURATION + 240


def soak_database_url() -> str:
    """A database of the soak's own beside the test database (the soak drops and creates it)."""
    database = settings.DATABASES["default"]
    user = quote(database.get("USER") or "postgres")
    password = f":{quote(database['PASSWORD'])}" if database.get("PASSWORD") else ""
    host, port = database.get("HOST") or "127.0.0.1", database.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{database['NAME']}_soak"


def test_a_two_minute_soak_with_a_rolling_restart_and_worker_kills_loses_nothing():
    require_services()
    leases = [RedisLease(REDIS_DB), RedisLease(BROKER_DB)]  # each flushes its database
    for lease in leases:
        lease.acquire()
    try:
        result = subprocess.run(
            [sys.executable, str(REPO / "bench" / "soak.py"), "--duration", str(DURATION),
             "--restart-period", str(RESTART_PERIOD), "--kill-period", str(KILL_PERIOD),
             "--workers", "8", "--warmup", "15", "--op-timeout", "60", "--no-flush",
             "--postgres-url", soak_database_url(),
             "--redis-url", f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}",
             "--broker-url", f"redis://{REDIS_HOST}:{REDIS_PORT}/{BROKER_DB}"],
            cwd=REPO, env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            capture_output=True, text=True, timeout=RUN_BOUND)
    finally:
        for lease in leases:
            lease.release()
    report = result.stdout
    assert result.returncode == 0, f"{report}\n{result.stderr[-6000:]}"
    # What the run went through: each web process restarted, each worker killed, and both eras'
    # operations done (the soak counts them; none may be missing from the mix).
    restarted = set(re.findall(r"daphne (\d): SIGTERM, drained and exited 0", report))
    assert restarted == {"1", "2", "3", "4"}, report
    assert len(re.findall(r"celery worker \d: SIGKILL", report)) >= 2, report
    for kind in ("elicit", "background", "modern", "task", "modern listen", "resume", "listen"):
        done = re.search(rf"^\| {kind} \| ([\d,]+) \|", report, re.MULTILINE)
        assert done and int(done.group(1).replace(",", "")) > 0, (kind, report)
    outcomes = r"^outcomes: [\d,]+ results, \d+ expected errors, 0 failures"
    assert re.search(outcomes, report, re.MULTILINE), report
    assert "RSS: within ±10% in all" in report, report


def test_the_worker_death_errors_the_soak_expects_are_the_projects_own():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
    finally:
        sys.path.remove(str(REPO / "bench"))
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
