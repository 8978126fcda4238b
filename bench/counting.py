"""The valgrind driver of the instruction counts: one server process under callgrind, counted
phase by phase (``bench/instructions.py`` is its command line; ``bench/run --instructions`` uses
it for every row).

A server starts once under ``valgrind --tool=callgrind --instr-atstart=no``; each phase then opens
what it needs uncounted (sessions, a warm-up), switches counting on, sends its requests, switches
it off and dumps, so several phases share one slow start. Only the server process is counted;
Python's hash seed is fixed.

Phases: ``stateless``, ``stateful`` and ``modern`` send ``tools/call`` of echo (``stateful`` on a
session of its own per connection, ``modern`` the 2026-07-28 envelope without one); ``sessions``
runs whole sessions (initialize, notifications/initialized, one call, DELETE), counted per session.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import services

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
               "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "instructions", "version": "1"}}
KINDS = ("stateless", "stateful", "modern", "sessions")
WARMUP_CALLS = 20
WARMUP_SESSIONS = 4


@dataclass(frozen=True)
class Phase:
    kind: str         # one of KINDS
    concurrency: int  # connections at once, the calls (or sessions) split evenly among them
    count: int        # calls, or sessions


@dataclass
class ServerSpec:
    argv: list[str]                 # "{port}" is replaced by the port the server listens on
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)  # on top of os.environ
    # The requests are served by the process's worker child (granian's, which it spawns), not by
    # the process started: that child is the one counted.
    serves_in_child: bool = False


# Servers -------------------------------------------------------------------------------------
def asgi_argv(python: str, asgi_server: str, application: str) -> list[str]:
    if asgi_server == "daphne":
        return [python, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}", application]
    if asgi_server == "uvicorn":
        return [python, "-m", "uvicorn", "--no-access-log", "--log-level", "warning", "--lifespan", "off",
                "--host", HOST, "--port", "{port}", application]
    if asgi_server == "granian":
        # One worker process (granian's main process serves nothing itself), spawned rather than
        # forked so that callgrind can count it (granian_main.py); the asyncio loop (uvloop is not
        # installed, as for uvicorn); lifespan off as for uvicorn.
        return [python, str(HERE / "granian_main.py"), "--interface", "asginl", "--workers", "1",
                "--loop", "asyncio", "--no-access-log", "--log-level", "warning",
                "--host", HOST, "--port", "{port}", application]
    raise ValueError(f"unknown ASGI server {asgi_server!r} (daphne, uvicorn or granian)")


ASGI_SERVERS = ("daphne", "uvicorn", "granian")


def serves_in_child(argv: list[str]) -> bool:
    """Whether ``argv`` is granian's, whose worker process serves (granian_main.py)."""
    return any(part.endswith("granian_main.py") for part in argv)


def server_spec(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> ServerSpec:
    return ServerSpec(argv, cwd, env or {}, serves_in_child=serves_in_child(argv))


def ours(checkout: Path, *, stateless: bool, env: dict[str, str], postgres: str, redis: str,
         database: str, asgi_server: str = "daphne") -> ServerSpec:
    """Our demo, on a fresh PostgreSQL ``database`` and a flushed Redis database (``env`` wins:
    ``DATABASE_URL=sqlite:///...`` and ``REDIS_URL=`` give the embedded default)."""
    python = str(checkout / ".venv" / "bin" / "python")
    child_env = {"DJANGO_DEVELOPMENT": "1", "DJANGO_DEBUG": "0", "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none",
                 **({"MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"} if stateless else {}), **env}
    if "DATABASE_URL" not in env:
        child_env["DATABASE_URL"] = services.fresh_postgres(postgres, database)
    if "REDIS_URL" not in env:
        import redis as redis_py

        with redis_py.Redis.from_url(redis) as connection:
            connection.flushdb()
        child_env["REDIS_URL"] = redis
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=checkout,
                   env={**os.environ, **child_env}, check=True)
    return server_spec(asgi_argv(python, asgi_server, "project.asgi:application"), checkout, child_env)


def reference(python: str, stateful: bool) -> ServerSpec:
    """The official SDK's server of bench/run (its stateless mode serves the 2026-07-28 path too)."""
    return ServerSpec([python, str(HERE / "reference_server.py"), "--port", "{port}", "--mode",
                       "stateful" if stateful else "stateless"], HERE)


def floor(python: str, asgi_server: str) -> ServerSpec:
    """The bare ASGI application of ``bench/floor_app.py`` under the same ASGI server."""
    return server_spec(asgi_argv(python, asgi_server, "floor_app:application"), HERE)


# Requests ------------------------------------------------------------------------------------
def check(response: httpx.Response, status: int, what: str) -> None:
    if response.status_code != status:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:200]}")


def open_session(client: httpx.Client, url: str) -> dict:
    """initialize and notifications/initialized; the headers of the session's later requests."""
    response = client.post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "instructions", "version": "1"}}})
    check(response, 200, "initialize")
    headers = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"],
               "mcp-protocol-version": VERSION}
    check(client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}),
          202, "notifications/initialized")
    return headers


def call_headers(client: httpx.Client, url: str, kind: str) -> dict:
    if kind == "modern":  # no session: the envelope and the standard headers on every request
        return {**HEADERS, "mcp-protocol-version": MODERN_VERSION, "mcp-method": "tools/call",
                "mcp-name": "echo"}
    if kind == "stateless":
        return {**HEADERS, "mcp-protocol-version": VERSION}
    return open_session(client, url)


