"""A relay that checks every line between an MCP client and ``manage.py mcp_stdio``.

    python -m tests.stdio_tap [mcp_stdio arguments...]

Runs ``manage.py mcp_stdio`` as a child, copies its stdin to the child and the child's stdout
back, line by line, and validates each line in both directions against the schema of the
negotiated revision (tests/wire.py). Each violation is written to stderr as a line starting
with ``stdio_tap: VIOLATION``; at the end a line ``stdio_tap: checked N client and M server
messages, K violations`` follows, and the exit status is non-zero when there was a violation (or
the child failed). With ``MCP_TAP_REPORT=<path>`` the same lines also go to that file, so a test
can read them even when its client library swallows the relay's stderr. With
``MCP_TAP_RECORD=<path>`` every line is also appended to that file as ``{"from": "client" or
"server", "message": ...}`` (JSON Lines, in the order the relay passed them on), so a test can
check what really went over the wire.

A client's answer to a server request is checked against the result type of that request's
method (``ElicitResult`` for ``elicitation/create``, ...), not only against ``ClientResult``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from mcp_protocol.envelope import PROTOCOL_VERSION_KEY

from .wire import (
    RESULT_TYPES,
    REVISIONS,
    check_client_message,
    check_server_message,
    has_definition,
    validate,
)

REPO = Path(__file__).resolve().parent.parent
LATEST = "2025-11-25"


class Tap:
    def __init__(self, report: IO[str] | None, record: IO[str] | None = None):
        self.revision = LATEST
        self.report = report
        self.record = record
        self.lock = threading.Lock()
        # Request ids of each side's requests still unanswered -> method, to check result types.
        self.client_requests: dict[Any, str] = {}
        self.server_requests: dict[Any, str] = {}
        self.counts = {"client": 0, "server": 0}
        self.violations = 0

    def say(self, text: str) -> None:
        line = f"stdio_tap: {text}\n"
        sys.stderr.write(line)
        sys.stderr.flush()
        if self.report is not None:
            self.report.write(line)
            self.report.flush()

    def violation(self, side: str, line: bytes, problem: str) -> None:
        with self.lock:
            self.violations += 1
        self.say(f"VIOLATION in a {side} message: {problem} -- {line[:500]!r}")

    def check(self, side: str, line: bytes) -> None:
        if not line.strip():
            return
        with self.lock:
            self.counts[side] += 1
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.violation(side, line, f"not JSON ({exc})")
            return
        if self.record is not None:
            with self.lock:
                self.record.write(json.dumps({"from": side, "message": message}) + "\n")
                self.record.flush()
        try:
            if side == "client":
                self._check_client(message)
            else:
                self._check_server(message)
        except AssertionError as exc:  # WireError and failed asserts of tests/wire.py
            self.violation(side, line, str(exc).splitlines()[0])

    def _check_client(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise AssertionError("the relay expects one JSON object per line")
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method == "initialize":
            requested = params.get("protocolVersion")
            self.revision = requested if requested in REVISIONS else LATEST
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if meta.get(PROTOCOL_VERSION_KEY) in REVISIONS:
            # A 2026-07-28 request names its revision in its envelope: checked against it.
            self.revision = meta[PROTOCOL_VERSION_KEY]
        answered = None
        if method is not None and "id" in message:
            self.client_requests[message["id"]] = method
        elif method is None and "id" in message:
            answered = self.server_requests.pop(message["id"], None)
        check_client_message(message, self.revision)
        definition = RESULT_TYPES.get(answered or "")
        if "result" in message and definition and has_definition(self.revision, definition):
            validate(message["result"], self.revision, definition)

    def _check_server(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise AssertionError("the relay expects one JSON object per line")
        if "method" in message:
            if "id" in message:
                self.server_requests[message["id"]] = message["method"]
            check_server_message(message, self.revision)
            return
        method = self.client_requests.pop(message.get("id"), None)
        if method == "initialize" and isinstance(message.get("result"), dict):
            # Everything after the handshake is checked against the negotiated revision.
            self.revision = message["result"].get("protocolVersion", self.revision)
        check_server_message(message, self.revision, method)


def _client_to_child(tap: Tap, child: subprocess.Popen) -> None:
    assert child.stdin is not None
    try:
        for line in sys.stdin.buffer:
            tap.check("client", line)
            child.stdin.write(line)
            child.stdin.flush()
    except (BrokenPipeError, ValueError):
        pass  # the child is gone; its exit status tells the story
    finally:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()


def _child_to_client(tap: Tap, child: subprocess.Popen) -> None:
    assert child.stdout is not None
    out = sys.stdout.buffer
    for line in child.stdout:
        tap.check("server", line)  # checked before the client sees it: the revision is current
        try:
            out.write(line)
            out.flush()
        except (BrokenPipeError, ValueError):
            break


def main(argv: list[str]) -> int:
    report_path = os.environ.get("MCP_TAP_REPORT")
    report = open(report_path, "a", encoding="utf-8") if report_path else None  # noqa: SIM115
    record_path = os.environ.get("MCP_TAP_RECORD")
    record = open(record_path, "a", encoding="utf-8") if record_path else None  # noqa: SIM115
    tap = Tap(report, record)
    child = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "mcp_stdio", *argv],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # stderr: inherited
    )
    inbound = threading.Thread(target=_client_to_child, args=(tap, child), daemon=True)
    outbound = threading.Thread(target=_child_to_client, args=(tap, child))
    inbound.start()
    outbound.start()
    outbound.join()  # the child closed its stdout: it is exiting
    status = child.wait()
    tap.say(
        f"checked {tap.counts['client']} client and {tap.counts['server']} server messages, "
        f"{tap.violations} violations; mcp_stdio exited with {status}"
    )
    for log in (report, record):
        if log is not None:
            log.close()
    if status != 0:
        return 2
    return 1 if tap.violations else 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # The inbound thread may still block on our stdin; leave without waiting for it.
    os._exit(code)
