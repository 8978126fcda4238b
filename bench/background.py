"""The overhead of a background tool call: ``echo_background`` (run by a Celery worker) against
``echo_inline`` (run in the web process), one body, one server (``bench/run --only background``).

Ours against ours: the official SDK has no background calls. One daphne process of the demo
project on PostgreSQL + Redis (as the ``ours-pg`` rows) with ``bench.settings`` (the demo plus the
pair of tools, ``bench/echo_pair``), and one ``celery -A project worker`` process on a Redis
broker of its own database. Per delivery (a handshake-era session answered on SSE, where the
worker writes on the request's stream; a 2026-07-28 request, whose messages the worker relays
through the web process) and per concurrency, blocks of inline and background calls alternate
(the order swapped each round, so the machine's drift falls on both alike), each block bounded
in calls and the whole in time. Per block: every call's latency (sent to last byte read), and
the CPU (utime + stime, /proc/<pid>/stat) of the daphne process and of the worker with its
children; the overhead is background minus inline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import rawhttp
import services

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOOLS = ("echo_inline", "echo_background")
DELIVERIES = ("stream", "relay")
CONCURRENCIES = (1, 8)
ROUNDS = 4
# Calls per block of one tool, by concurrency: enough that the CPU clock's 10 ms ticks stay small
# against a block's CPU, few enough that a round at c=1 (about 20 ms a background call) is short.
BLOCK_CALLS = {1: 100, 8: 250}
WARMUP_CALLS = 50
CALL_TIMEOUT = 30.0
# The whole of one delivery and concurrency stops starting blocks after this many seconds.
TIME_LIMIT = 60.0
DATABASE = "mcp_bench_background"
SECTION = "background tool call against the same tool inline (ours against ours)"


# Processes --------------------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of ``root`` and every live process under it (a prefork worker's children)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                parents[int(entry.name)] = int(fields[1])
                ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    wanted, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in wanted]
        wanted.update(children)
        frontier.extend(children)
    return sum(ticks.get(pid, 0) for pid in wanted) / CLK_TCK


def services_cpu_seconds(database: str, redis_port: int) -> float:
    """The PostgreSQL backends connected to ``database`` and the Redis server on ``redis_port``
    (informational: a backend that ends within a block takes its CPU with it)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = (command.startswith("postgres:") and f" {database} " in command) or \
               (command.startswith("redis-server") and command.rstrip().endswith(f":{redis_port}"))
        fields = _stat(int(entry.name)) if ours else None
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


