#!/usr/bin/env python3
"""Load benchmark of the Streamable HTTP endpoint: our demo server against the official Python SDK.

    bench/run                          # everything (about 9 minutes), prints the table
    bench/run --duration 5 --only stateless --markdown   # a quicker look at one part

It starts, in one run, our demo (``daphne project.asgi:application``) and a reference server on
the official SDK (``bench/reference_server.py`` under uvicorn) serving the same ``echo`` tool, and
drives both with the same load:

- ``tools/call`` of echo in a closed loop at concurrency 1, 16 and 64 (``wrk`` with
  ``bench/wrk/call.lua``): stateless with JSON responses, and stateful (sessions, SSE responses)
  for the SDK's default mode, ours on PostgreSQL + Redis (the multi-process configuration) and on
  the embedded default (SQLite, in-memory state);
- ``tools/call`` in the 2026-07-28 lifecycle (the ``_meta`` envelope, no session; ``MCP_MODERN=1``
  for call.lua), the SDK's stateless server against ours on PostgreSQL + Redis (the SQLite
  default without them), at the same concurrencies;
- whole sessions per second (initialize + initialized + one call + DELETE, ``bench/wrk/session.lua``);
- memory per session holding an open GET stream, with 1,000 and 5,000 open (``bench/streams.py``);
- the overhead of a background tool call (a Celery worker) against the same tool inline, ours
  against ours (the official SDK has no background calls): ``bench/background.py``.

Ours runs under uvicorn and under granian too (``ours-stateless-uvicorn``, ``ours-pg-uvicorn``,
``ours-stateless-granian``, ``ours-pg-granian``; ``--servers`` picks rows), to tell the ASGI
server's share apart.

Per row: requests per second, p50/p99 latency (wrk's), server CPU time per request (utime + stime
of the server process and its threads, from /proc/<pid>/stat; under granian, of its worker
process) and peak memory (VmHWM, reset before each row), with the ratio ours/theirs. A benchmark,
not a test: it prints numbers, it never fails on speed. Needs ``wrk`` (Debian: ``apt-get install
wrk``), PostgreSQL and Redis for the PostgreSQL + Redis rows (skipped with a note when
unreachable).

``--instructions`` adds, beside each row's timed columns, its instructions per request (or per
session) counted under valgrind (``bench/rowcounts.py``, on ``bench/counting.py``: the row's server
started again under callgrind, ``--instruction-calls`` calls), the ratio ours/theirs, the bare
ASGI floor under the same ASGI server (``bench/floor_app.py``) and ours above it. Rows at c=64 are
not counted. Needs valgrind; it adds a few minutes per server:

    bench/run --only stateless stateful modern sessions --concurrency 1 16 --instructions
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import background  # noqa: E402
import counting  # noqa: E402
import rawhttp  # noqa: E402
import rowcounts  # noqa: E402
import services  # noqa: E402
import streams  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"
CONCURRENCIES = (1, 16, 64)
SESSION_CONCURRENCY = 16
STREAM_COUNTS = (1000, 5000)
WARMUP_SECONDS = 3
POSTGRES_DATABASE = "mcp_bench"
DEFAULT_POSTGRES = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
DEFAULT_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")


# Servers -------------------------------------------------------------------------------------
def free_port() -> int:
    return services.free_port(HOST)


def raise_fd_limit() -> None:
    """As ``ulimit -n`` would: the 5,000-stream row needs more descriptors than the usual 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@dataclass
class Config:
    key: str            # "theirs-stateless", "ours-pg", ...
    label: str          # as printed
    side: str           # "ours" or "theirs"
    mode: str           # "stateless" or "stateful"
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    prepare: list[list[str]] = field(default_factory=list)  # commands run before start (migrate)


