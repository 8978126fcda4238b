"""Run a server with Python's garbage collections recorded: ``python bench/gc_recorder.py -m
daphne ...`` or ``python bench/gc_recorder.py script.py ...``.

Per generation: how many collections, their CPU time (the collecting thread's, so load on the
machine does not inflate it), the longest in CPU and in wall time. Written as JSON to
``$GC_RECORD`` every half second; SIGUSR2 starts the counts afresh (after a warm-up).
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import sys
import threading
import time

counts = {generation: [0, 0.0, 0.0, 0.0] for generation in range(3)}
started: dict[int, tuple[float, float]] = {}


def record(phase: str, info: dict) -> None:
    generation = info["generation"]
    if phase == "start":
        started[generation] = (time.thread_time(), time.perf_counter())
        return
    cpu_start, wall_start = started.pop(generation, (time.thread_time(), time.perf_counter()))
    cpu, wall = time.thread_time() - cpu_start, time.perf_counter() - wall_start
    entry = counts[generation]
    entry[0] += 1
    entry[1] += cpu
    entry[2] = max(entry[2], cpu)
    entry[3] = max(entry[3], wall)


def write() -> None:
    report = {str(g): {"collections": n, "cpu_ms": cpu * 1e3, "longest_cpu_ms": longest * 1e3,
                       "longest_wall_ms": wall * 1e3} for g, (n, cpu, longest, wall) in counts.items()}
    report["frozen"] = gc.get_freeze_count()
    with open(os.environ["GC_RECORD"] + ".tmp", "w") as out:
        json.dump(report, out)
    os.replace(os.environ["GC_RECORD"] + ".tmp", os.environ["GC_RECORD"])


def keep_writing() -> None:
    while True:
        time.sleep(0.5)
        write()


def start_afresh(*_: object) -> None:
    for entry in counts.values():
        entry[:] = [0, 0.0, 0.0, 0.0]


def main() -> None:
    gc.callbacks.append(record)
    signal.signal(signal.SIGUSR2, start_afresh)
    threading.Thread(target=keep_writing, daemon=True).start()
    if sys.argv[1] == "-m":
        module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
