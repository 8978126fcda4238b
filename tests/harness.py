"""Clients for tests: in process, and over stdio against ``manage.py mcp_stdio``.

Both check every message they send and receive against the negotiated revision's schema.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mcp_server import Server

from .wire import check_client_message, check_server_message

REPO = Path(__file__).resolve().parent.parent
CLIENT_INFO = {"name": "test-client", "version": "1.0.0"}


class InProcessClient:
    """Talks to ``server.handle`` like a client; ``check=False`` to send deliberately bad input."""

    def __init__(self, server: Server, revision: str = "2025-11-25"):
        self.server = server
        self.revision = revision
        self._ids = itertools.count(1)

    def initialize(self, protocol_version: str | None = None, capabilities: dict | None = None,
                   client_info: dict | None = None) -> dict:
        version = protocol_version or self.revision
        self.revision = version
        response = self.request("initialize", {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": client_info or CLIENT_INFO,
        })
        negotiated = response["result"]["protocolVersion"]
        self.revision = negotiated
        self.notify("notifications/initialized")
        return response["result"]

    def request(self, method: str, params: dict | None = None, *, request_id: Any = None,
                check: bool = True) -> dict:
        message: dict[str, Any] = {
            "jsonrpc": "2.0", "id": request_id if request_id is not None else next(self._ids),
            "method": method,
        }
        if params is not None:
            message["params"] = params
        if check:
            check_client_message(message, self.revision)
        response = self.server.handle(message)
        if response is not None:
            check_server_message(response, self.revision, method)
        return response

    def result(self, method: str, params: dict | None = None) -> Any:
        response = self.request(method, params)
        assert "result" in response, response
        return response["result"]

    def notify(self, method: str, params: dict | None = None) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        check_client_message(message, self.revision)
        return self.server.handle(message)

    def raw(self, payload: Any) -> Any:
        """Send anything (bad input included); the answer is still checked."""
        response = self.server.handle(payload)
        if response is not None:
            check_server_message(response, self.revision)
        return response

    def raw_json(self, text: str) -> Any:
        answer = self.server.handle_json(text)
        if answer is not None:
            check_server_message(json.loads(answer), self.revision)
        return None if answer is None else json.loads(answer)


class StdioServer:
    """``manage.py mcp_stdio`` in a subprocess; every line it writes is checked."""

    def __init__(self, *args: str, env: dict | None = None, revision: str = "2025-11-25"):
        self.revision = revision
        self._ids = itertools.count(1)
        self.notifications: list[dict] = []
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "mcp_stdio", *args],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        for line in self.process.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def write_line(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.process.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.process.stdin.flush()

    def send(self, message: Any, *, check: bool = True) -> None:
        if check:
            check_client_message(message, self.revision)
        self.write_line(json.dumps(message))

    def read(self, timeout: float = 10.0) -> Any:
        """The next message from the server (checked); None at end of output."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output from mcp_stdio in {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            return None
        message = json.loads(line)
        check_server_message(message, self.revision)
        return message

    def request(self, method: str, params: dict | None = None, timeout: float = 10.0) -> dict:
        """Send a request and return its response; notifications seen meanwhile are kept."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            answer = self.read(timeout)
            assert answer is not None, f"mcp_stdio closed; stderr:\n{self.stderr}"
            if "method" in answer:
                self.notifications.append(answer)
                continue
            if answer.get("id") == request_id:
                check_server_message(answer, self.revision, method)
                return answer

    def initialize(self, protocol_version: str | None = None, capabilities: dict | None = None) -> dict:
        response = self.request("initialize", {
            "protocolVersion": protocol_version or self.revision,
            "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO,
        })
        self.revision = response["result"]["protocolVersion"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response["result"]

    def close(self, timeout: float = 10.0) -> int:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.close(5)
