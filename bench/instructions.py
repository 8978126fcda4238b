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
from pathlib import Path

import httpx
import services

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
DATABASE = "mcp_instructions"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def session_headers(client: httpx.Client, url: str, mode: str) -> dict:
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
    for request_id in range(first_id, first_id + count):
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "hi"}}}
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


def count(checkout: Path, mode: str, calls_count: int, env: dict, postgres: str, redis: str) -> int:
    database_url = services.fresh_postgres(postgres, DATABASE)
    import redis as redis_py

    with redis_py.Redis.from_url(redis) as connection:
        connection.flushdb()
    python = str(checkout / ".venv" / "bin" / "python")
    child_env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis, "DJANGO_DEVELOPMENT": "1",
                 "DJANGO_DEBUG": "0", "PYTHONHASHSEED": "0", "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none",
                 **({"MCP_STATELESS": "1", "MCP_JSON_RESPONSE": "1"} if mode == "stateless" else {}), **env}
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=checkout, env=child_env, check=True)
    port = services.free_port(HOST)
    out = Path(tempfile.mkdtemp(prefix="mcp-callgrind-")) / "callgrind.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", python,
         "-m", "daphne", "-v", "0", "-b", HOST, "-p", str(port), "project.asgi:application"],
        cwd=checkout, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, server)
        url = f"http://{HOST}:{port}/mcp"
        with httpx.Client(timeout=600) as client:
            headers = session_headers(client, url, mode)
            calls(client, url, headers, 100_000, 20)  # warm-up, not counted
            control(server, "-i", "on")
            calls(client, url, headers, 1, calls_count)
        control(server, "-i", "off")
        control(server, "-d")  # dump the counts
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
    totals = [int(match.group(1)) for dump in out.parent.glob("callgrind.out*")
              for match in re.finditer(r"^totals: (\d+)", dump.read_text(errors="replace"), re.M)]
    shutil.rmtree(out.parent, ignore_errors=True)
    return sum(totals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("stateful", "stateless"), default="stateful")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="a checkout with its own .venv")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    env = dict(item.split("=", 1) for item in args.env)
    total = count(args.checkout.resolve(), args.mode, args.calls, env, args.postgres_url, args.redis_url)
    print(f"{args.mode} tools/call, {args.checkout}, {env or 'default settings'}: "
          f"{total:,} instructions for {args.calls} calls, {total / args.calls:,.0f} per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
