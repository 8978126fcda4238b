"""Daphne processes on loopback ports, and a Streamable HTTP client that checks every message.

The processes serve the demo project (plus ``tests.stdio_app``) on the test database, so tests
using them need ``@pytest.mark.django_db(transaction=True)`` or the ``live_database`` fixture.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .harness import CLIENT_INFO, REPO
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

ACCEPT_BOTH = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_env() -> dict[str, str]:
    """Point a child process at the database the tests use."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"MCP_TEST_SQLITE_NAME": str(settings["NAME"])}
    host, port = settings.get("HOST") or "127.0.0.1", settings.get("PORT") or "5432"
    user = settings.get("USER") or "postgres"
    return {"DATABASE_URL": f"postgres://{user}@{host}:{port}/{settings['NAME']}"}


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` (none once it has exited)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop_process(process: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate ``process`` and wait for it; kill it if it does not end within ``timeout`` (and
    its children with it: granian's worker processes, which it would otherwise leave serving)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_pids(children_of(process.pid))
            process.kill()
            process.wait(timeout)


class ChildProcess:
    """A process a test started (``self.process``), its output in ``self.log_path``."""

    process: subprocess.Popen
    log_path: Path
    _log: Any

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()

    def kill(self) -> None:
        """Die without any cleanup (SIGKILL), as a crashed process or one out of memory does (its
        worker processes too, under granian)."""
        kill_pids(children_of(self.process.pid))
        self.process.kill()
        self.process.wait(PATIENCE)
        self._log.close()


class DaphneServer(ChildProcess):
    """``daphne project.asgi:application`` on 127.0.0.1, with test settings."""

    def __init__(self, *, mcp_settings: dict | None = None, env: dict | None = None,
                 log_path: Path | None = None, application: str = "project.asgi:application",
                 server: str = "daphne", port: int | None = None, wait: bool = True,
                 server_args: tuple[str, ...] = ()):
        # ``port``: chosen beforehand when the settings must name it (the protected demo's URL).
        # ``wait=False``: return once started; the caller calls ``wait_until_listening()`` (so that
        # several processes start side by side). ``server_args``: more options for the server.
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log_path or Path(f"/tmp/mcp-daphne-{self.port}.log")
        inherited = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        child_env = {
            **inherited,
            "DJANGO_SETTINGS_MODULE": "tests.http_settings",
            "MCP_TEST_HTTP_SETTINGS": json.dumps(mcp_settings or {}),
            "PYTHONUNBUFFERED": "1",
            **database_env(),
            **(env or {}),
        }
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # ``server="uvicorn"``, ``"hypercorn"`` or ``"granian"`` serves the same application with
        # that server (whose send() waits for the client); granian's one worker process serves
        # (:attr:`serving_pid`), its main process passes signals on.
        # ``"runserver"``: ``manage.py runserver`` (daphne's, which serves ASGI_APPLICATION).
        self.server = server
        command = {"daphne": ["-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), application],
                   "uvicorn": ["-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), application],
                   "hypercorn": ["-m", "hypercorn", "-b", f"127.0.0.1:{self.port}", application],
                   "granian": ["-m", "granian", "--interface", "asgi", "--workers", "1",
                               "--host", "127.0.0.1", "--port", str(self.port), application],
                   "runserver": ["manage.py", "runserver", "--noreload", f"127.0.0.1:{self.port}"]}[server]
        self.process = subprocess.Popen(
            [sys.executable, *command, *server_args],
            cwd=REPO, env=child_env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        if wait:
            self.wait_until_listening()

    def wait_until_listening(self, timeout: float = PATIENCE) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}:\n{self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"daphne did not listen on {self.port} in {timeout}s:\n{self.log}")

    _wait_until_listening = wait_until_listening  # its earlier name

    @property
    def serving_pid(self) -> int:
        """The process that runs the application: the one worker process of granian and hypercorn
        (their main process starts it once listening), else the process started."""
        if self.server not in ("granian", "hypercorn"):
            return self.process.pid
        deadline = time.monotonic() + PATIENCE
        while not (workers := [pid for pid in children_of(self.process.pid)
                               if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()]):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{self.server} started no worker:\n{self.log}")
            time.sleep(0.05)
        assert len(workers) == 1, workers
        return workers[0]



@dataclass
class Event:
    id: str | None
    data: str
    retry: int | None = None

    @property
    def message(self) -> Any:
        return json.loads(self.data) if self.data else None


def iter_events(response: httpx.Response):
    """Server-Sent Events of a streaming response, one at a time."""
    event_id, data, retry = None, [], None
    for line in response.iter_lines():
        if line == "":
            if data or event_id is not None:
                yield Event(event_id, "\n".join(data), retry)
            event_id, data, retry = None, [], None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
            elif name == "retry":
                retry = int(value)


@dataclass
class Exchange:
    """What one request got back: its response and everything the server sent before it."""

    response: dict | None
    events: list[Event] = field(default_factory=list)
    status: int = 200
    headers: httpx.Headers | None = None

    @property
    def notifications(self) -> list[dict]:
        return [e.message for e in self.events if e.message and "method" in e.message
                and "id" not in e.message]

    @property
    def server_requests(self) -> list[dict]:
        return [e.message for e in self.events if e.message and "method" in e.message
                and "id" in e.message]


class HTTPClient:
    """A Streamable HTTP client; with several URLs, each HTTP request goes to the next one."""

    def __init__(self, *urls: str, revision: str = "2025-11-25", timeout: float = PATIENCE):
        self.urls = itertools.cycle(urls)
        self.revision = revision
        self.session_id: str | None = None
        self.http = httpx.Client(timeout=timeout)
        self._ids = itertools.count(1)
        # method -> answer(params) for requests the server sends on a POST stream.
        self.answers: dict[str, Callable[[dict], dict]] = {}

    def close(self) -> None:
        self.http.close()

    def headers(self, extra: dict | None = None, *, accept: str = ACCEPT_BOTH) -> dict:
        headers = {"accept": accept, "content-type": "application/json"}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = self.revision
        return {**headers, **(extra or {})}

    def post_raw(self, body: bytes | str, headers: dict | None = None,
                 url: str | None = None) -> httpx.Response:
        return self.http.post(url or next(self.urls), content=body, headers=self.headers(headers))

    def initialize(self, capabilities: dict | None = None, revision: str | None = None,
                   url: str | None = None) -> dict:
        self.revision = revision or self.revision
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": "initialize", "params": {
            "protocolVersion": self.revision, "capabilities": capabilities or {},
            "clientInfo": CLIENT_INFO}}
        check_client_message(message, self.revision)
        response = self.post_raw(json.dumps(message), url=url)
        assert response.status_code == 200, (response.status_code, response.text)
        answer = response.json()
        self.revision = answer["result"]["protocolVersion"]
        check_server_message(answer, self.revision, "initialize")
        self.session_id = response.headers["mcp-session-id"]
        self.notify("notifications/initialized")
        return answer["result"]

    def notify(self, method: str, params: dict | None = None, url: str | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        check_client_message(message, self.revision)
        return self.post_raw(json.dumps(message), url=url)

    def respond(self, request_id: Any, result: dict, url: str | None = None) -> httpx.Response:
        message = {"jsonrpc": "2.0", "id": request_id, "result": result}
        check_client_message(message, self.revision)
        return self.post_raw(json.dumps(message), url=url)

    def request(self, method: str, params: dict | None = None, *, request_id: Any = None,
                url: str | None = None, on_event: Callable[[Event], None] | None = None) -> Exchange:
        """Send a request and read its answer to the end (JSON or SSE), checking every message.

        Requests the server sends meanwhile are answered from ``self.answers``.
        """
        request_id = next(self._ids) if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        check_client_message(message, self.revision)
        with self.http.stream("POST", url or next(self.urls), content=json.dumps(message),
                              headers=self.headers()) as response:
            exchange = Exchange(None, status=response.status_code, headers=response.headers)
            kind = response.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):
                for event in iter_events(response):
                    exchange.events.append(event)
                    self._check_event(event, method, request_id)
                    if on_event is not None:
                        on_event(event)
                    answer = event.message
                    if answer and answer.get("id") == request_id and "method" not in answer:
                        exchange.response = answer
                    elif answer and "method" in answer and "id" in answer:
                        self._answer(answer)
            else:
                response.read()
                if response.content:
                    exchange.response = response.json()
                    check_server_message(exchange.response, self.revision, method)
        return exchange

    def _check_event(self, event: Event, method: str, request_id: Any) -> None:
        message = event.message
        if message is None:
            return
        is_response = message.get("id") == request_id and "method" not in message
        check_server_message(message, self.revision, method if is_response else None)

    def _answer(self, request: dict) -> None:
        answer = self.answers.get(request["method"])
        if answer is not None:
            result = self.respond(request["id"], answer(request.get("params") or {}))
            assert result.status_code == 202, result.text

    def delete(self, url: str | None = None) -> httpx.Response:
        return self.http.delete(url or next(self.urls), headers=self.headers())

    def listen(self, last_event_id: str | None = None, url: str | None = None) -> Listener:
        return Listener(self, url or next(self.urls), last_event_id)


class Listener:
    """A GET stream read on a thread; ``events`` is a queue of :class:`Event` (None at its end)."""

    def __init__(self, client: HTTPClient, url: str, last_event_id: str | None):
        self.client = client
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.status: int | None = None
        self.opened = threading.Event()
        headers = client.headers(accept="text/event-stream")
        headers.pop("content-type")
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        self._http = httpx.Client(timeout=httpx.Timeout(PATIENCE, read=None))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.opened.wait(PATIENCE), "the GET stream did not open"

    def _read(self, url: str, headers: dict) -> None:
        try:
            with self._http.stream("GET", url, headers=headers) as response:
                self._response = response
                self.status = response.status_code
                self.opened.set()
                if response.status_code != 200:
                    response.read()
                    return
                for event in iter_events(response):
                    if event.message is not None:
                        check_server_message(event.message, self.client.revision)
                    self.events.put(event)
        except (httpx.HTTPError, RuntimeError):
            pass
        finally:
            self.opened.set()
            self.events.put(None)

    def next(self, timeout: float = PATIENCE) -> Event | None:
        return self.events.get(timeout=timeout)

    def close(self) -> None:
        """Drop the connection, as a client that goes away does."""
        drop_connection(self._response, self._http, self._thread)


def drop_connection(response: httpx.Response | None, http: httpx.Client, reader: threading.Thread) -> None:
    """Drop a streamed response's connection, as a client that goes away does, and wait for the
    thread reading it to end."""
    stream = response.extensions.get("network_stream") if response is not None else None
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        # Closing the client alone does not wake a thread blocked reading the socket.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    http.close()
    reader.join(5)
