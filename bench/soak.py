#!/usr/bin/env python3
"""Soak of the multi-process core: mixed traffic over 4 daphne processes behind a round-robin proxy.

    bench/soak                                  # 10 minutes; prints the report, exit 1 on any error
    bench/soak --duration 60 --redis-url redis://127.0.0.1:6380/7

It starts four daphne processes of the demo project on PostgreSQL (``--postgres-url``, a database
of the soak's own, dropped and created afresh) and Redis (``--redis-url``, a database index the
run flushes first), the round-robin proxy of ``conformance/proxy.py`` in front of them (every
HTTP request goes to the next process, so every session is served by all four), and a notifier
process (the demo project, no HTTP) that sends resource updates and log broadcasts on demand, as a
cron job or the admin would. Then ``--workers`` client tasks loop, until ``--duration`` is over, over
a weighted mix of operations, each checked:

- ``ping``, ``tools/list``, ``call`` (echo and add): the right result;
- ``progress``: slow_count with a progress token, progress 1..n in order, then the result;
- ``cancel``: slow_count cancelled (``notifications/cancelled``, POSTed on another connection, so
  to another process) half way: its stream ends and no response ever comes for it;
- ``resume``: slow_count whose POST stream is dropped half way, resumed with a GET and
  ``Last-Event-ID``: every progress exactly once across the two streams, and the result at the end;
- ``listen``: a new session subscribes to a resource URI of its own and opens its GET stream; the
  notifier sends an update of that URI and a log message to every session; both must arrive on the
  stream, and a DELETE of the session must end it;
- ``reopen``: DELETE of the worker's session (after which it is unknown: 404), and a new one.

Every message the server sends is checked against the JSON schema of its revision (as the tests
do, ``tests/wire.py``). Every operation has a deadline (``--op-timeout``), and so has the run.
Each daphne process's resident memory (VmRSS) is read after a warm-up (10 % of the duration, at
most 60 s), every tenth of the run, and at the end. The report: operations by kind (count,
errors, p50/p99 latency), errors by kind with examples, and RSS per process (target: within 10 %).
A traceback in a server's log counts as an error. The exit status is 1 when there was any error,
with the tail of every server's log. ``--only resume`` (say) runs one kind of operation, to
reproduce a failure. Network traffic goes to 127.0.0.1 only.
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
from rawhttp import INITIALIZE, INITIALIZED, PROTOCOL_VERSION, post_headers  # noqa: E402
from run import HOST, Config, Server, free_port, reachable  # noqa: E402

from tests.wire import WireError, check_server_message  # noqa: E402

PROCESSES = 4
DEFAULT_POSTGRES = os.environ.get("SOAK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/mcp_soak")
DEFAULT_REDIS = os.environ.get("SOAK_REDIS_URL", "redis://127.0.0.1:6379/7")
EXPECTED_TOOLS = {"echo", "add", "slow_count", "confirm_action"}
# Weights of the mix: cheap requests most, the streaming operations often enough to matter.
MIX = {"ping": 3, "tools/list": 2, "call": 3, "progress": 3, "cancel": 2, "resume": 2, "listen": 1,
       "reopen": 1}
RSS_TARGET = 0.10  # the growth from warm-up to end that the report calls flat
LOG_TAIL_LINES = 40
MAX_CHUNKS_PER_STREAM = 10_000  # far more than any operation's stream carries


class Failure(Exception):
    """A check that did not hold: ``reason`` is short and stable (it is counted), ``detail`` is not."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# HTTP ------------------------------------------------------------------------------------------
@dataclass
class Event:
    event_id: str | None
    message: Any  # the decoded ``data:`` JSON, None for an event with no data (a priming id)


def checked(message: Any, method: str | None = None) -> Any:
    """``message`` once it is valid against the schema of its revision (``method``: the request
    it answers, whose result type is then checked too)."""
    try:
        check_server_message(message, PROTOCOL_VERSION, method)
    except (WireError, KeyError, TypeError) as exc:
        raise Failure("a message not valid against the schema", str(exc)[:600]) from None
    return message