class Worker:
    """One ``celery -A project worker`` process (solo pool unless told otherwise)."""

    def __init__(self, env: dict[str, str], log_path: Path, pool: str, concurrency: int):
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "celery", "-A", "project", "worker", f"--pool={pool}",
                "--loglevel=warning", "--without-gossip", "--without-mingle", "--without-heartbeat",
                f"--hostname=bench-{os.getpid()}@%h"]
        if pool != "solo":
            argv.append(f"--concurrency={concurrency}")
        self.process = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=self._log,
                                        stderr=subprocess.STDOUT)
        self.pid = self.process.pid

    def check(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the celery worker exited:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


# Load -------------------------------------------------------------------------------------------
class Caller:
    """One client: a keep-alive connection, with a session of its own for the ``stream`` delivery."""

    def __init__(self, port: int, delivery: str, index: int):
        self.connection = rawhttp.Connection(HOST, port)
        self.delivery = delivery
        self.session_id: str | None = None
        self.ids = itertools.count(index * 10_000_000 + 1)

    async def open(self) -> None:
        if self.delivery == "stream":
            self.session_id = await rawhttp.open_session(self.connection)

    async def call(self, tool: str) -> float:
        """One tools/call of ``tool``; its latency in seconds (raises unless it echoed)."""
        request_id = next(self.ids)
        message = f"hello {request_id}"
        params: dict = {"name": tool, "arguments": {"message": message}}
        headers = rawhttp.post_headers(self.session_id)
        if self.delivery == "relay":
            params["_meta"] = rawhttp.MODERN_META
            headers.update({"MCP-Protocol-Version": rawhttp.MODERN_VERSION, "Mcp-Method": "tools/call",
                            "Mcp-Name": tool})
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": params}).encode()
        started = time.perf_counter()
        answer = await asyncio.wait_for(self.connection.request("POST", headers, body), CALL_TIMEOUT)
        elapsed = time.perf_counter() - started
        responses = [m for m in answer.messages() if isinstance(m, dict) and m.get("id") == request_id]
        text = responses[0].get("result", {}).get("content", [{}])[0].get("text") if responses else None
        if answer.status != 200 or text != message:
            raise RuntimeError(f"{tool}: {answer.status} {answer.body[:300]!r}")
        return elapsed

    def close(self) -> None:
        self.connection.close()


async def block(callers: list[Caller], tool: str, calls: int) -> tuple[list[float], int]:
    """``calls`` calls of ``tool`` spread over the callers in a closed loop: latencies, errors."""
    remaining = iter(range(calls))
    latencies: list[float] = []
    errors = 0

    async def loop(caller: Caller) -> None:
        nonlocal errors
        for _ in remaining:
            try:
                latencies.append(await caller.call(tool))
            except Exception:
                errors += 1
                caller.close()  # a fresh connection for the next call
    await asyncio.gather(*(loop(caller) for caller in callers))
    return latencies, errors


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    web_cpu: float = 0.0
    worker_cpu: float = 0.0
    services_cpu: float = 0.0
    errors: int = 0

    @property
    def calls(self) -> int:
        return len(self.latencies)

    def per_call_us(self, seconds: float) -> float:
        return seconds / max(self.calls, 1) * 1e6


@dataclass
class Measured:
    delivery: str
    concurrency: int
    tallies: dict[str, Tally]
    rounds: int
    note: str = ""


class Meter:
    """CPU of the processes of one measurement, read before and after each block."""

    def __init__(self, web_pid: int, worker: Worker, redis_port: int):
        self.web_pid, self.worker, self.redis_port = web_pid, worker, redis_port

    def read(self) -> tuple[float, float, float]:
        return (tree_cpu_seconds(self.web_pid), tree_cpu_seconds(self.worker.pid),
                services_cpu_seconds(DATABASE, self.redis_port))


async def measure(port: int, meter: Meter, delivery: str, concurrency: int, rounds: int,
                  calls: int, time_limit: float) -> Measured:
    callers = [Caller(port, delivery, index) for index in range(concurrency)]
    try:
        await asyncio.gather(*(caller.open() for caller in callers))
        for tool in TOOLS:  # warm-up: connections, sessions, the worker's loop and pools
            _latencies, errors = await block(callers, tool, WARMUP_CALLS)
            if errors:
                raise RuntimeError(f"{errors} of the warm-up calls of {tool} failed")
        tallies = {tool: Tally() for tool in TOOLS}
        deadline, done, note = time.monotonic() + time_limit, 0, ""
        for done in range(rounds):
            if time.monotonic() > deadline:
                note = f"stopped after {done} of {rounds} rounds ({time_limit:g} s)"
                break
            for tool in TOOLS if done % 2 == 0 else reversed(TOOLS):
                meter.worker.check()
                before, started = meter.read(), time.monotonic()
                latencies, errors = await block(callers, tool, calls)
                seconds, after = time.monotonic() - started, meter.read()
                tally = tallies[tool]
                tally.latencies += latencies
                tally.errors += errors
                tally.seconds += seconds
                tally.web_cpu += after[0] - before[0]
                tally.worker_cpu += after[1] - before[1]
                tally.services_cpu += after[2] - before[2]
        else:
            done = rounds
        return Measured(delivery, concurrency, tallies, done, note)
    finally:
        for caller in callers:
            caller.close()


# Set-up -----------------------------------------------------------------------------------------
def broker_url(redis_url: str) -> str:
    """The Redis database after ``redis_url``'s, for the broker: a database of its own."""
    parts = urlsplit(redis_url)
    index = int(parts.path.strip("/") or 0)
    return urlunsplit((parts.scheme, parts.netloc, f"/{(index + 1) % 16}", parts.query, ""))


def run(*, postgres_admin_url: str, redis_url: str, workdir: Path,
        start_server: Callable[[list[str], dict[str, str]], Any], flush_redis: Callable[[str], None],
        log: Callable[[str], None], concurrencies: tuple[int, ...] = CONCURRENCIES,
        deliveries: tuple[str, ...] = DELIVERIES, rounds: int = ROUNDS, pool: str = "solo") -> list[Measured]:
    """Start the server (``start_server(argv, env)``, bench/run's ``Server``) and the worker,
    measure every delivery and concurrency, stop them."""
    database_url = services.fresh_postgres(postgres_admin_url, DATABASE)
    broker = broker_url(redis_url)
    for url in (redis_url, broker):
        flush_redis(url)
    env = {"DJANGO_SETTINGS_MODULE": "bench.settings", "DJANGO_DEBUG": "0", "DJANGO_DEVELOPMENT": "1",
           "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none", "DATABASE_URL": database_url,
           "REDIS_URL": redis_url, "CELERY_BROKER_URL": broker,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                   env={**os.environ, **env}, check=True)
    server = start_server([sys.executable, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}",
                           "project.asgi:application"], env)
    worker, results = None, []
    try:
        worker = Worker(env, workdir / "celery-worker.log", pool, max(concurrencies))
        meter = Meter(server.pid, worker, urlsplit(redis_url).port or 6379)
        for delivery in deliveries:
            for concurrency in concurrencies:
                calls = BLOCK_CALLS.get(concurrency, 30 * concurrency)
                measured = asyncio.run(measure(server.port, meter, delivery, concurrency, rounds, calls,
                                               TIME_LIMIT))
                results.append(measured)
                log(f"  background {delivery} c={concurrency}: " + ", ".join(
                    f"{tool} {tally.calls} calls, p50 {median_ms(tally):.2f} ms, "
                    f"{tally.per_call_us(tally.web_cpu + tally.worker_cpu):,.0f} µs CPU/call, "
                    f"{tally.errors} errors" for tool, tally in measured.tallies.items())
                    + f" {measured.note}")
    finally:
        if worker is not None:
            worker.stop()
        server.stop()
    return results


