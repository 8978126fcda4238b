#!/usr/bin/env python3
"""Scale benchmark: many open streams on one process, and two processes against the SDK's two.

    .venv/bin/python bench/scale.py streams --count 10000     # memory per stream, broadcast time
    .venv/bin/python bench/scale.py cluster --duration 5      # 2 processes: calls/s, CPU per call

``streams``: on one process each, ours (daphne, PostgreSQL + Redis) and the official SDK's stateful
server (``bench/reference_server.py`` under uvicorn) get ``--count`` sessions, each with its GET
stream open (``bench/streams.py``); the row reports resident memory per stream (RSS after - RSS
before, / count, session included). Then, with every stream still open and read, ours gets one
``notifications/tools/list_changed`` (``server.notify_tools_list_changed()`` called from another
process, ``bench/notify.py``): the time from the call until the last stream had it. The SDK has no
call that notifies every session (a notification goes to one session, from a request of it).

``cluster``: two daphne processes of ours on one PostgreSQL + Redis behind the round-robin proxy
(``conformance/proxy.py``: every request to the next process, so a session's requests land on
both), against the SDK's stateful server under ``uvicorn --workers 2``, which shares one listening
socket between its workers: a session is made and used on one keep-alive connection
(``bench/wrk/sticky_call.lua``), so it stays with the worker that accepted the connection, the
stickiness the SDK needs. Rows: stateful calls at ``--concurrency`` (16) and whole sessions
(initialize + initialized + call + DELETE, ``bench/wrk/session.lua``); per row, calls (or
sessions) per second and the CPU per call of the server processes (and of the proxy, apart), from
/proc. For ours, the same rows count Redis commands per call (``INFO commandstats``: the Redis
must be the run's alone) and PostgreSQL transactions and row writes per call or session
(``pg_stat_database``, ``pg_stat_user_tables`` of the run's database).

Timed numbers are indicative: the machine is shared; run it with ``nice``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
import streams  # noqa: E402
from run import HOST, ROOT, Config, Server  # noqa: E402

DEFAULT_POSTGRES = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
DEFAULT_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")
LIST_CHANGED = b"notifications/tools/list_changed"


# Processes -----------------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (uvicorn's workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(_stat_fields(int(entry.name))[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def tree_cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in {p for root in pids for p in descendants(root)}:
        try:
            fields = _stat_fields(pid)
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / run.CLK_TCK


def configs(postgres_url: str, redis_url: str) -> dict[str, Config]:
    python = sys.executable
    daphne = [python, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}", "project.asgi:application"]
    env = {"DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0", "DJANGO_DEVELOPMENT": "1",
           "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none", "DATABASE_URL": postgres_url, "REDIS_URL": redis_url}
    migrate = [python, "manage.py", "migrate", "--noinput", "-v", "0"]
    uvicorn = [python, "-m", "uvicorn", "--no-access-log", "--log-level", "warning", "--host", HOST,
               "--port", "{port}", "--app-dir", str(HERE), "--factory", "reference_server:stateful_app"]
    return {
        "ours": Config("ours-pg", "ours, PostgreSQL + Redis", "ours", "stateful", daphne, env, [migrate]),
        "theirs": Config("theirs-stateful", "official SDK", "theirs", "stateful",
                         [python, str(HERE / "reference_server.py"), "--port", "{port}", "--mode",
                          "stateful"]),
        "theirs-2": Config("theirs-stateful-2", "official SDK, uvicorn --workers 2", "theirs", "stateful",
                           [*uvicorn, "--workers", "2"]),
    }


def prepare(config: Config, redis_url: str | None) -> None:
    for command in config.prepare:
        subprocess.run(command, cwd=ROOT, env={**os.environ, **config.env}, check=True)
    if redis_url:
        run.flush_redis(redis_url)


# Streams -------------------------------------------------------------------------------------
class Notifier:
    """``bench/notify.py`` set up and waiting: ``send()`` makes it notify every session."""

    def __init__(self, env: dict[str, str]):
        self.process = subprocess.Popen([sys.executable, str(HERE / "notify.py")], cwd=ROOT,
                                        env={**os.environ, **env}, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "READY":
            raise RuntimeError("bench/notify.py did not start")

    async def send(self) -> float:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        line = await asyncio.to_thread(self.process.stdout.readline)
        parts = line.split()
        if not parts or parts[0] != "SENT" or parts[3] != "True":
            raise RuntimeError(f"bench/notify.py: {line!r}")
        self.returned_after = float(parts[2]) - float(parts[1])
        return float(parts[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(5)


async def _streams_row(server: Server, count: int, notifier: Notifier | None, settle: float,
                       timeout: float, broadcasts: int) -> dict:
    await streams.end_sessions(HOST, server.port, (await streams.open_streams(HOST, server.port, 20))[0])
    await asyncio.sleep(settle)
    before = server.rss_bytes()
    began = time.monotonic()
    opened, resets = await streams.open_streams(HOST, server.port, count)
    row = {"server": server.config.label, "count": count, "open_s": time.monotonic() - began,
           "resets": resets}
    try:
        await asyncio.sleep(settle)
        row["per_stream"] = (server.rss_bytes() - before) / count
        row["rss_mib"] = server.rss_bytes() / 2**20
        if notifier is not None:
            row["broadcasts"] = []
            for _ in range(broadcasts):
                # The server's CPU while idle (keepalives) over a second, then over the broadcast:
                # the difference is what the broadcast cost it, less noisy than its duration.
                idle = server.cpu_seconds()
                await asyncio.sleep(1)
                idle = server.cpu_seconds() - idle
                cpu, began = server.cpu_seconds(), time.monotonic()
                measured = await streams.broadcast(opened, notifier.send, LIST_CHANGED, timeout)
                cpu = server.cpu_seconds() - cpu - idle * (time.monotonic() - began)
                row["broadcasts"].append((measured, notifier.returned_after, cpu))
    finally:
        for stream in opened:
            stream.close()
    return row


def streams_main(args: argparse.Namespace, workdir: Path) -> list[str]:
    found = configs(run.fresh_postgres(args.postgres_url, args.database) if args.database else "",
                    args.redis_url)
    rows = []
    for key in args.sides:
        config = found[key]
        prepare(config, args.redis_url if key == "ours" else None)
        server = Server(config, workdir)
        notifier = Notifier(config.env) if key == "ours" else None
        try:
            row = asyncio.run(_streams_row(server, args.count, notifier, args.settle, args.timeout,
                                           args.broadcasts))
        finally:
            if notifier is not None:
                notifier.stop()
            server.stop()
        print(f"  {key}: {row}", file=sys.stderr)
        rows.append(row)
    ours = next((row for row in rows if "broadcasts" in row), None)
    theirs = next((row for row in rows if "broadcasts" not in row), None)
    lines = ["", f"### {args.count:,} open GET streams on one process", "",
             "| server | streams | opened in s | resets while opening | RSS MiB | KiB per stream "
             "| ours/theirs |", "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        share = f"{ours['per_stream'] / theirs['per_stream']:.2f}" if row is ours and theirs else ""
        lines.append(f"| {row['server']} | {row['count']:,} | {row['open_s']:.0f} | {row['resets']} "
                     f"| {row['rss_mib']:,.0f} "
                     f"| {row['per_stream'] / 1024:.1f} | {share} |")
    for number, (measured, returned, cpu) in enumerate(ours["broadcasts"] if ours else [], 1):
        if measured.received:
            lines += ["", f"Broadcast {number}: one notifications/tools/list_changed from "
                          f"server.notify_tools_list_changed() in another process (the call returned after "
                          f"{returned * 1000:.0f} ms): {measured.received:,} of {measured.streams:,} streams "
                          f"had it; the first after {measured.first_s * 1000:.0f} ms, half after "
                          f"{measured.median_s * 1000:.0f} ms, the last after "
                          f"{measured.last_s * 1000:.0f} ms. Server CPU of the broadcast: {cpu:.2f} s "
                          f"({cpu / measured.streams * 1e6:.0f} µs per stream)."]
        else:
            lines += ["", f"Broadcast {number}: no stream had the notification within {args.timeout:g} s."]
    lines += ["The official SDK has no call that notifies every session: not measured."]
    return lines


# Cluster -------------------------------------------------------------------------------------
class Proxy:
    def __init__(self, upstreams: list[int], workdir: Path):
        self.port = run.free_port()
        self._log = open(workdir / "proxy.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, str(ROOT / "conformance" / "proxy.py"), "--host", HOST,
                "--port", str(self.port)]
        for port in upstreams:
            argv += ["--upstream", f"{HOST}:{port}"]
        self.process = subprocess.Popen(argv, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                                        preexec_fn=run.raise_fd_limit)
        self.pid = self.process.pid
        deadline = time.monotonic() + 30
        while not run.reachable(f"http://{HOST}:{self.port}", self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(15)
        self._log.close()


class TripCounter:
    """``bench/tcpcount.py`` in front of the Redis of ``redis_url``: ``url`` goes through it."""

    def __init__(self, redis_url: str):
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(redis_url)
        self.port = run.free_port()
        self.url = urlunsplit((parts.scheme, f"{HOST}:{self.port}", parts.path, parts.query, ""))
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "tcpcount.py"), "--port", str(self.port),
             "--upstream", f"{parts.hostname or HOST}:{parts.port or 6379}"],
            stdout=subprocess.PIPE, text=True, preexec_fn=run.raise_fd_limit)
        if self.process.stdout.readline().strip() != "LISTENING":
            raise RuntimeError("bench/tcpcount.py did not start")

    def trips(self) -> int:
        self.process.send_signal(signal.SIGUSR1)
        line = self.process.stdout.readline().split()
        if not line or line[0] != "COUNT":
            raise RuntimeError(f"bench/tcpcount.py: {line!r}")
        return int(line[1])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class Counters:
    """Redis commands (``INFO commandstats``, the whole Redis) and PostgreSQL activity (the run's
    database): ``take()`` returns what happened since the last take."""

    def __init__(self, redis_url: str, postgres_url: str):
        import psycopg
        import redis

        self.redis = redis.Redis.from_url(redis_url)
        self.pg = psycopg.connect(postgres_url, autocommit=True)
        self.last = self._read()

    def _read(self) -> dict[str, float]:
        values: dict[str, float] = {}
        for name, stats in self.redis.info("commandstats").items():
            values[f"redis {name.removeprefix('cmdstat_')}"] = stats["calls"]
        self.pg.execute("SELECT pg_stat_clear_snapshot()")
        row = self.pg.execute("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM "
                              "pg_stat_database WHERE datname = current_database()").fetchone()
        values.update(zip(("pg transactions", "pg rows inserted", "pg rows updated", "pg rows deleted"),
                          row, strict=True))
        for table, inserted, updated, deleted in self.pg.execute(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"):
            for verb, value in (("inserted", inserted), ("updated", updated), ("deleted", deleted)):
                if value:
                    values[f"pg {table} {verb}"] = value
        return values

    def take(self) -> dict[str, float]:
        now = self._read()
        delta = {key: value - self.last.get(key, 0) for key, value in now.items()}
        self.last = now
        return {key: value for key, value in delta.items() if value}


def _load(script: str, port: int, concurrency: int, duration: float) -> dict:
    return run.wrk(script, f"http://{HOST}:{port}/mcp", threads=concurrency, connections=concurrency,
                   duration=duration)


def cluster_main(args: argparse.Namespace, workdir: Path) -> list[str]:
    postgres_url = run.fresh_postgres(args.postgres_url, args.database)
    found = configs(postgres_url, args.redis_url)
    rows: list[dict] = []
    counted: list[tuple[str, float, dict[str, float]]] = []

    def measure(label: str, script: str, port: int, pids: list[int], extra: list[int],
                counters: Counters | None) -> None:
        _load(script, port, args.concurrency, 2)  # warm up
        if counters is not None:
            time.sleep(args.stats_wait)
            counters.take()
            # What the idle processes do (heartbeats, the channel layer's polls) over as long a time.
            time.sleep(args.duration)
            idle = counters.take()
        cpu, other = tree_cpu_seconds(pids), tree_cpu_seconds(extra) if extra else 0.0
        result = _load(script, port, args.concurrency, args.duration)
        cpu, other = tree_cpu_seconds(pids) - cpu, (tree_cpu_seconds(extra) - other) if extra else None
        done = max(result.get("calls", result.get("sessions", 0)), 1)
        seconds = result["duration_us"] / 1e6
        kind = "calls" if "calls" in result else "sessions"
        rows.append({"label": label, "kind": kind, "rate": done / seconds, "cpu_us": cpu / done * 1e6,
                     "proxy_us": None if other is None else other / done * 1e6,
                     "p50_ms": result["p50_us"] / 1000, "p99_ms": result["p99_us"] / 1000,
                     "failures": result["failures"] + sum(result["errors"].values())})
        print(f"  {label} {kind}: {rows[-1]}", file=sys.stderr)
        if counters is not None:
            time.sleep(args.stats_wait)  # PostgreSQL reports a backend's counts within seconds
            busy = counters.take()
            # Redis's idle rate (heartbeats, the channel layer's polls) is subtracted; PostgreSQL's is
            # not: what it writes idle (activity flushes, reaping) follows from the row's sessions.
            net = {key: value - (idle.get(key, 0) * seconds / args.duration
                                 if key.startswith("redis ") else 0) for key, value in busy.items()}
            counted.append((f"{label} {kind}", done, net))

    # Ours: two daphne processes behind the round-robin proxy.
    config = found["ours"]
    prepare(config, args.redis_url)
    counters = Counters(args.redis_url, postgres_url)
    servers = [Server(config, workdir), Server(config, workdir)]
    proxy = Proxy([server.port for server in servers], workdir)
    try:
        for script in ("sticky_call.lua", "session.lua"):
            measure("ours, 2 daphne processes + round-robin proxy", script, proxy.port,
                    [server.pid for server in servers], [proxy.pid], counters)
    finally:
        proxy.stop()
        for server in servers:
            server.stop()
    # Ours again, Redis behind a relay that counts round trips (untimed: the relay costs CPU).
    relay = TripCounter(args.redis_url)
    trips: list[tuple[str, int, float, float]] = []
    counted_config = Config(config.key, config.label, config.side, config.mode, config.argv,
                            {**config.env, "REDIS_URL": relay.url})
    prepare(counted_config, args.redis_url)
    servers = [Server(counted_config, workdir), Server(counted_config, workdir)]
    proxy = Proxy([server.port for server in servers], workdir)
    try:
        # At c=1 a trip is a wait of the one request in flight; at more, the client pipelines the
        # commands of concurrent requests on one connection, and a trip serves several.
        for script, concurrency in itertools.product(("sticky_call.lua", "session.lua"),
                                                     sorted({1, args.concurrency})):
            _load(script, proxy.port, concurrency, 2)
            before = relay.trips()
            time.sleep(args.duration)
            idle = relay.trips() - before
            before = relay.trips()
            result = _load(script, proxy.port, concurrency, args.duration)
            busy = relay.trips() - before
            done = max(result.get("calls", result.get("sessions", 0)), 1)
            net = busy - idle * result["duration_us"] / 1e6 / args.duration
            trips.append(("call" if "calls" in result else "session", concurrency, done, net))
            print(f"  Redis round trips: {trips[-1]} (idle {idle})", file=sys.stderr)
    finally:
        proxy.stop()
        for server in servers:
            server.stop()
        relay.stop()
    # The SDK: uvicorn --workers 2, sessions sticky by connection.
    sdk = Server(found["theirs-2"], workdir)
    try:
        for script in ("sticky_call.lua", "session.lua"):
            measure("official SDK, uvicorn --workers 2", script, sdk.port, [sdk.pid], [], None)
    finally:
        sdk.stop()

    lines = ["", f"### two processes, c={args.concurrency}, {args.duration:g} s rows", "",
             "| server | row | per s | p50 ms | p99 ms | server CPU µs each | proxy CPU µs each | failures "
             "| ours/theirs: rate | CPU |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        theirs = next((r for r in rows if r["kind"] == row["kind"] and r["label"].startswith("official")),
                      None)
        mine = not row["label"].startswith("official") and theirs is not None
        lines.append(
            f"| {row['label']} | {row['kind']} | {row['rate']:,.0f} | {row['p50_ms']:.1f} "
            f"| {row['p99_ms']:.1f} "
            f"| {row['cpu_us']:,.0f} | {'' if row['proxy_us'] is None else format(row['proxy_us'], ',.0f')} "
            f"| {row['failures']} | {run.ratio(row['rate'], theirs['rate']) if mine else ''} "
            f"| {run.ratio(row['cpu_us'], theirs['cpu_us']) if mine else ''} |")
    lines += ["", "Redis round trips of ours (bench/tcpcount.py between the processes and Redis, in a "
                  "run of its own; the idle rate subtracted):", ""]
    lines += [f"- per {per} at c={concurrency}: {net / done:.2f} ({done:,} done)"
              for per, concurrency, done, net in trips]
    for label, done, net in counted:
        per = "call" if label.endswith("calls") else "session"
        redis_total = sum(value for key, value in net.items() if key.startswith("redis "))
        lines += ["", f"#### {label}: per {per} ({done:,.0f}; the idle rate subtracted)", "",
                  f"Redis commands (a script's inner commands counted too): {redis_total / done:.2f}", ""]
        lines += [f"- {key}: {value / done:.2f}" for key, value in sorted(net.items(), key=lambda kv: -kv[1])
                  if abs(value / done) >= 0.01]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("streams", "cluster"))
    parser.add_argument("--count", type=int, default=10000, help="open streams (streams; 10000)")
    parser.add_argument("--sides", nargs="*", choices=("ours", "theirs"), default=["ours", "theirs"],
                        help="whose server gets the streams (both)")
    parser.add_argument("--broadcasts", type=int, default=3, help="notifications timed, one after "
                        "the other (3)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before reading RSS (3)")
    parser.add_argument("--timeout", type=float, default=60.0, help="bound of the broadcast wait (60 s)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per cluster row (5)")
    parser.add_argument("--concurrency", type=int, default=16, help="connections of a cluster row (16)")
    parser.add_argument("--stats-wait", type=float, default=2.0,
                        help="seconds for PostgreSQL to publish its counts before a read (2)")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="an admin URL of PostgreSQL")
    parser.add_argument("--database", default="mcp_bench_scale", help="made afresh (mcp_bench_scale)")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS,
                        help="a Redis the run may flush, and alone on its server for the command counts")
    args = parser.parse_args()
    run.raise_fd_limit()
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if args.part == "streams" and soft < args.count + 1000:
        parser.error(f"{args.count} streams need more descriptors than the limit of {soft}")
    workdir = Path(tempfile.mkdtemp(prefix="mcp-scale-"))
    began = time.monotonic()
    lines = (streams_main if args.part == "streams" else cluster_main)(args, workdir)
    print(f"Scale benchmark ({args.part}) of {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} "
          f"cores, took {time.monotonic() - began:.0f} s; server logs in {workdir}.")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
