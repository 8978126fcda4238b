#!/usr/bin/env python3
"""Fleet soak: mixed traffic of both eras over 4 daphne processes behind a round-robin proxy and 2
Celery workers, while every web process is restarted in turn and a worker is killed now and then.

    bench/soak                                  # 10 minutes; prints the report, exit 1 on any failure
    bench/soak --duration 120 --restart-period 20 --kill-period 45 --redis-url redis://127.0.0.1:6380/7

It starts four daphne processes of the demo project on PostgreSQL (``--postgres-url``, a database
of the soak's own, dropped and created afresh) and Redis (``--redis-url``, a database index the
run flushes first), two ``celery -A project worker`` processes (solo pool) on a Redis broker
(``--broker-url``, by default the next database index, flushed too), the round-robin proxy of
``conformance/proxy.py`` in front of the web processes (every HTTP request goes to the next one,
so every session is served by all four; a stopped one is passed over), and a notifier process
(the demo project, no HTTP) that sends resource updates and log broadcasts on demand, as a cron
job or the admin would. Then ``--workers`` client tasks loop, until ``--duration`` is over, over a
weighted mix of operations, each checked:

- ``ping``, ``tools/list``, ``call`` (echo and add): the right result;
- ``progress``: slow_count with a progress token, progress 1..n in order, then the result;
- ``cancel``: slow_count cancelled (``notifications/cancelled``, POSTed on another connection, so
  to another process) half way: its stream ends and no response ever comes for it;
- ``resume``: slow_count whose POST stream is dropped half way, resumed with a GET and
  ``Last-Event-ID``: every progress exactly once across the streams, and the result at the end;
- ``listen``: a new session subscribes to a resource URI of its own and opens its GET stream; the
  notifier sends an update of that URI and a log message to every session; both must arrive on the
  stream, and a DELETE of the session must end it;
- ``reopen``: DELETE of the worker's session (after which it is unknown: 404), and a new one;
- ``elicit``: confirm_action, whose elicitation/create the client answers (on another
  connection): the tool's result says what the client answered;
- ``background``: count_in_background (a Celery worker runs it) with progress, in the session;
- ``modern``: 2026-07-28 requests (no session, the envelope in ``_meta``): echo and add;
- ``task``: count_in_background as a task of the Tasks extension, polled with tasks/get (on any
  process) until completed, whose result it carries;
- ``modern listen``: ``subscriptions/listen`` for a URI of its own, the notifier's update of it
  arriving on the stream.

Meanwhile (``soak_fleet.py``) a web process is restarted every ``--restart-period`` seconds, each
in turn (SIGTERM: it drains; its exit awaited; the same command on the same port, awaited until it
listens), and a worker is killed with SIGKILL every ``--kill-period`` seconds, each in turn, and
started again. A client does what a client of a restarting fleet does: a request answered 503 by
a draining process is sent again after its ``Retry-After``; a stream a draining process ends with a
retry hint is resumed with ``Last-Event-ID`` (a listen stream opened again); a background call
refused with 429 (the client's most queued) is sent again after its ``retryAfter``; each is noted.

Every operation ends in one of three ways: its result (checked), an expected error (a background
call or task whose worker the soak killed while it ran, ending with the -32603 docs/background.md
promises), or a failure (anything else: a wrong or missing answer, a lost or repeated event, a
message off the schema, no end within ``--op-timeout``). Every message the server sends is checked
against the JSON schema of its revision (``tests/wire.py``). The resident memory (VmRSS) of every
process, web and worker, is sampled per *generation* (each process started, first or after a
restart): from the end of its own warm-up (``--warmup``, by default 10 % of the duration, at most
60 s) to its stop or the end; each must stay within 10 % either way. The report: operations by
kind and outcome (p50/p99/longest latency), the longest wait of all, what the fleet went through,
memory per generation, and failures with examples. A traceback in a log, a process that died on its
own, one that would not stop or start, or memory out of bounds are failures too. The exit status
is 1 on any failure, with the tail of every log. ``--only resume`` (say) runs one kind of operation,
to reproduce a failure. Network traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import rawhttp  # noqa: E402
from rawhttp import ACCEPT_BOTH, INITIALIZE, INITIALIZED, MODERN_VERSION, PROTOCOL_VERSION, post_headers  # noqa: E402
from run import HOST, free_port, reachable  # noqa: E402
from soak_fleet import Fleet, chaos  # noqa: E402

from tests.wire import WireError, check_server_message  # noqa: E402

PROCESSES = 4
DEFAULT_POSTGRES = os.environ.get("SOAK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/mcp_soak")
DEFAULT_REDIS = os.environ.get("SOAK_REDIS_URL", "redis://127.0.0.1:6379/7")
EXPECTED_TOOLS = {"echo", "add", "slow_count", "confirm_action", "count_in_background"}
# Weights of the mix: cheap requests most, the streaming operations often enough to matter. The
# 2025-11-25 era first (a session each), then the 2026-07-28 era (no session).
MIX = {"ping": 3, "tools/list": 2, "call": 3, "progress": 3, "cancel": 2, "resume": 2, "listen": 1,
       "reopen": 1, "elicit": 2, "background": 1,
       "modern": 3, "task": 1, "modern listen": 1}
SESSION_KINDS = {"ping", "tools/list", "call", "progress", "cancel", "resume", "listen", "reopen", "elicit",
                 "background"}
# What a client of a background call whose worker was killed gets (docs/background.md: -32603 at
# most 4 heartbeats later): mcp_server.background.launch.WORKER_STOPPED; or, when the web process
# holding the call's request stopped too before it noticed (a restart), the error of a stopped web
# process, mcp_server.http.liveness.REQUEST_STOPPED. Neither can be imported here without setting
# Django up; tests/test_soak.py checks they are the same.
WORKER_STOPPED = "The worker running this call stopped before answering; send it again"
REQUEST_STOPPED = "The server process serving this request stopped before answering; send it again"
INTERNAL_ERROR = -32603
TASKS = "io.modelcontextprotocol/tasks"
MODERN_CLIENT = {"name": "soak", "version": "1.0"}
SESSION_CAPABILITIES = {"elicitation": {"form": {}}}
MAX_RESUMES = 8  # drains a stream may go through within one operation
DRAIN_503_RETRIES = 10  # a request that reached a draining process (503) is sent again, this often
# A background call refused while the client has the most queued or running (HTTP 429, its
# JSON-RPC error's data saying when to retry) is sent again then, as a client does, this often.
BUSY_RETRIES = 30
BACKGROUND_KINDS = {"background", "task"}
LOG_TAIL_LINES = 40
MAX_CHUNKS_PER_STREAM = 10_000  # far more than any operation's stream carries


class Failure(Exception):
    """A check that did not hold: ``reason`` is short and stable (it is counted), ``detail`` is not."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Expected(Exception):
    """An operation that ended with the JSON-RPC error the project documents for what the soak did
    (a background call whose worker it killed): counted apart, not a failure."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# HTTP ------------------------------------------------------------------------------------------
@dataclass
class Event:
    event_id: str | None
    message: Any  # the decoded ``data:`` JSON, None for an event with no data (a priming id)
    retry: int | None = None  # an SSE retry hint (a draining process ends its streams with one)


def checked(message: Any, method: str | None = None, revision: str = PROTOCOL_VERSION) -> Any:
    """``message`` once it is valid against the schema of its revision (``method``: the request
    it answers, whose result type is then checked too)."""
    try:
        check_server_message(message, revision, method)
    except (WireError, KeyError, TypeError) as exc:
        raise Failure("a message not valid against the schema", str(exc)[:600]) from None
    return message


def messages_of(answer: rawhttp.Response, method: str, revision: str = PROTOCOL_VERSION) -> list[Any]:
    """The checked messages of a whole response to a ``method`` request."""
    return [checked(m, method if isinstance(m, dict) and "method" not in m else None, revision)
            for m in answer.messages()]


def draining(status: int, headers: dict[str, str]) -> bool:
    """The answer of a process that drains to a request that reached it anyway (drain.py)."""
    return status == 503 and "retry-after" in headers and headers.get("connection", "").lower() == "close"


class Connection(rawhttp.Connection):
    """A keep-alive connection that can also read a response as it streams (SSE). A request that
    reaches a draining process (503, ``Retry-After``) is sent again after the delay, as a client
    should; ``notes`` counts those."""

    def __init__(self, host: str, port: int, notes: Counter):
        super().__init__(host, port)
        self.notes = notes

    async def request(self, method: str, headers: dict[str, str] | None = None,
                      body: bytes = b"") -> rawhttp.Response:
        for _attempt in range(DRAIN_503_RETRIES):
            answer = await super().request(method, headers, body)
            if not draining(answer.status, answer.headers):
                return answer
            await self._wait_retry(answer.headers)
        return answer

    async def begin(self, method: str, headers: dict[str, str],
                    body: bytes = b"") -> tuple[int, dict[str, str]]:
        """Send a request; read only the head of the response (its body is read by ``events``)."""
        for _attempt in range(DRAIN_503_RETRIES):
            if self.writer is None:
                await self.open()
            self.writer.write(self._head(method, headers, body))
            status, response_headers = await self.read_head()
            if not draining(status, response_headers):
                return status, response_headers
            await self.body(response_headers)
            await self._wait_retry(response_headers)
        return status, response_headers

    async def _wait_retry(self, headers: dict[str, str]) -> None:
        self.notes["request answered 503 by a draining process, sent again"] += 1
        self.close()
        await asyncio.sleep(min(float(headers.get("retry-after", "1")), 2.0))

    async def body(self, headers: dict[str, str]) -> bytes:
        data = await self._read_body(headers)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return data

    async def events(self, headers: dict[str, str], method: str | None = None,
                     revision: str = PROTOCOL_VERSION) -> AsyncIterator[Event]:
        """The SSE events of the response being read, as they arrive, until its body ends; each
        message is checked against the schema (a response as one to ``method``)."""
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        buffer = b""
        for _ in range(MAX_CHUNKS_PER_STREAM):
            if chunked:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                buffer += await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            else:
                data = await self.reader.read(65536)
                if not data:
                    self.close()
                    break
                buffer += data
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                event = parse_event(block)
                if event is not None:
                    if event.message is not None:
                        responds = isinstance(event.message, dict) and "method" not in event.message
                        checked(event.message, method if responds else None, revision)
                    yield event
        else:
            raise Failure("endless stream", f"more than {MAX_CHUNKS_PER_STREAM} chunks")
        if headers.get("connection", "").lower() == "close":
            self.close()


def parse_event(block: bytes) -> Event | None:
    """One SSE event; None for a comment (``: keepalive``)."""
    event_id, data, any_field, retry = None, [], False, None
    for line in block.decode().split("\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        any_field = True
        if name == "id":
            event_id = value
        elif name == "data":
            data.append(value)
        elif name == "retry" and value.isdigit():
            retry = int(value)
    if not any_field:
        return None
    text = "\n".join(data)
    return Event(event_id, json.loads(text) if text.strip() else None, retry)


def busy(error: Any) -> bool:
    """A background call refused because its client has the most queued or running: retry later."""
    return (isinstance(error, dict) and error.get("code") == -32600 and isinstance(error.get("data"), dict)
            and "retryAfter" in error["data"])


def modern_message(method: str, request_id: int, params: dict, capabilities: dict | None) -> dict:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities or {},
            "io.modelcontextprotocol/clientInfo": MODERN_CLIENT}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}}


def modern_headers(message: dict) -> dict[str, str]:
    """The headers a 2026-07-28 client sends with ``message`` (SEP-2243: method and name)."""
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH,
               "MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": message["method"]}
    name = {"tools/call": "name", "tasks/get": "taskId"}.get(message["method"])
    if name is not None:
        headers["Mcp-Name"] = str(message["params"][name])
    return headers


def session_headers(session_id: str) -> dict[str, str]:
    return {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": PROTOCOL_VERSION}


def listen_headers(session_id: str, last_event_id: str | None = None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream", **session_headers(session_id)}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    return headers


def is_progress(message: Any, token: str) -> bool:
    return (isinstance(message, dict) and message.get("method") == "notifications/progress"
            and message.get("params", {}).get("progressToken") == token)


def response_to(message: Any, request_id: int) -> bool:
    return isinstance(message, dict) and message.get("id") == request_id and "method" not in message


def slow_count(request_id: int, count: int, delay: float, token: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "slow_count", "arguments": {"count": count, "delay": delay},
                       "_meta": {"progressToken": token}}}


def counted_text(result: Any) -> str | None:
    try:
        return result["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return None


# The notifier ----------------------------------------------------------------------------------
async def notifier_main() -> None:
    """``soak.py --notifier``: reads ``<tag> update <uri>`` or ``<tag> log <text>`` lines on stdin
    and sends them through the demo server's transport to every process; answers ``<tag> ok``."""
    import django

    sys.path.insert(0, str(ROOT))  # the demo project
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    from mcp_protocol import jsonrpc, methods
    from mcp_server.site import get_transport

    transport = get_transport()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def perform(tag: str, command: str, argument: str) -> None:
        try:
            if command == "update":
                await transport.notify_resource_updated_async(argument)
            elif command == "log":
                message = jsonrpc.notification(methods.NOTIFICATIONS_MESSAGE,
                                               {"level": "info", "logger": "soak", "data": argument})
                await transport.broadcast_async(message, "info")
            else:
                raise ValueError(f"unknown command {command!r}")
            answer = f"{tag} ok"
        except Exception as exc:  # reported to the soak, which counts it
            answer = f"{tag} error {type(exc).__name__}: {exc}".replace("\n", " ")
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()

    # Each command runs as it comes, as notifications sent from many places of a server would.
    under_way: set[asyncio.Task] = set()
    while line := await reader.readline():
        task = asyncio.create_task(perform(*line.decode().rstrip("\n").split(" ", 2)))
        under_way.add(task)
        task.add_done_callback(under_way.discard)
    if under_way:
        await asyncio.wait(under_way)


