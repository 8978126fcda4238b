"""Instructions per ``tools/call``, counted by valgrind's callgrind in the daphne process.

Unlike CPU time, the count does not depend on what else the machine does, so two versions of the
code (``--checkout`` another worktree, with its own ``.venv``) or two settings (``--env``) can be
compared on a busy machine, a few hundred calls each. Only the server process is counted, from
after a warm-up to the last call; Python's hash seed is fixed. Work paced by the clock (a recheck
once a second, heartbeats) runs about 50 times as often per call under valgrind as at full speed,
so it weighs more here than it does in production.

    bench/instructions.py --mode stateful --calls 300
    bench/instructions.py --mode stateless --env MCP_REGISTRY_IN_DATABASE=0
    bench/instructions.py --checkout ../old-worktree
    bench/instructions.py --mode modern --concurrency 16              # the 2026-07-28 lifecycle
    bench/instructions.py --mode modern --concurrency 16 --reference  # the official SDK's server

Needs valgrind, PostgreSQL (a database ``mcp_instructions`` is made anew) and Redis (database 11
of ``--redis-url`` is flushed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import services

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
DATABASE = "mcp_instructions"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "instructions", "version": "1"}}


def session_headers(client: httpx.Client, url: str, mode: str) -> dict:
    if mode == "modern":  # no session: the envelope and the standard headers on every request
        return {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                "mcp-name": "echo"}
    if mode == "stateless":
        return {**HEADERS, "mcp-protocol-version": "2025-11-25"}
    response = client.post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "instructions", "version": "1"}}})
    headers = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-11-25"}
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def calls(client: httpx.Client, url: str, headers: dict, first_id: int, count: int) -> None:
    modern = headers.get("mcp-protocol-version") == "2026-07-28"
    for request_id in range(first_id, first_id + count):
        params: dict = {"name": "echo", "arguments": {"message": "hi"}}
        if modern:
            params["_meta"] = MODERN_META
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        response = client.post(url, headers=headers, content=json.dumps(body))
        if response.status_code != 200 or '"hi"' not in response.text:
            raise RuntimeError(f"call {request_id} failed: {response.status_code} {response.text[:200]}")


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


def control(server: subprocess.Popen, *arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments, str(server.pid)], check=True, stdout=subprocess.DEVNULL)


def concurrent_calls(url: str, headers: dict, first_id: int, count: int, concurrency: int) -> None:
    """``count`` calls over ``concurrency`` connections, each sending its next when one ends."""
    share = count // concurrency

    def one_connection(index: int) -> None:
        with httpx.Client(timeout=600) as client:
            calls(client, url, headers, first_id + index * share, share)

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one_connection, range(concurrency)))


def count(checkout: Path, mode: str, calls_count: int, env: dict, postgres: str, redis: str,
          concurrency: int = 1, reference: bool = False, asgi_server: str = "daphne",
          keep: Path | None = None) -> int:
    python = str(checkout / ".venv" / "bin" / "python")
    port = services.free_port(HOST)
    child_env = {**os.environ, "PYTHONHASHSEED": "0"}
    if reference:
        # The official SDK's server of bench/run (stateless mode serves the 2026-07-28 path too).
        argv = [python, str(Path(__file__).resolve().parent / "reference_server.py"), "--port", str(port),
                "--mode", "stateless" if mode != "stateful" else "stateful"]
    else:
        database_url = services.fresh_postgres(postgres, DATABASE)
        import redis as redis_py

        with redis_py.Redis.from_url(redis) as connection:
            connection.flushdb()
        child_env.update({
            "DATABASE_URL": database_url, "REDIS_URL": redis, "DJANGO_DEVELOPMENT": "1", "DJANGO_DEBUG": "0",
            "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none",
            **({"MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"} if mode == "stateless" else {}), **env})
        subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=checkout, env=child_env, check=True)
        argv = [python, "-m", "daphne", "-v", "0", "-b", HOST, "-p", str(port), "project.asgi:application"] \
            if asgi_server == "daphne" else \
            [python, "-m", "uvicorn", "--no-access-log", "--log-level", "warning", "--lifespan", "off",
             "--host", HOST, "--port", str(port), "project.asgi:application"]
    out = Path(tempfile.mkdtemp(prefix="mcp-callgrind-")) / "callgrind.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *argv],
        cwd=checkout, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, server)
        url = f"http://{HOST}:{port}/mcp"
        with httpx.Client(timeout=600) as client:
            headers = session_headers(client, url, mode)
            calls(client, url, headers, 100_000, 20)  # warm-up, not counted
            control(server, "-i", "on")
            if concurrency == 1:
                calls(client, url, headers, 1, calls_count)
            else:
                concurrent_calls(url, headers, 1, calls_count, concurrency)
        control(server, "-i", "off")
        control(server, "-d")  # dump the counts
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
    totals = [int(match.group(1)) for dump in out.parent.glob("callgrind.out*")
              for match in re.finditer(r"^totals: (\d+)", dump.read_text(errors="replace"), re.M)]
    if keep is not None:  # for callgrind_annotate
        keep.mkdir(parents=True, exist_ok=True)
        for dump in out.parent.glob("callgrind.out*"):
            shutil.copy(dump, keep / dump.name)
    shutil.rmtree(out.parent, ignore_errors=True)
    return sum(totals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("stateful", "stateless", "modern"), default="stateful",
                        help="modern: 2026-07-28 requests (no session) to the stateful configuration")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=1,
                        help="connections sending calls at once (the calls are split evenly)")
    parser.add_argument("--asgi-server", choices=("daphne", "uvicorn"), default="daphne",
                        help="what serves our application (uvicorn: the bench extra)")
    parser.add_argument("--reference", action="store_true",
                        help="count the official SDK's server of bench/run instead (bench extra)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="a checkout with its own .venv")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy callgrind's output files there (callgrind_annotate reads them)")
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    env = dict(item.split("=", 1) for item in args.env)
    if args.calls % args.concurrency:
        parser.error("--calls must be a multiple of --concurrency")
    total = count(args.checkout.resolve(), args.mode, args.calls, env, args.postgres_url, args.redis_url,
                  args.concurrency, args.reference, args.asgi_server, args.keep)
    server = "the official SDK" if args.reference else \
        f"{args.checkout} under {args.asgi_server}, {env or 'default settings'}"
    print(f"{args.mode} tools/call, c={args.concurrency}, {server}: "
          f"{total:,} instructions for {args.calls} calls, {total / args.calls:,.0f} per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