def messages_of(answer: rawhttp.Response, method: str) -> list[Any]:
    """The checked messages of a whole response to a ``method`` request."""
    return [checked(m, method if isinstance(m, dict) and "method" not in m else None)
            for m in answer.messages()]


class Connection(rawhttp.Connection):
    """A keep-alive connection that can also read a response as it streams (SSE)."""

    async def begin(self, method: str, headers: dict[str, str],
                    body: bytes = b"") -> tuple[int, dict[str, str]]:
        """Send a request; read only the head of the response (its body is read by ``events``)."""
        if self.writer is None:
            await self.open()
        self.writer.write(self._head(method, headers, body))
        return await self.read_head()

    async def body(self, headers: dict[str, str]) -> bytes:
        data = await self._read_body(headers)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return data

    async def events(self, headers: dict[str, str], method: str | None = None) -> AsyncIterator[Event]:
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
                        checked(event.message, method if responds else None)
                    yield event
        else:
            raise Failure("endless stream", f"more than {MAX_CHUNKS_PER_STREAM} chunks")
        if headers.get("connection", "").lower() == "close":
            self.close()


def parse_event(block: bytes) -> Event | None:
    """One SSE event; None for a comment (``: keepalive``)."""
    event_id, data, any_field = None, [], False
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
    if not any_field:
        return None
    text = "\n".join(data)
    return Event(event_id, json.loads(text) if text.strip() else None)


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

    def failed(self, kind: str, failure: Failure) -> None:
        key = f"{kind}: {failure.reason}"
        self.errors[key] += 1
        example = failure.detail or failure.reason
        if len(self.examples[key]) < 3 and example not in self.examples[key]:
            self.examples[key].append(example)


class Worker:
    def __init__(self, index: int, port: int, notifier: Notifier, stats: Stats, args: argparse.Namespace):
        self.index, self.port, self.notifier, self.stats, self.args = index, port, notifier, stats, args
        self.random = random.Random(args.seed * 1000 + index)
        self.main = Connection(HOST, port)      # requests, and the streams of calls
        self.side = Connection(HOST, port)      # what is sent while ``main`` streams (cancel)
        self.listener = Connection(HOST, port)  # GET streams
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
        answer = await self.main.request("POST", post_headers(), json.dumps(INITIALIZE).encode())
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

    async def resume(self, last_event_id: str, token: str, request_id: int) -> tuple[list[int], list[dict]]:
        """GET with ``Last-Event-ID`` to its end: the progress steps and the responses on it."""
        headers = await self.open_listener(self.session_id, last_event_id)
        steps, replies = [], []
        async for event in self.listener.events(headers, "tools/call"):
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
            events = self.listener.events(headers)
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
        async for event in events:  # the DELETE ends the stream, in whichever process holds it
            if isinstance(event.message, dict) and "id" in event.message:
                raise Failure("listen: unexpected message on the GET stream", repr(event.message)[:300])
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

    # The loop ------------------------------------------------------------------------------
    async def run(self, deadline: float) -> None:
        operations: dict[str, Callable[[], Awaitable[None]]] = {
            "ping": self.op_ping, "tools/list": self.op_tools_list, "call": self.op_call,
            "progress": self.op_progress, "cancel": self.op_cancel, "resume": self.op_resume,
            "listen": self.op_listen, "reopen": self.op_reopen,
        }
        kinds = self.args.only or list(MIX)
        weights = [MIX[kind] for kind in kinds]
        try:
            while time.monotonic() < deadline:
                if self.session_id is None:
                    kind, operation = "open", self._open
                else:
                    kind = self.random.choices(kinds, weights)[0]
                    operation = operations[kind]
                started = time.monotonic()
                try:
                    await asyncio.wait_for(operation(), self.args.op_timeout)
                    self.stats.latencies[kind].append(time.monotonic() - started)
                except Exception as exc:  # a broken connection, a malformed answer: counted too
                    self.stats.failed(kind, as_failure(exc, self.args.op_timeout))
                    await self._start_afresh()
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