def call(client: httpx.Client, url: str, headers: dict, request_id: int) -> None:
    params: dict = {"name": "echo", "arguments": {"message": "hi"}}
    if headers.get("mcp-protocol-version") == MODERN_VERSION:
        params["_meta"] = MODERN_META
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    response = client.post(url, headers=headers, content=json.dumps(body))
    if response.status_code != 200 or '"hi"' not in response.text:
        raise RuntimeError(f"call {request_id} failed: {response.status_code} {response.text[:200]}")


def session(client: httpx.Client, url: str, request_id: int) -> None:
    headers = open_session(client, url)
    call(client, url, headers, request_id)
    without_body = {key: value for key, value in headers.items() if key != "content-type"}
    check(client.delete(url, headers=without_body), 200, "DELETE")


@dataclass
class Lane:
    """One connection of a phase, with what it opened before counting started."""
    client: httpx.Client
    headers: dict | None


def lanes(url: str, phase: Phase) -> list[Lane]:
    opened = []
    for _ in range(phase.concurrency):
        client = httpx.Client(timeout=600)
        headers = None if phase.kind == "sessions" else call_headers(client, url, phase.kind)
        opened.append(Lane(client, headers))
    return opened


def work(url: str, lane: Lane, kind: str, first_id: int, count: int) -> None:
    for request_id in range(first_id, first_id + count):
        if kind == "sessions":
            session(lane.client, url, request_id)
        else:
            call(lane.client, url, lane.headers, request_id)


def run_phase(url: str, phase: Phase, opened: list[Lane], first_id: int) -> None:
    share = phase.count // phase.concurrency
    if phase.concurrency == 1:
        work(url, opened[0], phase.kind, first_id, share)
        return
    with ThreadPoolExecutor(phase.concurrency) as pool:
        list(pool.map(lambda index: work(url, opened[index], phase.kind, first_id + index * share, share),
                      range(phase.concurrency)))


# Counting ------------------------------------------------------------------------------------
def wait_listening(port: int, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited before it listened")
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"nothing listened on {port} within {timeout:g} s")


def control(pid: int, *arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def worker_child(pid: int, timeout: float = 300) -> int:
    """The worker process ``pid`` spawned (multiprocessing's), once it has: the parent listens
    before it spawns its worker."""
    deadline = time.monotonic() + timeout
    while True:
        workers = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                   if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]
        if len(workers) == 1:
            return workers[0]
        if len(workers) > 1 or time.monotonic() > deadline:
            raise RuntimeError(f"expected one worker process of {pid}, found {workers}")
        time.sleep(0.2)


def totals(paths: list[Path]) -> int:
    return sum(int(match.group(1)) for path in paths
               for match in re.finditer(r"^totals: (\d+)", path.read_text(errors="replace"), re.M))


def dump(pid: int, folder: Path, seen: set[Path]) -> int:
    """Dump the counts since the last dump (callgrind then starts from zero); their total."""
    control(pid, "-d")
    deadline = time.monotonic() + 60
    while not (new := sorted(set(folder.glob("callgrind.out.*")) - seen)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not new:
        raise RuntimeError("callgrind wrote no dump")
    seen.update(new)
    return totals(new)


def measure(spec: ServerSpec, phases: list[Phase], keep: Path | None = None) -> list[int]:
    """Instructions of the server process over each phase, in order (not divided)."""
    for phase in phases:
        if phase.kind not in KINDS:
            raise ValueError(f"unknown phase {phase.kind!r}")
        if phase.count % phase.concurrency:
            raise ValueError(f"{phase.count} is not a multiple of the concurrency {phase.concurrency}")
    port = services.free_port(HOST)
    folder = Path(tempfile.mkdtemp(prefix="mcp-callgrind-"))
    argv = [part.replace("{port}", str(port)) for part in spec.argv]
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no",
         *(["--trace-children=yes"] if spec.serves_in_child else []),
         f"--callgrind-out-file={folder / 'callgrind.out.%p'}", *argv],
        cwd=spec.cwd, env={**os.environ, "PYTHONHASHSEED": "0", **spec.env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counted: list[int] = []
    seen: set[Path] = set()
    try:
        wait_listening(port, server)
        counted_pid = worker_child(server.pid) if spec.serves_in_child else server.pid
        url = f"http://{HOST}:{port}/mcp"
        for number, phase in enumerate(phases):
            opened = lanes(url, phase)
            try:
                warmup = WARMUP_SESSIONS if phase.kind == "sessions" else WARMUP_CALLS
                work(url, opened[0], phase.kind, 100_000, warmup)  # not counted
                control(counted_pid, "-i", "on")
                run_phase(url, phase, opened, 1 + number * 100_000 * 10)
                control(counted_pid, "-i", "off")
            finally:
                for lane in opened:
                    lane.client.close()
            counted.append(dump(counted_pid, folder, seen))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
        if keep is not None:  # for callgrind_annotate
            keep.mkdir(parents=True, exist_ok=True)
            for path in folder.glob("callgrind.out*"):
                shutil.copy(path, keep / path.name)
        shutil.rmtree(folder, ignore_errors=True)
    return counted


def count(spec: ServerSpec, phase: Phase, keep: Path | None = None) -> int:
    """Instructions per call (or per session) of one phase."""
    return measure(spec, [phase], keep)[0] // phase.count