class Server:
    def __init__(self, config: Config, workdir: Path, port: int | None = None):
        self.config = config
        self.port = port or free_port()  # a port given: a process restarted where it ran
        self.log_path = workdir / f"{config.key}-{self.port}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **config.env}
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [part.replace("{port}", str(self.port)) for part in config.argv]
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, preexec_fn=raise_fd_limit)
        self.pid = self.process.pid
        self._wait_listening()
        # granian's main process starts the one worker that serves: that one is measured.
        if counting.serves_in_child(config.argv):
            self.pid = counting.worker_child(self.process.pid)

    def _wait_listening(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.config.label} exited:\n{self.log_path.read_text()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.config.label} did not listen in {timeout}s")

    def cpu_seconds(self) -> float:
        """utime + stime of the process and all its threads."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def status_kib(self, key: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def reset_peak(self) -> bool:
        """Start VmHWM afresh (Linux >= 4.0, writing 5 to clear_refs); False when not allowed."""
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            return True
        except OSError:
            return False

    def rss_bytes(self) -> int:
        return self.status_kib("VmRSS") * 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


def service_cpu_seconds() -> float:
    """CPU of every PostgreSQL and Redis process on the machine (informational: shared services)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        if name.startswith(("postgres", "redis-server")):
            fields = text.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


# Load ----------------------------------------------------------------------------------------
def wrk(script: str, url: str, *, threads: int, connections: int, duration: float,
        env: dict[str, str] | None = None) -> dict:
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s",
            "-s", str(HERE / "wrk" / script), url]
    done = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=duration + 60, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"wrk printed no result:\n{done.stdout}\n{done.stderr}")


async def _prepare_sessions(port: int, count: int) -> list[str]:
    connection = rawhttp.Connection(HOST, port)
    try:
        ids = [await rawhttp.open_session(connection) for _ in range(count)]
        for index, session_id in enumerate(ids):
            if await rawhttp.echo(connection, session_id, index + 1) != "hello":
                raise RuntimeError("echo answered something else")
        return ids
    finally:
        connection.close()


async def _check_echo(port: int, *, modern: bool = False) -> None:
    connection = rawhttp.Connection(HOST, port)
    try:
        if await rawhttp.echo(connection, None, modern=modern) != "hello":
            raise RuntimeError("echo answered something else")
    finally:
        connection.close()


@dataclass
class Row:
    section: str
    config: Config
    concurrency: int | None
    rate: float              # requests (or sessions) per second
    p50_ms: float | None
    p99_ms: float | None
    cpu_us: float            # server CPU per request (or per session)
    peak_mib: float | None
    services_us: float | None = None
    errors: int = 0
    note: str = ""
    instructions: float | None = None  # per request (or session), with --instructions
    floor: float | None = None         # the bare ASGI application's, under the same ASGI server


MODERN_SECTION = "tools/call, 2026-07-28 lifecycle (no session, the _meta envelope)"


def load_env(server: Server, concurrency: int, modern: bool) -> dict[str, str]:
    """wrk's environment for calls to ``server``, checked by one call first."""
    if modern:
        asyncio.run(_check_echo(server.port, modern=True))
        return {"MCP_MODERN": "1"}
    if server.config.mode == "stateful":
        return {"MCP_SESSIONS": ",".join(asyncio.run(_prepare_sessions(server.port, concurrency)))}
    asyncio.run(_check_echo(server.port))
    return {}


def run_load(server: Server, section: str, concurrency: int, duration: float,
             with_services: bool) -> Row:
    config = server.config
    url = f"http://{HOST}:{server.port}/mcp"
    env = load_env(server, concurrency, section == MODERN_SECTION)
    exact_peak = server.reset_peak()
    cpu, services = server.cpu_seconds(), service_cpu_seconds() if with_services else 0.0
    result = wrk("call.lua", url, threads=1, connections=concurrency, duration=duration, env=env)
    cpu = server.cpu_seconds() - cpu
    services = service_cpu_seconds() - services if with_services else None
    requests = max(result["requests"], 1)
    errors = sum(result["errors"].values())
    return Row(section, config, concurrency, requests / (result["duration_us"] / 1e6),
               result["p50_us"] / 1000, result["p99_us"] / 1000, cpu / requests * 1e6,
               server.status_kib("VmHWM") / 1024, None if services is None else services / requests * 1e6,
               errors, "" if exact_peak else "peak since start")


