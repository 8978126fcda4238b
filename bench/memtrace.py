"""Where the memory of open GET streams goes: the Python allocations of our server per stream, by
source line (``tracemalloc``), between a snapshot before and one after opening the streams.

    DATABASE_URL=... REDIS_URL=... MCP_MAX_SESSIONS_PER_PRINCIPAL=none \\
        .venv/bin/python bench/memtrace.py --count 2000

It runs daphne with the demo project in this process under ``tracemalloc`` (so it is slower than
usual), opens ``--count`` sessions with their GET streams from a child process
(``bench/streams.py``), and prints the lines that allocated the most per stream. Allocations
outside Python's allocator (the kernel's socket buffers, C libraries' own) are not seen: compare
with the RSS figures of ``bench/scale.py streams``.
"""

from __future__ import annotations

import argparse
import asyncio
import linecache
import os
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import services  # noqa: E402


def client(port: int, count: int) -> None:
    import streams

    async def hold() -> None:
        await streams.end_sessions("127.0.0.1", port, (await streams.open_streams("127.0.0.1", port, 20))[0])
        print("WARM", flush=True)
        sys.stdin.readline()
        opened, _resets = await streams.open_streams("127.0.0.1", port, count)
        print("OPEN", flush=True)
        sys.stdin.readline()
        for stream in opened:
            stream.close()

    asyncio.run(hold())


def report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, count: int, top: int) -> None:
    filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before, after = before.filter_traces(filters), after.filter_traces(filters)
    total = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(f"Python allocations per stream: {total / count / 1024:.1f} KiB ({count} streams)")
    print("\nBy file:")
    for stat in after.compare_to(before, "filename")[:top]:
        print(f"  {stat.size_diff / count:8.0f} B  {stat.count_diff / count:6.1f} blocks  "
              f"{stat.traceback[0].filename.replace(str(ROOT) + '/', '')}")
    print("\nBy line:")
    for stat in after.compare_to(before, "lineno")[:top]:
        frame = stat.traceback[0]
        line = linecache.getline(frame.filename, frame.lineno).strip()[:70]
        print(f"  {stat.size_diff / count:8.0f} B  {frame.filename.replace(str(ROOT) + '/', '')}:"
              f"{frame.lineno}  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--client-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_port:
        client(args.client_port, args.count)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    port = services.free_port()
    tracemalloc.start(1)
    from daphne.cli import CommandLineInterface

    def drive() -> None:
        deadline = time.monotonic() + 120
        while True:  # until daphne listens (migrate runs first)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    print("daphne did not listen in 120 s", flush=True)
                    os._exit(1)
                time.sleep(0.2)
        child = subprocess.Popen([sys.executable, __file__, "--count", str(args.count),
                                  "--client-port", str(port)], cwd=ROOT, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            if child.stdout.readline().strip() != "WARM":
                raise RuntimeError("the client did not warm up")
            time.sleep(2)
            before = tracemalloc.take_snapshot()
            child.stdin.write("\n")
            child.stdin.flush()
            if child.stdout.readline().strip() != "OPEN":
                raise RuntimeError("the client did not open its streams")
            time.sleep(3)
            after = tracemalloc.take_snapshot()
            report(before, after, args.count, args.top)
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait(60)
        finally:
            if child.poll() is None:
                child.kill()
            os._exit(0)

    threading.Thread(target=drive, daemon=True).start()
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True)
    CommandLineInterface().run(["-v", "0", "-b", "127.0.0.1", "-p", str(port), "project.asgi:application"])


if __name__ == "__main__":
    main()
