#!/usr/bin/env python3
"""What one hostile request body costs the server: 4 MiB bodies of the worst shapes for JSON.

    .venv/bin/python bench/bodies.py            # about a minute; prints a Markdown table
    .venv/bin/python bench/bodies.py --bodies 5 --shapes tiny-arrays deep-chains

A daphne process of the demo project (the embedded default: SQLite, in-memory state) is sent each
shape, POSTed to ``/mcp`` with no session, as an unauthenticated client would: the body is decoded
(and refused or answered) before any session check. Per shape it reports the server's CPU time per
body (utime + stime of the process and its threads, from /proc/<pid>/stat, over ``--bodies``
bodies after one to warm up) next to one ``json.loads`` of the same bytes in this process (the
fastest of five), and their ratio (target: at most 1.5). Meanwhile a thread pings the same
process on a session of its own, back to back, and the worst ping latency is reported (target:
under 500 ms). A benchmark, not a test: it prints numbers and never fails on speed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import HOST, Server, configs  # noqa: E402

MIB = 1024 * 1024
SIZE = 4 * MIB - 1024  # under the default MAX_REQUEST_BYTES (4 MiB), envelope included


def _request(params: bytes) -> bytes:
    """A ping whose params hold ``params``: a JSON-RPC request to the byte."""
    return b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + params + b"}}"


def _array(unit: bytes, budget: int) -> bytes:
    """``[unit,unit,...]`` as long as fits in ``budget`` bytes."""
    return b"[" + b",".join([unit] * ((budget - 1) // (len(unit) + 1))) + b"]"


def shapes() -> dict[str, bytes]:
    budget = SIZE - len(_request(b""))
    # The envelope holds x at depth 3: chains of 61 reach the default MAX_JSON_DEPTH (64) exactly.
    chain = b"[" * 61 + b"]" * 61
    return {
        # What receiving 4 MiB costs by itself: one ping padded with spaces.
        "padding": _request(b"1" + b" " * (budget - 1)),
        # Containers as small as they come: the most objects per byte.
        "tiny-arrays": _request(_array(b"[]", budget)),
        "tiny-objects": _request(_array(b'{"a":[]}', budget)),
        "wide-object": _request(b"{" + b",".join(b'"%07d":[]' % i for i in range((budget - 1) // 13)) + b"}"),
        # Nesting: four million levels (refused), and many chains right at the limit.
        "deep-nesting": b"[" * SIZE,
        "deep-chains": _request(_array(chain, budget)),
        # Brackets the depth walk must not see.
        "brackets-in-strings": _request(b'"' + b"[{" * ((budget - 2) // 2) + b'"'),
        # The shape that stalled a process: not one JSON value, refused at its third byte.
        "bare-siblings": b",".join([b"[]"] * (SIZE // 3)),
    }


def reference_seconds(body: bytes, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        with contextlib.suppress(ValueError, RecursionError):  # refused shapes cost until refused
            json.loads(body)
        best = min(best, time.process_time() - started)
    return best


def post(connection: http.client.HTTPConnection, body: bytes,
         headers: dict | None = None) -> tuple[int, bytes]:
    connection.request("POST", "/mcp", body=body, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **(headers or {})})
    response = connection.getresponse()
    return response.status, response.read()


class Pinger(threading.Thread):
    """Pings on a session of its own, back to back, and keeps the worst latency."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection(HOST, port, timeout=60)
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench-bodies", "version": "1"}}}
        self.connection.request("POST", "/mcp", body=json.dumps(initialize), headers={
            "content-type": "application/json", "accept": "application/json, text/event-stream"})
        response = self.connection.getresponse()
        response.read()
        self.headers = {"mcp-session-id": response.getheader("mcp-session-id"),
                        "mcp-protocol-version": "2025-11-25"}
        post(self.connection, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', self.headers)
        self.worst = 0.0
        self.count = 0
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            started = time.perf_counter()
            status, _ = post(self.connection, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', self.headers)
            self.worst = max(self.worst, time.perf_counter() - started)
            self.count += 1
            self.failures += status != 200
            self.stopping.wait(0.01)

    def reset(self) -> None:
        self.worst = 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bodies", type=int, default=10, help="bodies per shape (after one warm-up)")
    parser.add_argument("--shapes", nargs="*", help="only these shapes")
    options = parser.parse_args()
    bodies = {name: body for name, body in shapes().items() if not options.shapes or name in options.shapes}
    with tempfile.TemporaryDirectory() as workdir:
        config = configs(Path(workdir), None, None)["ours-sqlite"]
        for command in config.prepare:  # migrate
            subprocess.run(command, cwd=HERE.parent, env={**os.environ, **config.env}, check=True)
        server = Server(config, Path(workdir))
        try:
            pinger = Pinger(server.port)
            pinger.start()
            rows = []
            for name, body in bodies.items():
                connection = http.client.HTTPConnection(HOST, server.port, timeout=120)
                status, answer = post(connection, body)  # warm-up, and what the server says
                pinger.reset()
                before = server.cpu_seconds()
                for _ in range(options.bodies):
                    post(connection, body)
                server_seconds = (server.cpu_seconds() - before) / options.bodies
                # Read now: the reference below holds this process's GIL, and the pinger's thread with it.
                worst_ping = pinger.worst
                connection.close()
                reference = reference_seconds(body)
                rows.append((name, len(body), status, answer[:70].decode(errors="replace"), server_seconds,
                             reference, worst_ping))
            pinger.stopping.set()
            pinger.join(10)
        finally:
            server.stop()
    print("| shape | bytes | answer | server CPU per body | one json.loads | ratio | worst concurrent ping |")
    print("|---|---|---|---|---|---|---|")
    for name, size, status, answer, server_seconds, reference, worst in rows:
        ratio = server_seconds / reference if reference > 0 else float("inf")
        print(f"| {name} | {size:,} | {status} `{answer.strip()}` | {server_seconds * 1000:.1f} ms | "
              f"{reference * 1000:.1f} ms | {ratio:.2f} | {worst * 1000:.0f} ms |")
    print(f"\npings: {pinger.count} answered, {pinger.failures} not with 200")
    return 0


if __name__ == "__main__":
    sys.exit(main())