class Notifier:
    """The soak's side of the notifier process: commands and their answers, matched by tag."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env, self.log_path = env, log_path
        self.process: asyncio.subprocess.Process | None = None
        self.waiting: dict[str, asyncio.Future] = {}
        self.tags = iter(range(1, 1 << 62))
        self.reader_task: asyncio.Task | None = None

    async def start(self) -> None:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__)), "--notifier", cwd=ROOT, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
        self.reader_task = asyncio.create_task(self._read_answers())

    async def _read_answers(self) -> None:
        while line := await self.process.stdout.readline():
            tag, _, answer = line.decode().rstrip("\n").partition(" ")
            future = self.waiting.pop(tag, None)
            if future is not None and not future.done():
                future.set_result(answer)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(Failure("notifier exited", f"see {self.log_path}"))

    async def send(self, command: str, argument: str) -> None:
        if self.process.returncode is not None:
            raise Failure("notifier exited", f"see {self.log_path}")
        tag = str(next(self.tags))
        future = asyncio.get_running_loop().create_future()
        self.waiting[tag] = future
        self.process.stdin.write(f"{tag} {command} {argument}\n".encode())
        await self.process.stdin.drain()
        answer = await future
        if answer != "ok":
            raise Failure(f"notifier {command} failed", answer)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self.reader_task is not None:
            await self.reader_task
        self._log.close()


def as_failure(exc: Exception, timeout: float) -> Failure:
    if isinstance(exc, Failure):
        return exc
    if isinstance(exc, TimeoutError):
        return Failure("timeout", f"no end within {timeout:g} s")
    return Failure(type(exc).__name__, repr(exc)[:300])


# Client workers --------------------------------------------------------------------------------
@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    notes: Counter = field(default_factory=Counter)  # retries and other things worth knowing
    expected: Counter = field(default_factory=Counter)  # "kind: reason" of the expected errors
    longest: tuple[float, str] = (0.0, "")  # the longest any operation took to end, and its kind

    def ended(self, kind: str, seconds: float) -> None:
        if seconds > self.longest[0]:
            self.longest = (seconds, kind)

    def failed(self, kind: str, failure: Failure) -> None:
        key = f"{kind}: {failure.reason}"
        self.errors[key] += 1
        example = failure.detail or failure.reason
        if len(self.examples[key]) < 3 and example not in self.examples[key]:
            self.examples[key].append(example)


class Worker:
    def __init__(self, index: int, port: int, notifier: Notifier, stats: Stats, args: argparse.Namespace,
                 fleet: Fleet | None = None):
        self.index, self.port, self.notifier, self.stats, self.args = index, port, notifier, stats, args
        self.fleet = fleet
        # Background calls and tasks in flight at once, over every client task: the server sees all
        # of them as one principal, which may have MAX_BACKGROUND_CALLS_PER_PRINCIPAL (10) queued.
        self.background_slots: asyncio.Semaphore | contextlib.nullcontext = contextlib.nullcontext()
        self.random = random.Random(args.seed * 1000 + index)
        self.main = Connection(HOST, port, stats.notes)      # requests, and the streams of calls
        self.side = Connection(HOST, port, stats.notes)      # what is sent while ``main`` streams
        self.listener = Connection(HOST, port, stats.notes)  # GET streams
        self.session_id: str | None = None
        self.request_ids = iter(range(1, 1 << 62))
        self.serial = 0

    def next_id(self) -> int:
        return next(self.request_ids)

    def token(self) -> str:
        self.serial += 1
        return f"w{self.index}-{self.serial}"

    def close_connections(self) -> None:
        for connection in (self.main, self.side, self.listener):
            connection.close()

    # Protocol steps ------------------------------------------------------------------------
    async def open_session(self) -> str:
        initialize = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": SESSION_CAPABILITIES}}
        answer = await self.main.request("POST", post_headers(), json.dumps(initialize).encode())
        session_id = answer.headers.get("mcp-session-id")
        replies = [m for m in messages_of(answer, "initialize") if response_to(m, INITIALIZE["id"])]
        if answer.status != 200 or not session_id or len(replies) != 1 or "result" not in replies[0]:
            raise Failure("initialize failed", f"HTTP {answer.status} {answer.body[:300]!r}")
        if replies[0]["result"].get("protocolVersion") != PROTOCOL_VERSION:
            raise Failure("initialize: wrong protocol version", repr(replies[0]["result"])[:300])
        note = await self.main.request("POST", post_headers(session_id), json.dumps(INITIALIZED).encode())
        if note.status != 202:
            raise Failure("initialized not accepted", f"HTTP {note.status} {note.body[:300]!r}")
        return session_id

    async def delete_session(self, session_id: str) -> None:
        answer = await self.main.request("DELETE", session_headers(session_id))
        if answer.status != 200:
            raise Failure("DELETE failed", f"HTTP {answer.status} {answer.body[:300]!r}")

    async def call(self, method: str, params: dict | None = None, session_id: str | None = None) -> Any:
        """One request on ``main``; its result (a JSON-RPC error is a failure)."""
        request_id = self.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        answer = await self.main.request("POST", post_headers(session_id or self.session_id),
                                         json.dumps(message).encode())
        if answer.status != 200:
            raise Failure(f"{method}: HTTP {answer.status}", repr(answer.body[:300]))
        replies = [m for m in messages_of(answer, method) if response_to(m, request_id)]
        if len(replies) != 1:
            raise Failure(f"{method}: {len(replies)} responses", repr(answer.body[:300]))
        if "error" in replies[0]:
            raise Failure(f"{method}: error {replies[0]['error'].get('code')}", repr(replies[0])[:300])
        return replies[0]["result"]

    async def open_listener(self, session_id: str, last_event_id: str | None = None) -> dict[str, str]:
        """A GET stream on ``listener``; retried while a stream the session held just before is
        still claimed where it ran (409: that process learns a moment later that it ended)."""
        deadline = time.monotonic() + self.args.op_timeout / 2
        while True:
            status, headers = await self.listener.begin("GET", listen_headers(session_id, last_event_id))
            if status == 200 and headers.get("content-type", "").startswith("text/event-stream"):
                return headers
            body = await self.listener.body(headers)
            if status != 409 or time.monotonic() > deadline:
                raise Failure(f"GET stream: HTTP {status}", repr(body[:300]))
            self.stats.notes["GET retried after 409 (previous stream still held)"] += 1
            await asyncio.sleep(0.1)

    # Operations ----------------------------------------------------------------------------
    async def op_ping(self) -> None:
        if await self.call("ping") != {}:
            raise Failure("ping: wrong result")

    async def op_tools_list(self) -> None:
        result = await self.call("tools/list")
        names = {tool.get("name") for tool in result.get("tools", [])}
        if not names >= EXPECTED_TOOLS:
            raise Failure("tools/list: tools missing", f"got {sorted(names)}")

    async def op_call(self) -> None:
        text = f"soak {self.token()}"
        result = await self.call("tools/call", {"name": "echo", "arguments": {"message": text}})
        if counted_text(result) != text or result.get("isError"):
            raise Failure("echo: wrong result", repr(result)[:300])
        a, b = self.random.randint(-1000, 1000), self.random.randint(-1000, 1000)
        result = await self.call("tools/call", {"name": "add", "arguments": {"a": a, "b": b}})
        if result.get("structuredContent") != {"sum": a + b}:
            raise Failure("add: wrong result", f"{a} + {b}: {result!r}"[:300])

    async def op_progress(self) -> None:
        count, token, request_id = 4, self.token(), self.next_id()
        answer = await self.main.request("POST", post_headers(self.session_id),
                                         json.dumps(slow_count(request_id, count, 0.02, token)).encode())
        if answer.status != 200:
            raise Failure(f"slow_count: HTTP {answer.status}", repr(answer.body[:300]))
        messages = messages_of(answer, "tools/call")
        progress = [m["params"] for m in messages if is_progress(m, token)]
        replies = [m for m in messages if response_to(m, request_id)]
        steps = [p.get("progress") for p in progress]
        if steps != list(range(1, count + 1)) or any(p.get("total") != count for p in progress):
            raise Failure("progress: wrong sequence", f"{progress!r}"[:300])
        if len(replies) != 1 or counted_text(replies[0].get("result")) != f"Counted to {count}":
            raise Failure("progress: wrong response", repr(replies)[:300])
        if messages.index(replies[0]) != len(messages) - 1:
            raise Failure("progress: events after the response", repr(messages[-3:])[:300])

    async def op_cancel(self) -> None:
        # 40 steps of 0.1 s: the cancel, sent at step 2, has seconds to arrive before the end.
        count, token, request_id = 40, self.token(), self.next_id()
        status, headers = await self.main.begin(
            "POST", post_headers(self.session_id),
            json.dumps(slow_count(request_id, count, 0.1, token)).encode())
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            raise Failure(f"slow_count: HTTP {status}", repr((await self.main.body(headers))[:300]))
        cancelled = False
        async for event in self.main.events(headers, "tools/call"):
            halfway = is_progress(event.message, token) and event.message["params"]["progress"] >= 2
            if halfway and not cancelled:
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": "soak"}}
                answer = await self.side.request("POST", post_headers(self.session_id),
                                                 json.dumps(note).encode())
                if answer.status != 202:
                    raise Failure(f"cancel: HTTP {answer.status}", repr(answer.body[:300]))
                cancelled = True
            elif response_to(event.message, request_id):
                if cancelled:
                    raise Failure("cancel: a response came after the cancel", repr(event.message)[:300])
                raise Failure("cancel: the call ended before it was cancelled", repr(event.message)[:300])
        if not cancelled:
            raise Failure("cancel: the stream ended with no progress")

    async def op_resume(self) -> None:
        count, token, request_id = 6, self.token(), self.next_id()
        status, headers = await self.main.begin(
            "POST", post_headers(self.session_id),
            json.dumps(slow_count(request_id, count, 0.1, token)).encode())
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            raise Failure(f"slow_count: HTTP {status}", repr((await self.main.body(headers))[:300]))
        steps: list[int] = []
        last_event_id = None
        async for event in self.main.events(headers, "tools/call"):
            last_event_id = event.event_id or last_event_id
            if response_to(event.message, request_id):
                raise Failure("resume: the call ended before the stream was dropped")
            if is_progress(event.message, token):
                steps.append(event.message["params"]["progress"])
                if steps[-1] >= 2:
                    break
        if last_event_id is None:
            raise Failure("resume: no event id on the POST stream")
        self.main.close()  # drop the stream mid-call; the call goes on
        resumed, replies = await self.resume(last_event_id, token, request_id)
        steps += resumed
        if steps != list(range(1, count + 1)):
            # Was what is missing stored? A second resume from the same id replays the store.
            again, _ = await self.resume(last_event_id, token, request_id)
            raise Failure("resume: progress lost or repeated",
                          f"steps {steps}; a second resume from {last_event_id} gives {again}")
        if len(replies) != 1 or counted_text(replies[0].get("result")) != f"Counted to {count}":
            raise Failure("resume: the resumed stream did not end with the response", repr(replies)[:300])

    async def listening(self, session_id: str, headers: dict[str, str] | None = None,
                        last_event_id: str | None = None, method: str | None = None) -> AsyncIterator[Event]:
        """The events of the session's GET stream (``headers``: one just opened), to its end; a
        stream a draining process ends with a retry hint is resumed, with ``Last-Event-ID``, on
        the process the proxy picks next, as a client does."""
        for _attempt in range(MAX_RESUMES):
            if headers is None:
                headers = await self.open_listener(session_id, last_event_id)
            hint = None
            async for event in self.listener.events(headers, method):
                last_event_id = event.event_id or last_event_id
                hint = event.retry if event.retry is not None else hint
                yield event
            if hint is None:
                return
            self.stats.notes["stream ended by a draining process, resumed with Last-Event-ID"] += 1
            headers = None
            await asyncio.sleep(min(hint, 2000) / 1000)
        raise Failure("stream: more drains than expected", f"{MAX_RESUMES} in one operation")

    async def resume(self, last_event_id: str, token: str, request_id: int) -> tuple[list[int], list[dict]]:
        """GET with ``Last-Event-ID`` to its end: the progress steps and the responses on it."""
        steps, replies = [], []
        async for event in self.listening(self.session_id, last_event_id=last_event_id, method="tools/call"):
            if is_progress(event.message, token):
                steps.append(event.message["params"]["progress"])
            elif response_to(event.message, request_id):
                replies.append(event.message)
        return steps, replies

    async def op_listen(self) -> None:
        """A session of its own, so that its GET stream is the only one it ever has."""
        session_id = await self.open_session()
        try:
            uri = f"demo://users/soak-{self.token()}/profile"
            text = f"broadcast {self.token()}"
            await self.call("resources/subscribe", {"uri": uri}, session_id)
            await self.call("logging/setLevel", {"level": "info"}, session_id)
            headers = await self.open_listener(session_id)
            events = self.listening(session_id, headers)
            await self.notifier.send("update", uri)
            await self.notifier.send("log", text)
            wanted = {"update", "log"}
            async for event in events:
                message = event.message if isinstance(event.message, dict) else {}
                params = message.get("params", {})
                if message.get("method") == "notifications/resources/updated" and params.get("uri") == uri:
                    wanted.discard("update")
                elif message.get("method") == "notifications/message" and params.get("data") == text:
                    wanted.discard("log")
                if not wanted:
                    break
            else:
                raise Failure("listen: the stream ended before the notifications", f"missing {wanted}")
        except BaseException:
            self.listener.close()
            with contextlib.suppress(Exception):
                await self.delete_session(session_id)
            raise
        await self.delete_session(session_id)
        try:
            async for event in events:  # the DELETE ends the stream, in whichever process holds it
                if isinstance(event.message, dict) and "id" in event.message:
                    raise Failure("listen: unexpected message on the GET stream", repr(event.message)[:300])
        except Failure as failure:
            # A drain ended the stream just before the DELETE did: resumed, the session is gone.
            if failure.reason != "GET stream: HTTP 404":
                raise
        await events.aclose()

    async def op_reopen(self) -> None:
        old, self.session_id = self.session_id, None
        await self.delete_session(old)
        answer = await self.main.request("POST", post_headers(old), json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id(), "method": "ping"}).encode())
        if answer.status != 404:
            raise Failure(f"request after DELETE: HTTP {answer.status} (404 expected)",
                          repr(answer.body[:300]))
        self.session_id = await self.open_session()


    async def op_elicit(self) -> None:
        """confirm_action: the server asks the client (elicitation/create on the call's stream);
        the answer, POSTed on another connection, reaches whichever process the proxy picks."""
        action, request_id = f"soak {self.token()}", self.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "confirm_action", "arguments": {"action": action}}}
        status, headers = await self.main.begin("POST", post_headers(self.session_id),
                                                json.dumps(message).encode())
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            raise Failure(f"confirm_action: HTTP {status}", repr((await self.main.body(headers))[:300]))
        asked, replies = 0, []
        async for event in self.main.events(headers, "tools/call"):
            found = event.message if isinstance(event.message, dict) else {}
            if found.get("method") == "elicitation/create" and "id" in found:
                asked += 1
                answer = {"jsonrpc": "2.0", "id": found["id"],
                          "result": {"action": "accept", "content": {"confirm": True, "priority": "high"}}}
                reply = await self.side.request("POST", post_headers(self.session_id),
                                                json.dumps(answer).encode())
                if reply.status != 202:
                    raise Failure(f"elicitation answer: HTTP {reply.status}", repr(reply.body[:300]))
            elif response_to(found, request_id):
                replies.append(found)
        if asked != 1 or len(replies) != 1:
            raise Failure("elicit: wrong exchange", f"{asked} questions, replies {replies!r}"[:300])
        if counted_text(replies[0].get("result")) != f"Done: {action} (priority high)":
            raise Failure("elicit: wrong result", repr(replies[0])[:300])

    async def wait_busy(self, body: bytes) -> None:
        """The wait a refusal asks for (``retryAfter`` in its error's data) before the call is sent again."""
        try:
            delay = float(json.loads(body)["error"]["data"]["retryAfter"])
        except (ValueError, KeyError, TypeError) as exc:
            raise Failure("HTTP 429 without retryAfter", repr(body[:300])) from exc
        self.stats.notes["background call refused (-32600: the client's most queued), sent again"] += 1
        await asyncio.sleep(min(delay, 10.0))

    def worker_death(self, error: Any, started: float) -> Expected | None:
        """The documented end of a background call whose worker the soak killed, if it is one."""
        documented = error in ({"code": INTERNAL_ERROR, "message": WORKER_STOPPED},
                                {"code": INTERNAL_ERROR, "message": REQUEST_STOPPED})
        if documented and self.fleet is not None and self.fleet.killed_during(started, time.monotonic()):
            which = "worker" if error["message"] == WORKER_STOPPED else "web process"
            return Expected(f"worker killed mid-call: -32603, '{which} stopped' (docs/background.md)")
        return None

    async def op_background(self) -> None:
        """count_in_background in a session: run by a Celery worker, its progress and result on the
        POST stream, written by the worker. Refused because the client has the most queued (429,
        or the same JSON-RPC error on the stream), it is sent again after ``retryAfter``."""
        for _attempt in range(BUSY_RETRIES):
            busy = await self._background_once()
            if busy is None:
                return
            await self.wait_busy(json.dumps(busy).encode())
        raise Failure("background: refused as busy too often", f"{BUSY_RETRIES} times")

    async def _background_once(self) -> dict | None:
        count, token, request_id, started = 2, self.token(), self.next_id(), time.monotonic()
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "count_in_background", "arguments": {"to": count},
                              "_meta": {"progressToken": token}}}
        status, headers = await self.main.begin("POST", post_headers(self.session_id),
                                                json.dumps(message).encode())
        if status == 429:
            return json.loads(await self.main.body(headers))
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            raise Failure(f"count_in_background: HTTP {status}", repr((await self.main.body(headers))[:300]))
        messages, last_event_id, hint = [], None, None
        async for event in self.main.events(headers, "tools/call"):
            last_event_id = event.event_id or last_event_id
            hint = event.retry if event.retry is not None else hint
            if event.message is not None:
                messages.append(event.message)
        if not any(response_to(m, request_id) for m in messages) and hint is not None:
            # The web process relaying the worker's messages drained: the stream ended with a
            # retry hint, and the call goes on; resumed elsewhere from the last id.
            if last_event_id is None:
                raise Failure("background: a stream ended with a retry hint but no event id")
            self.stats.notes["background call's stream ended by a draining process, resumed"] += 1
            resumed = self.listening(self.session_id, last_event_id=last_event_id, method="tools/call")
            async for event in resumed:
                if event.message is not None:
                    messages.append(event.message)
        steps = [m["params"].get("progress") for m in messages if is_progress(m, token)]
        replies = [m for m in messages if response_to(m, request_id)]
        if len(replies) != 1:
            raise Failure("background: not one response", f"hint {hint}, last id {last_event_id}, "
                                                           f"{messages[-3:]!r}"[:300])
        if "error" in replies[0]:
            if busy(replies[0]["error"]):
                return replies[0]
            expected = self.worker_death(replies[0]["error"], started)
            if expected is not None:
                raise expected
            raise Failure(f"background: error {replies[0]['error'].get('code')}", repr(replies[0])[:300])
        if steps != list(range(1, count + 1)) or counted_text(replies[0]["result"]) != f"Counted to {count}":
            raise Failure("background: wrong progress or result", f"steps {steps}, {replies[0]!r}"[:300])
        return None

    # The 2026-07-28 era: no session; each request carries its envelope --------------------------
    async def modern(self, method: str, params: dict, capabilities: dict | None = None) -> dict:
        """One 2026-07-28 request on ``main``; its result (a JSON-RPC error is a failure)."""
        for _attempt in range(BUSY_RETRIES):
            request_id = self.next_id()
            message = modern_message(method, request_id, params, capabilities)
            answer = await self.main.request("POST", modern_headers(message), json.dumps(message).encode())
            refused = answer.messages()[-1] if answer.status in (200, 429) and answer.body else {}
            if not (isinstance(refused, dict) and busy(refused.get("error"))):
                break
            await self.wait_busy(answer.body)
        if answer.status != 200 or "mcp-session-id" in answer.headers:
            raise Failure(f"2026-07-28 {method}: HTTP {answer.status}", repr(answer.body[:300]))
        replies = [m for m in messages_of(answer, method, MODERN_VERSION) if response_to(m, request_id)]
        if len(replies) != 1:
            raise Failure(f"2026-07-28 {method}: {len(replies)} responses", repr(answer.body[:300]))
        if "error" in replies[0]:
            raise Failure(f"2026-07-28 {method}: error {replies[0]['error'].get('code')}",
                          repr(replies[0])[:300])
        return replies[0]["result"]

    async def op_modern(self) -> None:
        text = f"modern {self.token()}"
        result = await self.modern("tools/call", {"name": "echo", "arguments": {"message": text}})
        if counted_text(result) != text:
            raise Failure("modern echo: wrong result", repr(result)[:300])
        a, b = self.random.randint(-1000, 1000), self.random.randint(-1000, 1000)
        result = await self.modern("tools/call", {"name": "add", "arguments": {"a": a, "b": b}})
        if result.get("structuredContent") != {"sum": a + b}:
            raise Failure("modern add: wrong result", f"{a} + {b}: {result!r}"[:300])

    async def op_task(self) -> None:
        """count_in_background as a task (the Tasks extension): a handle at once, then tasks/get
        (to whichever process) until it is done; the result comes with the last tasks/get."""
        count, started, capabilities = 2, time.monotonic(), {"extensions": {TASKS: {}}}
        created = await self.modern("tools/call", {"name": "count_in_background", "arguments": {"to": count}},
                                    capabilities)
        if created.get("resultType") != "task" or not created.get("taskId"):
            raise Failure("task: no task handle", repr(created)[:300])
        poll = min(created.get("pollIntervalMs", 500), 2000) / 1000
        status = created
        while status.get("status") in ("working", "input_required"):
            await asyncio.sleep(poll)
            status = await self.modern("tasks/get", {"taskId": created["taskId"]}, capabilities)
        if status.get("status") == "failed":
            expected = self.worker_death(status.get("error"), started)
            if expected is not None:
                raise expected
        if status.get("status") != "completed" or counted_text(status.get("result")) != f"Counted to {count}":
            raise Failure(f"task: {status.get('status')}", repr(status)[:300])

    async def op_modern_listen(self) -> None:
        """subscriptions/listen for a resource URI of its own; the notifier updates it; the update
        must come. A draining process ends the stream with its response and a retry hint: the
        client listens again (elsewhere) and the update is sent again, as listen streams keep no
        history (docs/production.md, "Rolling restarts")."""
        uri = f"demo://users/soak-{self.token()}/profile"
        try:
            for _attempt in range(MAX_RESUMES):
                request_id = self.next_id()
                message = modern_message("subscriptions/listen", request_id, {
                    "notifications": {"resourceSubscriptions": [uri]}}, None)
                status, headers = await self.listener.begin("POST", modern_headers(message),
                                                            json.dumps(message).encode())
                if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
                    raise Failure(f"listen (2026-07-28): HTTP {status}",
                                  repr((await self.listener.body(headers))[:300]))
                events = self.listener.events(headers, "subscriptions/listen", MODERN_VERSION)
                first = await anext(events, None)
                acknowledged = first is not None and isinstance(first.message, dict) and \
                    first.message.get("method") == "notifications/subscriptions/acknowledged"
                if not acknowledged:
                    raise Failure("listen (2026-07-28): no acknowledgement", repr(first)[:300])
                await self.notifier.send("update", uri)
                async for event in events:
                    found = event.message if isinstance(event.message, dict) else {}
                    params = found.get("params", {})
                    if found.get("method") == "notifications/resources/updated" and params.get("uri") == uri:
                        await events.aclose()
                        return  # the client stops listening: it closes the connection (finally)
                    if response_to(found, request_id):
                        break  # ended by a draining process: listen again
                else:
                    raise Failure("listen (2026-07-28): the stream ended with no response")
                self.stats.notes["listen (2026-07-28) ended by a draining process, opened again"] += 1
            raise Failure("listen (2026-07-28): more drains than expected")
        finally:
            self.listener.close()

    # The loop ------------------------------------------------------------------------------
    async def run(self, deadline: float) -> None:
        operations: dict[str, Callable[[], Awaitable[None]]] = {
            "ping": self.op_ping, "tools/list": self.op_tools_list, "call": self.op_call,
            "progress": self.op_progress, "cancel": self.op_cancel, "resume": self.op_resume,
            "listen": self.op_listen, "reopen": self.op_reopen, "elicit": self.op_elicit,
            "background": self.op_background, "modern": self.op_modern, "task": self.op_task,
            "modern listen": self.op_modern_listen,
        }
        kinds = self.args.only or list(MIX)
        weights = [MIX[kind] for kind in kinds]
        try:
            while time.monotonic() < deadline:
                kind = self.random.choices(kinds, weights)[0]
                operation = operations[kind]
                if self.session_id is None and kind in SESSION_KINDS:
                    kind, operation = "open", self._open
                slot = self.background_slots if kind in BACKGROUND_KINDS else contextlib.nullcontext()
                async with slot:  # waiting for a slot is the soak's, not the server's: not timed
                    started = time.monotonic()
                    try:
                        await asyncio.wait_for(operation(), self.args.op_timeout)
                        self.stats.latencies[kind].append(time.monotonic() - started)
                    except Expected as outcome:
                        self.stats.expected[f"{kind}: {outcome.reason}"] += 1
                        self.close_connections()
                    except Exception as exc:  # a broken connection, a malformed answer: counted too
                        self.stats.failed(kind, as_failure(exc, self.args.op_timeout))
                        await self._start_afresh()
                    self.stats.ended(kind, time.monotonic() - started)
        finally:
            self.close_connections()
        if self.session_id is not None:  # on a fresh connection
            try:
                await asyncio.wait_for(self.delete_session(self.session_id), self.args.op_timeout)
            except Exception as exc:
                self.stats.failed("final DELETE", as_failure(exc, self.args.op_timeout))
            self.close_connections()

    async def _open(self) -> None:
        self.session_id = await self.open_session()

    async def _start_afresh(self) -> None:
        """After a failure the connections are in an unknown state, and so is the session: new
        connections, and a new session (the old one is deleted when it still answers, so that
        failures leave no sessions behind to count against the server's limits)."""
        self.close_connections()
        old, self.session_id = self.session_id, None
        if old is None:
            return
        try:
            await asyncio.wait_for(self.delete_session(old), self.args.op_timeout)
        except Exception as exc:  # the failure that led here is counted already
            self.stats.notes[f"session left after a failure ({as_failure(exc, 0).reason})"] += 1
        self.close_connections()