# Report -----------------------------------------------------------------------------------------
DELIVERY_LABELS = {"stream": "handshake session, SSE (worker writes the stream)",
                   "relay": "2026-07-28, no session (worker relays via the web process)"}


def table(results: list[Measured], pool: str) -> list[str]:
    lines = ["", f"### {SECTION}", "",
             f"One daphne process + one `celery -A project worker --pool={pool}` process, PostgreSQL + "
             "Redis; `echo_inline` and `echo_background` share one body. CPU: daphne + the worker "
             "(and its children), per call; PG+Redis: the row's database backends and Redis server.",
             "",
             "| delivery | conc. | calls each | inline p50 ms | background p50 ms | added p50 ms "
             "| inline p99 ms | background p99 ms | inline calls/s | background calls/s "
             "| inline CPU µs/call | background CPU µs/call (web + worker) | added CPU µs/call "
             "| added PG+Redis CPU µs/call | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for measured in results:
        inline, background = (measured.tallies[tool] for tool in TOOLS)
        if not inline.calls or not background.calls:
            continue
        p50 = [statistics.median(t.latencies) * 1e3 for t in (inline, background)]
        p99 = [percentile(t.latencies, 99) * 1e3 for t in (inline, background)]
        cpu = [t.per_call_us(t.web_cpu + t.worker_cpu) for t in (inline, background)]
        services = [t.per_call_us(t.services_cpu) for t in (inline, background)]
        lines.append(
            f"| {DELIVERY_LABELS[measured.delivery]} | {measured.concurrency} "
            f"| {min(inline.calls, background.calls):,} | {p50[0]:.2f} | {p50[1]:.2f} "
            f"| {p50[1] - p50[0]:+.2f} "
            f"| {p99[0]:.2f} | {p99[1]:.2f} | {inline.calls / inline.seconds:,.0f} "
            f"| {background.calls / background.seconds:,.0f} | {cpu[0]:,.0f} "
            f"| {cpu[1]:,.0f} ({background.per_call_us(background.web_cpu):,.0f} + "
            f"{background.per_call_us(background.worker_cpu):,.0f}) | {cpu[1] - cpu[0]:+,.0f} "
            f"| {services[1] - services[0]:+,.0f} | {inline.errors + background.errors} |")
    notes = [f"{m.delivery} c={m.concurrency}: {m.note}" for m in results if m.note]
    lines += [f"\nNote: {note}" for note in notes]
    return lines


def median_ms(tally: Tally) -> float:
    return statistics.median(tally.latencies) * 1e3 if tally.latencies else float("nan")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def as_json(results: list[Measured]) -> list[dict]:
    return [{"delivery": m.delivery, "concurrency": m.concurrency, "rounds": m.rounds, "note": m.note,
             "tools": {tool: {"calls": t.calls, "p50_ms": statistics.median(t.latencies) * 1e3,
                              "seconds": t.seconds, "web_cpu_s": t.web_cpu, "worker_cpu_s": t.worker_cpu,
                              "services_cpu_s": t.services_cpu, "errors": t.errors}
                       for tool, t in m.tallies.items() if t.calls}}
            for m in results]
