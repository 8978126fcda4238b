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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_server import Server

from .waiting import PATIENCE
from .wire import RESULT_TYPES, check_client_message, check_server_message, has_definition, validate

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
    """``manage.py mcp_stdio`` in a subprocess; every line it writes is checked.

    Besides plain request/response, a test can answer the server's own requests: pass
    ``on_request`` (called with each server-to-client request; the response it returns, if any,
    is sent back), or wait for one with :meth:`server_request` and reply with :meth:`answer`.
    Every message read is kept in ``received``; notifications also in ``notifications``, server
    requests in ``server_requests``.
    """

    def __init__(self, *args: str, env: dict | None = None, revision: str = "2025-11-25",
                 on_request: Callable[[dict], dict | None] | None = None):
        self.revision = revision
        self.on_request = on_request
        self._ids = itertools.count(1)
        self.notifications: list[dict] = []
        self.server_requests: list[dict] = []
        self.received: list[dict] = []
        # Responses read while waiting for something else, by id; and the method of each request.
        self._responses: dict[Any, dict] = {}
        self._methods: dict[Any, str] = {}
        self._unclaimed: list[dict] = []  # server requests nobody answered or took yet
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

    def wait_for_stderr(self, text: str, timeout: float = PATIENCE) -> str:
        """The stderr so far, once it contains ``text`` (or ``timeout`` passed: the caller asserts)."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.stderr

    def write_line(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.process.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.process.stdin.flush()

    def send(self, message: Any, *, check: bool = True) -> None:
        if check:
            check_client_message(message, self.revision)
        self.write_line(json.dumps(message))

    def read(self, timeout: float = PATIENCE) -> Any:
        """The next message from the server (checked); None at end of output."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output from mcp_stdio in {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            return None
        message = json.loads(line)
        check_server_message(message, self.revision)
        self.received.append(message)
        return message

    def _sort(self, message: Any) -> None:
        """File a message read while waiting for something else; answer server requests."""
        if not isinstance(message, dict):
            return
        if "method" not in message:
            self._responses[message.get("id")] = message
        elif "id" not in message:
            self.notifications.append(message)
        else:
            self.server_requests.append(message)
            reply = self.on_request(message) if self.on_request is not None else None
            if reply is None:
                self._unclaimed.append(message)
            else:
                self._check_answer(message, reply)
                self.send(reply)

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = PATIENCE,
                 what: str = "the expected message") -> dict:
        """Read until a message satisfies ``predicate`` and return it; every message is filed."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {what} from mcp_stdio in {timeout}s; stderr:\n{self.stderr}")
            message = self.read(remaining)
            assert message is not None, f"mcp_stdio closed before {what}; stderr:\n{self.stderr}"
            self._sort(message)
            if predicate(message):
                return message

    def send_request(self, method: str, params: dict | None = None, *, request_id: Any = None) -> Any:
        """Send a request without waiting; returns its id (see :meth:`response`)."""
        if request_id is None:
            request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._methods[request_id] = method
        self.send(message)
        return request_id

    def response(self, request_id: Any, timeout: float = PATIENCE) -> dict:
        """The response to an earlier :meth:`send_request`, checked as that method's answer."""
        if request_id not in self._responses:
            self.wait_for(lambda m: "method" not in m and m.get("id") == request_id, timeout,
                          f"response to request {request_id!r}")
        answer = self._responses.pop(request_id)
        check_server_message(answer, self.revision, self._methods.pop(request_id, None))
        return answer

    def request(self, method: str, params: dict | None = None, timeout: float = PATIENCE) -> dict:
        """Send a request and return its response; notifications seen meanwhile are kept."""
        return self.response(self.send_request(method, params), timeout)

    def notify(self, method: str, params: dict | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def server_request(self, method: str | None = None, timeout: float = PATIENCE) -> dict:
        """The server's oldest request (of ``method``) to the client not yet returned or answered."""

        def wanted(message: dict) -> bool:
            return "id" in message and message.get("method") is not None \
                and method in (None, message["method"])

        for request in self._unclaimed:
            if wanted(request):
                self._unclaimed.remove(request)
                return request
        request = self.wait_for(wanted, timeout, f"server request {method or ''}".strip())
        self._unclaimed.remove(request)
        return request

    def answer(self, request: dict, result: Any = None, *, error: dict | None = None) -> None:
        """Reply to a server request with ``result`` or ``error``; the reply is schema-checked."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        self._check_answer(request, reply)
        self.send(reply)

    def _check_answer(self, request: dict, reply: dict) -> None:
        """A result must also be the result type of the method it answers, in this revision."""
        definition = RESULT_TYPES.get(request["method"])
        if "result" in reply and definition and has_definition(self.revision, definition):
            validate(reply["result"], self.revision, definition)

    def read_to_end(self, timeout: float = PATIENCE) -> list[dict]:
        """Close stdin and read (and file) everything the server still writes before it exits."""
        self.process.stdin.close()
        rest = []
        deadline = time.monotonic() + timeout
        while (message := self.read(max(deadline - time.monotonic(), 0.001))) is not None:
            self._sort(message)
            rest.append(message)
        return rest

    def initialize(self, protocol_version: str | None = None, capabilities: dict | None = None) -> dict:
        response = self.request("initialize", {
            "protocolVersion": protocol_version or self.revision,
            "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO,
        })
        self.revision = response["result"]["protocolVersion"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response["result"]

    def close(self, timeout: float = PATIENCE) -> int:
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