class Memory:
    """VmRSS samples of each daphne process; a process that died has no more samples."""

    def __init__(self, servers: list[Server]):
        self.servers = servers
        self.samples: dict[int, list[int]] = {server.pid: [] for server in servers}

    def sample(self) -> None:
        for server in self.servers:
            if server.process.poll() is None:
                self.samples[server.pid].append(server.rss_bytes())

    def change(self, server: Server) -> float | None:
        found = self.samples[server.pid]
        return (found[-1] - found[0]) / found[0] if found else None

    def rows(self) -> list[str]:
        lines = ["| daphne process | RSS after warm-up MiB | RSS at end MiB | change | peak sampled MiB |",
                 "|---|---:|---:|---:|---:|"]
        for index, server in enumerate(self.servers, 1):
            found = self.samples[server.pid]
            alive = server.process.poll() is None
            end = f"{found[-1] / 2**20:.1f}" if alive and found else "(died)"
            change = f"{self.change(server):+.1%}" if alive and found else ""
            start = f"{found[0] / 2**20:.1f}" if found else ""
            peak = f"{max(found) / 2**20:.1f}" if found else ""
            lines.append(f"| {index} (pid {server.pid}) | {start} | {end} | {change} | {peak} |")
        return lines

    def verdict(self) -> str:
        grown = [f"process {index} {self.change(server):+.1%}" for index, server in enumerate(self.servers, 1)
                 if (self.change(server) or 0.0) > RSS_TARGET]
        if grown:
            return f"RSS: grew more than {RSS_TARGET:.0%}: {', '.join(grown)}"
        return f"RSS: flat within {RSS_TARGET:.0%} in every process"


def report(stats: Stats, memory: Memory, elapsed: float, args: argparse.Namespace,
           proxy_line: str) -> list[str]:
    lines = [f"Soak of {time.strftime('%Y-%m-%d %H:%M')} UTC: {len(memory.servers)} daphne processes behind "
             f"the round-robin proxy, {args.workers} workers, {elapsed:.0f} s of traffic, "
             f"{os.cpu_count()} cores.",
             "", "| operation | done | errors | p50 ms | p99 ms |", "|---|---:|---:|---:|---:|"]
    errors_by_kind: Counter = Counter()
    for key, count in stats.errors.items():
        errors_by_kind[key.split(": ", 1)[0]] += count
    for kind in ["open", *MIX, "final DELETE"]:
        done = stats.latencies.get(kind, [])
        if not done and not errors_by_kind[kind]:
            continue
        p50 = f"{percentile(done, 0.5) * 1000:,.0f}" if done else ""
        p99 = f"{percentile(done, 0.99) * 1000:,.0f}" if done else ""
        lines.append(f"| {kind} | {len(done):,} | {errors_by_kind[kind]} | {p50} | {p99} |")
    total = sum(len(v) for v in stats.latencies.values())
    lines.append(f"| all | {total:,} | {sum(stats.errors.values())} | | |")
    lines += ["", *memory.rows()]
    if proxy_line:
        lines += ["", proxy_line]
    if stats.notes:
        lines += [""] + [f"Note: {note}: {count}" for note, count in stats.notes.items()]
    if stats.errors:
        lines += ["", "Errors by kind:"]
        for key, count in stats.errors.most_common():
            lines.append(f"- {key}: {count}")
            lines += [f"    e.g. {example}" for example in stats.examples[key]]
    return lines