def run_sessions(server: Server, duration: float, with_services: bool) -> Row:
    url = f"http://{HOST}:{server.port}/mcp"
    server.reset_peak()
    cpu, services = server.cpu_seconds(), service_cpu_seconds() if with_services else 0.0
    result = wrk("session.lua", url, threads=SESSION_CONCURRENCY, connections=SESSION_CONCURRENCY,
                 duration=duration)
    cpu = server.cpu_seconds() - cpu
    services = service_cpu_seconds() - services if with_services else None
    count = max(result["sessions"], 1)
    return Row("sessions per second (initialize + initialized + call + DELETE)", server.config,
               SESSION_CONCURRENCY, count / (result["duration_us"] / 1e6), result["p50_us"] / 1000,
               result["p99_us"] / 1000, cpu / count * 1e6, server.status_kib("VmHWM") / 1024,
               None if services is None else services / count * 1e6,
               result["failures"] + sum(result["errors"].values()))


def run_streams(server: Server, counts: tuple[int, ...]) -> list[tuple[int, int]]:
    return asyncio.run(streams.measure(HOST, server.port, list(counts), server.rss_bytes))


# Set-up ----------------------------------------------------------------------------------------
def reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or HOST, parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def fresh_postgres(admin_url: str, database: str = POSTGRES_DATABASE) -> str:
    """A new, empty ``database`` (``mcp_bench``) on the server of ``admin_url``; returns its URL."""
    return services.fresh_postgres(admin_url, database)


