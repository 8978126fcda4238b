#!/usr/bin/env python3
"""The latency tail at concurrency 1, and the garbage collections behind it.

    .venv/bin/python bench/gc_pauses.py ours-stateless theirs-stateless --seconds 10
    .venv/bin/python bench/gc_pauses.py ours-stateless-uvicorn --rounds 3
    .venv/bin/python bench/gc_pauses.py ours-pg theirs-stateful    # one session, SSE responses

Each server (a configuration of ``bench/run.py``) runs under ``bench/gc_recorder.py``; after a
3-second warm-up, wrk drives ``tools/call`` of echo on one connection for ``--seconds``. Printed
per run: requests, wrk's p50 and p99, and per generation the collections, their CPU time per
1,000 requests and the longest one. With ``--rounds`` the servers take turns, so that each sees
the same machine. CPU times are the collecting thread's: load elsewhere does not inflate them,
while wrk's latencies are only indicative on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402

SERVERS = ("theirs-stateless", "ours-stateless", "ours-stateless-uvicorn", "theirs-stateful", "ours-sqlite",
           "ours-pg", "ours-pg-uvicorn")


def measure(config: run.Config, workdir: Path, seconds: float, redis_url: str) -> dict:
    record = workdir / f"{config.key}.gc.json"
    python, *rest = config.argv
    recorded = run.Config(config.key, config.label, config.side, config.mode,
                          [python, str(HERE / "gc_recorder.py"), *rest],
                          {**config.env, "GC_RECORD": str(record)}, config.prepare)
    for command in config.prepare:
        run.subprocess.run(command, cwd=run.ROOT, env={**os.environ, **config.env}, check=True)
    if "REDIS_URL" in config.env:
        run.flush_redis(redis_url)
    server = run.Server(recorded, workdir)
    try:
        url = f"http://{run.HOST}:{server.port}/mcp"
        # A stateful server: one session, opened before, that every call names.
        env = {"MCP_SESSIONS": ",".join(asyncio.run(run._prepare_sessions(server.port, 1)))} \
            if config.mode == "stateful" else {}
        run.wrk("call.lua", url, threads=1, connections=1, duration=3, env=env)
        os.kill(server.pid, signal.SIGUSR2)
        result = run.wrk("call.lua", url, threads=1, connections=1, duration=seconds, env=env)
        time.sleep(1)  # the recorder writes every half second
        collections = json.loads(record.read_text())
    finally:
        server.stop()
    return {"requests": result["requests"], "p50_ms": result["p50_us"] / 1e3,
            "p99_ms": result["p99_us"] / 1e3, "gc": collections}


def line(key: str, measured: dict) -> str:
    per_thousand = 1000 / max(measured["requests"], 1)
    parts = [f"{key}: {measured['requests']:,} requests, p50 {measured['p50_ms']:.2f} ms, "
             f"p99 {measured['p99_ms']:.2f} ms; frozen objects {measured['gc']['frozen']:,}"]
    for generation in ("0", "1", "2"):
        g = measured["gc"][generation]
        parts.append(f"  gen{generation}: {g['collections'] * per_thousand:.1f} collections and "
                     f"{g['cpu_ms'] * per_thousand:.1f} ms CPU per 1,000 requests, longest "
                     f"{g['longest_cpu_ms']:.1f} ms CPU ({g['longest_wall_ms']:.1f} ms wall)")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="+", choices=SERVERS)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--postgres-url", default=run.DEFAULT_POSTGRES,
                        help="an admin URL of the PostgreSQL server, for ours-pg (a database is made afresh)")
    parser.add_argument("--redis-url", default=run.DEFAULT_REDIS, help="a Redis database the run may flush")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-gc-"))
    needs_postgres = any(key.startswith("ours-pg") for key in args.servers)
    postgres = run.fresh_postgres(args.postgres_url) if needs_postgres else None
    configs = run.configs(workdir, postgres, args.redis_url)
    for round_number in range(args.rounds):
        for key in args.servers:
            measured = measure(configs[key], workdir, args.seconds, args.redis_url)
            print(f"[round {round_number + 1}] " + line(key, measured), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