# Main ------------------------------------------------------------------------------------------
async def drive(args: argparse.Namespace, proxy_port: int, memory: Memory, notifier: Notifier,
                stats: Stats) -> float:
    """Run the workers for the duration, sampling memory; returns the elapsed time."""
    started = time.monotonic()
    deadline = started + args.duration
    workers = [Worker(index, proxy_port, notifier, stats, args) for index in range(args.workers)]
    tasks = [asyncio.create_task(worker.run(deadline)) for worker in workers]
    warmup = min(60.0, args.duration / 10)
    interval = args.duration / 10
    next_sample = started + warmup
    while next_sample < deadline and not all(task.done() for task in tasks):
        await asyncio.wait(tasks, timeout=max(0.0, next_sample - time.monotonic()))
        if time.monotonic() >= next_sample:
            memory.sample()
            next_sample += interval
    await asyncio.wait(tasks)  # the operations under way at the deadline finish (each bounded)
    for task in tasks:
        task.result()  # a bug in the soak itself surfaces here
    memory.sample()
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (600)")
    parser.add_argument("--workers", type=int, default=16, help="concurrent client tasks (16)")
    parser.add_argument("--op-timeout", type=float, default=60.0,
                        help="seconds an operation may take before it counts as an error (60)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the mix (1)")
    parser.add_argument("--only", nargs="+", choices=list(MIX), metavar="KIND",
                        help=f"only these operations (to reproduce a failure): {', '.join(MIX)}")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES,
                        help="a database of the soak's own, dropped and created afresh (mcp_soak)")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS,
                        help="a Redis database the run flushes (index 7 of the local Redis)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server logs)")
    parser.add_argument("--notifier", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.notifier:
        asyncio.run(notifier_main())
        return 0
    if args.duration <= 0 or args.workers < 1 or args.op_timeout <= 0:
        parser.error("--duration, --workers and --op-timeout must be positive")
    for url, port in ((args.postgres_url, 5432), (args.redis_url, 6379)):
        if not reachable(url, port):
            print(f"bench/soak: {url} is unreachable", file=sys.stderr)
            return 2

    fresh_database(args.postgres_url)
    flush_redis(args.redis_url)
    workdir = Path(tempfile.mkdtemp(prefix="mcp-soak-"))
    # A machine of the benchmark's own: the demo's development key is fine there.
    settings = {"DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0", "DJANGO_DEVELOPMENT": "1",
                "DATABASE_URL": args.postgres_url, "REDIS_URL": args.redis_url}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **settings}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                   check=True)
    daphne = [sys.executable, "-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}",
              "project.asgi:application"]
    servers: list[Server] = []
    proxy: Proxy | None = None
    stats = Stats()
    proxy_line = ""
    try:
        for index in range(1, PROCESSES + 1):
            config = Config(f"daphne-{index}", f"daphne {index}", "ours", "stateful", daphne, settings)
            servers.append(Server(config, workdir))
        proxy = Proxy([server.port for server in servers], workdir / "proxy.log")
        notifier = Notifier(env, workdir / "notifier.log")
        print(f"bench/soak: {PROCESSES} daphne processes (pids {', '.join(str(s.pid) for s in servers)}), "
              f"proxy on {HOST}:{proxy.port}, {args.workers} workers for {args.duration:g} s; "
              f"logs in {workdir}", file=sys.stderr)

        memory = Memory(servers)

        async def run() -> float:
            await notifier.start()
            try:
                return await drive(args, proxy.port, memory, notifier, stats)
            finally:
                await notifier.stop()

        elapsed = asyncio.run(run())
        dead = [s for s in servers if s.process.poll() is not None]
        for server in dead:
            stats.failed("server", Failure("process died",
                                           f"{server.config.label}: exit {server.process.returncode}"))
        for server in servers:
            found = tracebacks(server.log_path)
            if found:
                stats.failed("server", Failure("traceback in the log", f"{server.config.label}: {found}"))
                stats.errors["server: traceback in the log"] += found - 1
        proxy_line = proxy.stop()
        proxy = None
        lines = report(stats, memory, elapsed, args, proxy_line)
        lines += ["", f"errors: {sum(stats.errors.values())} (target 0)", memory.verdict()]
        print("\n".join(lines))
        if stats.errors:
            for path in [s.log_path for s in servers] + [workdir / "notifier.log", workdir / "proxy.log"]:
                print(f"\n--- tail of {path.name} ---\n{tail(path)}", file=sys.stderr)
        return 1 if stats.errors else 0
    finally:
        if proxy is not None:
            proxy.stop()
        for server in servers:
            server.stop()
        if args.keep or stats.errors:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            for path in workdir.iterdir():
                path.unlink()
            workdir.rmdir()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