def flush_redis(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushdb()


def configs(workdir: Path, postgres_url: str | None, redis_url: str | None) -> dict[str, Config]:
    python = sys.executable
    daphne = [python, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}", "project.asgi:application"]
    reference = [python, str(HERE / "reference_server.py"), "--port", "{port}", "--mode"]
    # The same application under the reference's ASGI server, to tell the two servers' costs apart.
    uvicorn = [python, "-m", "uvicorn", "--no-access-log", "--log-level", "warning", "--lifespan", "off",
               "--host", HOST, "--port", "{port}", "project.asgi:application"]
    # And under granian (Rust, tokio): its one worker process, the asyncio loop, lifespan off.
    granian = counting.asgi_argv(python, "granian", "project.asgi:application")
    # One client address opens thousands of sessions here: the per-principal limit is lifted.
    base = {"DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0", "DJANGO_DEVELOPMENT": "1",
            "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none"}
    sqlite = {**base, "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}"}
    migrate = [python, "manage.py", "migrate", "--noinput", "-v", "0"]
    found = {
        "theirs-stateless": Config("theirs-stateless", "official SDK", "theirs", "stateless",
                                   [*reference, "stateless"]),
        "ours-stateless": Config("ours-stateless", "ours", "ours", "stateless", daphne,
                                 {**sqlite, "MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"}, [migrate]),
        "theirs-stateful": Config("theirs-stateful", "official SDK", "theirs", "stateful",
                                  [*reference, "stateful"]),
        "ours-sqlite": Config("ours-sqlite", "ours, SQLite (embedded default)", "ours", "stateful",
                              daphne, sqlite, [migrate]),
    }
    # The same without the registry admin shapes: what reading it costs a call.
    found["ours-stateless-code-registry"] = Config(
        "ours-stateless-code-registry", "ours, registry as code defines it", "ours", "stateless", daphne,
        {**sqlite, "MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1", "MCP_REGISTRY_IN_DATABASE": "0"},
        [migrate])
    found["ours-stateless-uvicorn"] = Config(
        "ours-stateless-uvicorn", "ours under uvicorn", "ours", "stateless", uvicorn,
        {**sqlite, "MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"}, [migrate])
    found["ours-stateless-granian"] = Config(
        "ours-stateless-granian", "ours under granian", "ours", "stateless", granian,
        {**sqlite, "MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"}, [migrate])
    if postgres_url and redis_url:
        pg = {**base, "DATABASE_URL": postgres_url, "REDIS_URL": redis_url}
        found["ours-pg"] = Config("ours-pg", "ours, PostgreSQL + Redis", "ours", "stateful", daphne, pg,
                                  [migrate])
        found["ours-pg-uvicorn"] = Config("ours-pg-uvicorn", "ours, PostgreSQL + Redis, under uvicorn",
                                          "ours", "stateful", uvicorn, pg, [migrate])
        found["ours-pg-granian"] = Config("ours-pg-granian", "ours, PostgreSQL + Redis, under granian",
                                          "ours", "stateful", granian, pg, [migrate])
    return found


# Report ----------------------------------------------------------------------------------------
def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs == 0:
        return ""
    return f"{ours / theirs:.2f}"


def number(value: float | None, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def table(rows: list[Row]) -> list[str]:
    lines = []
    sections = list(dict.fromkeys(row.section for row in rows))
    counted = any(row.instructions is not None for row in rows)
    for section in sections:
        in_section = [row for row in rows if row.section == section]
        unit = "sessions/s" if section.startswith("sessions") else "req/s"
        per = "session" if unit == "sessions/s" else "req"
        lines += ["", f"### {section}", "",
                  f"| server | conc. | {unit} | p50 ms | p99 ms | CPU µs/{per} | peak MiB | errors "
                  f"| ours/theirs: {unit} | p50 | p99 | CPU | peak mem | PG+Redis CPU µs/{per} |"
                  + (f" instr./{per} | instr. ours/theirs | floor | ours above floor |" if counted else ""),
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                  + "---:|---:|---:|---:|" * counted]
        for row in in_section:
            theirs = next((r for r in in_section if r.config.side == "theirs"
                           and r.concurrency == row.concurrency), None)
            mine = row.config.side == "ours" and theirs is not None
            lines.append(
                f"| {row.config.label} | {row.concurrency} | {number(row.rate)} | {number(row.p50_ms, 2)} "
                f"| {number(row.p99_ms, 2)} | {number(row.cpu_us)} | {number(row.peak_mib, 1)} "
                f"| {row.errors} | {ratio(row.rate, theirs.rate) if mine else ''} "
                f"| {ratio(row.p50_ms, theirs.p50_ms) if mine else ''} "
                f"| {ratio(row.p99_ms, theirs.p99_ms) if mine else ''} "
                f"| {ratio(row.cpu_us, theirs.cpu_us) if mine else ''} "
                f"| {ratio(row.peak_mib, theirs.peak_mib) if mine else ''} "
                f"| {number(row.services_us)} |"
                + ("".join(f" {cell} |" for cell in rowcounts.columns(row, theirs)) if counted else ""))
    return lines


def stream_table(results: dict[str, tuple[Config, list[tuple[int, int]]]]) -> list[str]:
    lines = ["", "### memory per session holding an open GET stream", "",
             "| server | streams open | KiB per session | ours/theirs |", "|---|---:|---:|---:|"]
    theirs = next((r for c, r in results.values() if c.side == "theirs"), None)
    for config, measured in results.values():
        for index, (count, per_stream) in enumerate(measured):
            other = theirs[index][1] if theirs and config.side == "ours" else None
            lines.append(f"| {config.label} | {count:,} | {per_stream / 1024:.1f} | "
                         f"{ratio(per_stream, other) if other else ''} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per load row (15)")
    parser.add_argument("--session-duration", type=float, default=15.0, help="seconds of sessions/s")
    parser.add_argument("--only", nargs="*", default=None,
                        choices=("stateless", "stateful", "modern", "sessions", "streams", "background"))
    parser.add_argument("--servers", nargs="*", default=None,
                        help="theirs-stateless ours-stateless ours-stateless-uvicorn "
                             "ours-stateless-granian theirs-stateful ours-pg ours-sqlite ours-pg-uvicorn "
                             "ours-pg-granian")
    parser.add_argument("--concurrency", type=int, nargs="*", default=list(CONCURRENCIES))
    parser.add_argument("--streams", type=int, nargs="*", default=list(STREAM_COUNTS))
    parser.add_argument("--background-concurrency", type=int, nargs="*",
                        default=list(background.CONCURRENCIES), help="of the background row (1 8)")
    parser.add_argument("--worker-pool", default="solo", choices=("solo", "threads", "prefork"),
                        help="the background row's Celery worker pool (solo: one process, one call at "
                             "a time; the others get --concurrency of the highest concurrency)")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES,
                        help="an admin URL of the PostgreSQL server; a database --database is made afresh")
    parser.add_argument("--database", default=POSTGRES_DATABASE,
                        help=f"made afresh for the PostgreSQL + Redis rows ({POSTGRES_DATABASE})")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS, help="a Redis database the run may flush")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server logs)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each row's instructions per request under valgrind "
                             f"(bench/counting.py; rows above c={rowcounts.MAX_CONCURRENCY} are not "
                             "counted), with the bare ASGI floor under the same server")
    parser.add_argument("--instruction-calls", type=int, default=96,
                        help="calls counted per row with --instructions (a multiple of 16; 96)")
    parser.add_argument("--instruction-sessions", type=int, default=32,
                        help="whole sessions counted in the sessions row with --instructions (32)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("bench/run needs wrk, the HTTP load generator: on Debian or Ubuntu `apt-get install wrk`",
              file=sys.stderr)
        return 2
    if args.instructions and shutil.which("valgrind") is None:
        print("bench/run --instructions needs valgrind: apt-get install valgrind", file=sys.stderr)
        return 2
    if args.instructions and (args.instruction_calls % 16 or args.instruction_sessions % SESSION_CONCURRENCY):
        parser.error(f"--instruction-calls must be a multiple of 16, --instruction-sessions of "
                     f"{SESSION_CONCURRENCY}")
    raise_fd_limit()
    parts = set(args.only or ("stateless", "stateful", "modern", "sessions", "streams", "background"))
    workdir = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    notes: list[str] = []

    postgres_url = redis_url = None
    if reachable(args.postgres_url, 5432) and reachable(args.redis_url, 6379):
        # The background row makes a database of its own: alone, it leaves mcp_bench as it is.
        postgres_url = fresh_postgres(args.postgres_url, args.database) if parts - {"background"} \
            else args.postgres_url
        redis_url = args.redis_url
    else:
        notes.append(f"PostgreSQL ({args.postgres_url}) or Redis ({args.redis_url}) unreachable: "
                     "no PostgreSQL + Redis rows")
    available = configs(workdir, postgres_url, redis_url)
    order = ("theirs-stateless", "ours-stateless", "ours-stateless-code-registry", "ours-stateless-uvicorn",
             "ours-stateless-granian", "theirs-stateful", "ours-pg", "ours-sqlite", "ours-pg-uvicorn",
             "ours-pg-granian")
    wanted = [key for key in order if key in available and (not args.servers or key in args.servers)]
    # The modern row: the SDK's stateless server, ours in production shape (else the default), and
    # ours under uvicorn and granian where that runs (to tell the ASGI server's share apart).
    modern_servers = {"theirs-stateless", "ours-pg", "ours-pg-uvicorn", "ours-pg-granian"} \
        if "ours-pg" in available \
        else {"theirs-stateless", "ours-sqlite"}
    rows: list[Row] = []
    background_results: list[background.Measured] = []
    stream_results: dict[str, tuple[Config, list[tuple[int, int]]]] = {}
    started = time.monotonic()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, wrk: "
          f"{subprocess.run(['wrk', '-v'], capture_output=True, text=True).stdout.split()[1]}",
          file=sys.stderr)

    counter = rowcounts.Counter(ROOT, args.instruction_calls, args.instruction_sessions, MODERN_SECTION,
                                log=lambda line: print(line, file=sys.stderr))

    def start(config: Config) -> Server:
        for command in config.prepare:
            subprocess.run(command, cwd=ROOT, env={**os.environ, **config.env}, check=True)
        if config.key == "ours-pg":
            flush_redis(redis_url)
        return Server(config, workdir)

    try:
        for key in wanted:
            config = available[key]
            section = ("tools/call, stateless, JSON responses" if config.mode == "stateless"
                       else "tools/call, stateful (sessions, SSE responses)")
            load = ("stateless" in parts and config.mode == "stateless") or \
                   ("stateful" in parts and config.mode == "stateful")
            modern = "modern" in parts and key in modern_servers
            # The uvicorn and granian rows only tell the ASGI server's share of a call apart.
            extra = key.endswith(("-uvicorn", "-granian"))
            sessions = "sessions" in parts and config.mode == "stateful"
            if load or modern or sessions:
                server = start(config)
                try:
                    with_services = key == "ours-pg"
                    for loaded in [section] * load + [MODERN_SECTION] * modern:
                        env = load_env(server, 16, loaded == MODERN_SECTION)
                        wrk("call.lua", f"http://{HOST}:{server.port}/mcp", threads=1, connections=16,
                            duration=WARMUP_SECONDS, env=env)
                        for concurrency in args.concurrency:
                            row = run_load(server, loaded, concurrency, args.duration, with_services)
                            rows.append(row)
                            print(f"  {key} c={concurrency}{' modern' * (loaded == MODERN_SECTION)}: "
                                  f"{row.rate:,.0f} req/s, {row.cpu_us:,.0f} µs CPU/req, "
                                  f"{row.errors} errors", file=sys.stderr)
                    if sessions:
                        row = run_sessions(server, args.session_duration, with_services)
                        rows.append(row)
                        print(f"  {key} sessions: {row.rate:,.0f}/s, {row.cpu_us:,.0f} µs CPU/session, "
                              f"{row.errors} errors", file=sys.stderr)
                finally:
                    server.stop()
                if args.instructions:
                    counter.attach(config, [row for row in rows if row.config is config])
            if "streams" in parts and config.mode == "stateful" and not extra:
                server = start(config)
                try:
                    stream_results[key] = (config, run_streams(server, tuple(args.streams)))
                    print(f"  {key} streams: {stream_results[key][1]}", file=sys.stderr)
                finally:
                    server.stop()
        if "background" in parts and postgres_url:
            background_results = background.run(
                postgres_admin_url=args.postgres_url, redis_url=redis_url, workdir=workdir,
                start_server=lambda argv, env: Server(Config(
                    "ours-pg-background", "ours, PostgreSQL + Redis, one Celery worker", "ours",
                    "stateful", argv, env), workdir),
                flush_redis=flush_redis, log=lambda line: print(line, file=sys.stderr),
                concurrencies=tuple(args.background_concurrency), pool=args.worker_pool)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"server logs in {workdir}", file=sys.stderr)

    elapsed = time.monotonic() - started
    lines = [f"Benchmark of {time.strftime('%Y-%m-%d %H:%M')}: {os.cpu_count()} cores, "
             f"{args.duration:g} s per row, wrk closed loop, took {elapsed:.0f} s."]
    lines += table(rows)
    if stream_results:
        lines += stream_table(stream_results)
    if background_results:
        lines += background.table(background_results, args.worker_pool)
    for note in notes:
        lines.append(f"\nNote: {note}")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({
            "rows": [{**{k: v for k, v in vars(row).items() if k != "config"}, "server": row.config.key}
                     for row in rows],
            "streams": {key: measured for key, (_config, measured) in stream_results.items()},
            "background": background.as_json(background_results),
        }, indent=2))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