# Processes -------------------------------------------------------------------------------------
def fresh_database(url: str) -> None:
    """Drop and create the soak's database (through the server's ``postgres`` database): every run
    starts with no session left by an earlier one."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name or name == "postgres":
        raise SystemExit(f"bench/soak: --postgres-url must name a database of the soak's own: {url}")
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def flush_redis(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushdb()


class Proxy:
    def __init__(self, upstreams: list[int], log_path: Path):
        self.port = free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, str(ROOT / "conformance" / "proxy.py"), "--host", HOST,
                "--port", str(self.port)]
        for port in upstreams:
            argv += ["--upstream", f"{HOST}:{port}"]
        self.process = subprocess.Popen(argv, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not reachable(f"http://{HOST}:{self.port}", self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the proxy did not start:\n{log_path.read_text()}")
            time.sleep(0.1)

    def stop(self) -> str:
        """Stops it; returns the line it ends with: the requests per upstream."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self._log.close()
        counts = [line for line in self.log_path.read_text().splitlines()
                  if line.startswith("proxy: requests per upstream")]
        return counts[-1] if counts else ""


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(unreadable: {exc})"


def tracebacks(path: Path) -> int:
    try:
        return path.read_text(errors="replace").count("Traceback (most recent call last)")
    except OSError:
        return 0


