#!/usr/bin/env python3
"""Where a server's time goes under load: py-spy samples it while wrk drives tools/call.

    .venv/bin/python bench/profile.py ours-stateless             # top functions, self and total
    .venv/bin/python bench/profile.py ours-pg --svg /tmp/pg.svg  # and a flame graph

The server is one of ``bench/run.py``'s configurations (theirs-stateless, ours-stateless,
theirs-stateful, ours-pg, ours-sqlite); the load is ``bench/wrk/call.lua`` at concurrency 16,
2026-07-28 calls with ``--modern``, or whole sessions with ``--sessions``. Needs py-spy (the
``bench`` extra) and root or ptrace rights.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is missing: pip install -e '.[bench]'")
    return found


def summarize(raw: Path, top: int) -> None:
    """Self and inclusive sample counts per function, from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [frame for frame in stack.split(";") if frame]
        samples += int(count)
        if frames:
            own[frames[-1]] += int(count)
        for frame in set(frames):
            total[frame] += int(count)
    print(f"{samples} samples")
    for title, counter in (("self", own), ("inclusive", total)):
        print(f"\n-- top {top} by {title} time")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / samples:5.1f}%  {frame}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", choices=("theirs-stateless", "ours-stateless", "theirs-stateful",
                                           "ours-pg", "ours-sqlite"))
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sessions", action="store_true", help="whole sessions instead of calls")
    parser.add_argument("--modern", action="store_true",
                        help="2026-07-28 calls (no session, the _meta envelope) instead of sessions' calls")
    parser.add_argument("--svg", type=Path, help="write a flame graph here too")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--postgres-url", default=run.DEFAULT_POSTGRES)
    parser.add_argument("--redis-url", default=run.DEFAULT_REDIS)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-profile-"))
    postgres = run.fresh_postgres(args.postgres_url) if args.server == "ours-pg" else None
    config = run.configs(workdir, postgres, args.redis_url)[args.server]
    for command in config.prepare:
        subprocess.run(command, cwd=run.ROOT, env={**os.environ, **config.env}, check=True)
    if args.server == "ours-pg":
        run.flush_redis(args.redis_url)
    server = run.Server(config, workdir)
    try:
        url = f"http://{run.HOST}:{server.port}/mcp"
        env = {}
        if args.modern or (config.mode == "stateful" and not args.sessions):
            env = run.load_env(server, args.concurrency, args.modern)
        script, threads = ("session.lua", args.concurrency) if args.sessions else ("call.lua", 1)
        load = threading.Thread(target=run.wrk, args=(script, url), kwargs={
            "threads": threads, "connections": args.concurrency, "duration": args.seconds + 2, "env": env})
        load.start()
        raw = workdir / "profile.txt"
        subprocess.run([py_spy(), "record", "--pid", str(server.pid), "--duration", str(int(args.seconds)),
                        "--rate", "250", "--gil", "--format", "raw", "--output", str(raw), "--nonblocking"],
                       check=True, capture_output=True)
        if args.svg:
            subprocess.run([py_spy(), "record", "--pid", str(server.pid), "--duration", "1",
                            "--format", "flamegraph", "--output", str(args.svg), "--nonblocking"],
                           check=False, capture_output=True)
        load.join()
        summarize(raw, args.top)
        if args.raw:
            shutil.copy(raw, args.raw)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
