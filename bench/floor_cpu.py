"""CPU per request of the bare ASGI floor (``bench/floor_app.py``) under each ASGI server, timed:
user and system time of the process that serves (granian's worker), under ``wrk``.

callgrind (``bench/instructions.py --floor``) counts the instructions a server runs in user space;
what a server spends in the kernel (granian hands each request between its Rust thread and its
Python loop's thread) shows only here. Timed, so indicative only on a busy machine.

    bench/floor_cpu.py                                  # daphne, uvicorn, granian; 16 connections, 5 s
    bench/floor_cpu.py --servers granian --duration 10 --connections 64
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import counting
import services

HERE = Path(__file__).resolve().parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": "hi"}}})
WARMUP_SECONDS = 2


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system seconds of ``pid`` and its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def wrk(script: Path, url: str, connections: int, seconds: float) -> int:
    """Requests ``wrk`` completed."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), url],
                         capture_output=True, text=True, check=True).stdout
    return int(next(line for line in out.splitlines() if "requests in" in line).split()[0])


def measure(server: str, script: Path, connections: int, seconds: float) -> str:
    port = services.free_port(counting.HOST)
    argv = [part.replace("{port}", str(port))
            for part in counting.asgi_argv(sys.executable, server, "floor_app:application")]
    process = subprocess.Popen(argv, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        counting.wait_listening(port, process)
        pid = counting.worker_child(process.pid) if counting.serves_in_child(argv) else process.pid
        url = f"http://{counting.HOST}:{port}/mcp"
        wrk(script, url, connections, WARMUP_SECONDS)
        user, system = cpu_seconds(pid)
        requests = wrk(script, url, connections, seconds)
        user_after, system_after = cpu_seconds(pid)
    finally:
        process.terminate()
        process.wait(30)
    return (f"{server}: {requests / seconds:,.0f} req/s, user {(user_after - user) / requests * 1e6:,.0f} µs "
            f"+ system {(system_after - system) / requests * 1e6:,.0f} µs CPU per request")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="*", choices=counting.ASGI_SERVERS,
                        default=list(counting.ASGI_SERVERS))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per server (5)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("bench/floor_cpu.py needs wrk: apt-get install wrk", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(f'wrk.method = "POST"\nwrk.body = {json.dumps(BODY)}\n'
                          'wrk.headers["Content-Type"] = "application/json"\n')
        for server in args.servers:
            print(measure(server, script, args.connections, args.duration), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