# Report ----------------------------------------------------------------------------------------
def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(stats: Stats, fleet: Fleet, elapsed: float, args: argparse.Namespace,
           proxy_line: str) -> list[str]:
    lines = [f"Soak of {time.strftime('%Y-%m-%d %H:%M')} UTC: {PROCESSES} daphne processes behind "
             f"the round-robin proxy, {len(fleet.workers)} Celery workers, {args.workers} client tasks, "
             f"{elapsed:.0f} s of traffic, {os.cpu_count()} cores; a web process restarted every "
             f"{args.restart_period:g} s ({fleet.restarts} restarts), a worker killed every "
             f"{args.kill_period:g} s ({len(fleet.kills)} kills).",
             "", "| operation | result | expected error | failure | p50 ms | p99 ms | longest ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    errors_by_kind: Counter = Counter()
    for key, count in stats.errors.items():
        errors_by_kind[key.split(": ", 1)[0]] += count
    expected_by_kind: Counter = Counter()
    for key, count in stats.expected.items():
        expected_by_kind[key.split(": ", 1)[0]] += count
    for kind in ["open", *MIX, "final DELETE", "server", "fleet"]:
        done = stats.latencies.get(kind, [])
        if not done and not errors_by_kind[kind] and not expected_by_kind[kind]:
            continue
        p50 = f"{percentile(done, 0.5) * 1000:,.0f}" if done else ""
        p99 = f"{percentile(done, 0.99) * 1000:,.0f}" if done else ""
        longest = f"{max(done) * 1000:,.0f}" if done else ""
        lines.append(f"| {kind} | {len(done):,} | {expected_by_kind[kind]} | {errors_by_kind[kind]} | "
                     f"{p50} | {p99} | {longest} |")
    total = sum(len(v) for v in stats.latencies.values())
    lines.append(f"| all | {total:,} | {sum(stats.expected.values())} | {sum(stats.errors.values())} | | | |")
    lines += ["", f"Longest wait for any operation to end: {stats.longest[0]:.1f} s "
                  f"({stats.longest[1] or '-'}; "
                  f"bound {args.op_timeout:g} s)"]
    lines += ["", "What the fleet went through:", *fleet.incident_lines()]
    lines += ["", *fleet.memory_rows()]
    if proxy_line:
        lines += ["", proxy_line]
    if stats.notes:
        lines += [""] + [f"Note: {note}: {count}" for note, count in sorted(stats.notes.items())]
    if stats.expected:
        lines += ["", "Expected errors:"]
        lines += [f"- {key}: {count}" for key, count in stats.expected.most_common()]
    if stats.errors:
        lines += ["", "Failures by kind:"]
        for key, count in stats.errors.most_common():
            lines.append(f"- {key}: {count}")
            lines += [f"    e.g. {example}" for example in stats.examples[key]]
    return lines


# Main ------------------------------------------------------------------------------------------
async def drive(args: argparse.Namespace, proxy_port: int, fleet: Fleet, notifier: Notifier,
                stats: Stats) -> float:
    """Run the workers for the duration, the restarts and kills meanwhile, sampling memory;
    returns the elapsed time."""
    started = time.monotonic()
    deadline = started + args.duration
    workers = [Worker(index, proxy_port, notifier, stats, args, fleet) for index in range(args.workers)]
    slots = asyncio.Semaphore(args.background_calls)
    for worker in workers:
        worker.background_slots = slots
    tasks = [asyncio.create_task(worker.run(deadline)) for worker in workers]
    disorder = asyncio.create_task(chaos(fleet, deadline, args.restart_period, args.kill_period))
    interval = min(10.0, args.duration / 20)
    while not all(task.done() for task in tasks):
        await asyncio.wait(tasks, timeout=interval)
        fleet.sample()
    for task in tasks:
        task.result()  # a bug in the soak itself surfaces here
    try:
        await disorder
    except Exception as exc:  # a process that would not start again
        stats.failed("fleet", Failure("restart or kill failed", repr(exc)[:300]))
    fleet.sample()
    return time.monotonic() - started


def default_broker(redis_url: str) -> str:
    """The Redis database after the soak's own, as the Celery broker."""
    parts = urlsplit(redis_url)
    index = int(parts.path.lstrip("/") or 0)
    return urlunsplit((parts.scheme, parts.netloc, f"/{index + 1}", parts.query, ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (600)")
    parser.add_argument("--workers", type=int, default=16, help="concurrent client tasks (16)")
    parser.add_argument("--op-timeout", type=float, default=60.0,
                        help="seconds an operation may take before it counts as an error (60)")
    parser.add_argument("--restart-period", type=float, default=90.0,
                        help="seconds between two web process restarts, each process in turn; 0: none (90)")
    parser.add_argument("--kill-period", type=float, default=120.0,
                        help="seconds between two SIGKILLs of a Celery worker, each in turn; 0: none (120)")
    parser.add_argument("--celery-workers", type=int, default=2, help="Celery worker processes (2)")
    parser.add_argument("--background-calls", type=int, default=6,
                        help="background calls and tasks in flight at once over all client tasks, which "
                             "the server sees as one principal (at most 10 queued by default) (6)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds after its start before a process's memory is sampled "
                             "(10%% of the duration, at most 60)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mix (1)")
    parser.add_argument("--only", nargs="+", choices=list(MIX), metavar="KIND",
                        help=f"only these operations (to reproduce a failure): {', '.join(MIX)}")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES,
                        help="a database of the soak's own, dropped and created afresh (mcp_soak)")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS,
                        help="a Redis database the run flushes (index 7 of the local Redis)")
    parser.add_argument("--broker-url", default=None,
                        help="the Celery broker, a Redis database the run flushes "
                             "(the one after --redis-url)")
    parser.add_argument("--no-flush", action="store_true",
                        help="leave both Redis databases as they are (the caller emptied them)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server logs)")
    parser.add_argument("--notifier", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.notifier:
        asyncio.run(notifier_main())
        return 0
    if args.duration <= 0 or args.workers < 1 or args.op_timeout <= 0 or args.celery_workers < 1 \
            or args.background_calls < 1:
        parser.error("--duration, --workers, --op-timeout, --celery-workers and --background-calls "
                     "must be positive")
    if args.restart_period < 0 or args.kill_period < 0:
        parser.error("--restart-period and --kill-period must be 0 (none) or positive")
    warmup = args.warmup if args.warmup is not None else min(60.0, args.duration / 10)
    broker = args.broker_url or default_broker(args.redis_url)
    for url, port in ((args.postgres_url, 5432), (args.redis_url, 6379), (broker, 6379)):
        if not reachable(url, port):
            print(f"bench/soak: {url} is unreachable", file=sys.stderr)
            return 2

    fresh_database(args.postgres_url)
    if not args.no_flush:
        flush_redis(args.redis_url)
        flush_redis(broker)
    workdir = Path(tempfile.mkdtemp(prefix="mcp-soak-"))
    # A machine of the benchmark's own: the demo's development key is fine there. The web
    # processes and the workers share every setting (the broker, so that background tools run on
    # the workers).
    settings = {"DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0", "DJANGO_DEVELOPMENT": "1",
                "DATABASE_URL": args.postgres_url, "REDIS_URL": args.redis_url, "CELERY_BROKER_URL": broker,
                "MCP_MAX_SESSIONS_PER_PRINCIPAL": "none"}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **settings}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                   check=True)
    daphne = [sys.executable, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}",
              "project.asgi:application"]
    fleet = Fleet(workdir, env, daphne, settings, warmup)
    proxy: Proxy | None = None
    stats = Stats()
    proxy_line = ""
    try:
        fleet.start_web(PROCESSES)
        fleet.start_workers(args.celery_workers)
        proxy = Proxy(fleet.web_ports(), workdir / "proxy.log")
        notifier = Notifier(env, workdir / "notifier.log")
        print(f"bench/soak: {PROCESSES} daphne processes (ports {fleet.web_ports()}), {args.celery_workers} "
              f"Celery workers, proxy on {HOST}:{proxy.port}, {args.workers} client tasks for "
              f"{args.duration:g} s; logs in {workdir}", file=sys.stderr)

        async def run() -> float:
            await notifier.start()
            try:
                return await drive(args, proxy.port, fleet, notifier, stats)
            finally:
                await notifier.stop()

        elapsed = asyncio.run(run())
        for problem in fleet.problems:
            stats.failed("fleet", Failure("a process would not stop or start", problem))
        for death in fleet.died():
            stats.failed("server", Failure("process died", death))
        for path in fleet.logs():
            found = tracebacks(path)
            if found:
                stats.failed("server", Failure("traceback in the log", f"{path.name}: {found}"))
                stats.errors["server: traceback in the log"] += found - 1
        proxy_line = proxy.stop()
        proxy = None
        lines = report(stats, fleet, elapsed, args, proxy_line)
        flat, verdict = fleet.memory_verdict()
        if not flat:
            stats.failed("memory", Failure("RSS out of bounds", verdict))
        lines += ["", f"outcomes: {sum(len(v) for v in stats.latencies.values())} results, "
                      f"{sum(stats.expected.values())} expected errors, "
                      f"{sum(stats.errors.values())} failures "
                      f"(target 0)", verdict]
        print("\n".join(lines))
        if stats.errors:
            for path in [*fleet.logs(), workdir / "notifier.log", workdir / "proxy.log"]:
                print(f"\n--- tail of {path.name} ---\n{tail(path)}", file=sys.stderr)
        return 1 if stats.errors else 0
    finally:
        if proxy is not None:
            proxy.stop()
        fleet.stop()
        if args.keep or stats.errors:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            for path in workdir.iterdir():
                path.unlink()
            workdir.rmdir()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
