"""An in-process client peer for tests of a server that talks back while a request runs.

``Peer(server)`` owns a :class:`ServerSession` whose ``outbound`` is the peer itself: every message
the server sends is checked against the negotiated revision's schema and recorded with the client
request it belongs to (``related_request_id``, SEP-2260). Server-to-client requests are answered
from a script (a result, an error, a function of the params, after a delay, or never) by feeding
the JSON-RPC response back through ``server.handle_async(response, session)``, as a transport
would. Client requests run concurrently as asyncio tasks; every message the peer builds is checked
with :func:`tests.wire.check_client_message` unless a test sends deliberately bad input. Every wait
is bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_server import Server, ServerSession

from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

CLIENT_INFO = {"name": "peer", "version": "1.0.0"}
WAIT = PATIENCE  # seconds any single wait may take before the test fails


@dataclass
class Sent:
    """One message the server sent, and the client request it said it belongs to."""

    message: dict
    related_request_id: Any = None

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    @property
    def is_request(self) -> bool:
        return "method" in self.message and "id" in self.message

    @property
    def params(self) -> dict:
        return self.message.get("params") or {}


@dataclass
class Script:
    """How the peer answers one server-to-client method."""

    result: Any = None
    error: dict | None = None
    respond: Callable[[dict], Any] | None = None  # params -> result (raise to answer nothing)
    delay: float = 0.0
    check: bool = True  # False for a deliberately malformed answer
    answered: list[dict] = field(default_factory=list)  # the requests it answered


class Peer:
    """A client on one in-process session of ``server`` (see the module docstring)."""

    def __init__(self, server: Server, revision: str = "2025-11-25", *,
                 request_timeout: float | None = 600.0):
        self.server = server
        self.revision = revision
        self.session = ServerSession(server, outbound=self, request_timeout=request_timeout)
        self.sent: list[Sent] = []
        self.replies: list[dict] = []  # the responses this peer sent to server requests
        self.violations: list[AssertionError] = []  # messages from the server that broke the schema
        # Set to False to make the transport report non-delivery, or to an exception to raise it.
        self.deliver: bool = True
        self.fail_with: BaseException | None = None
        self._scripts: dict[str, Script] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._loop_thread = threading.get_ident()

    # The transport side: what the server calls ---------------------------------------------------
    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        # The server writes only from its event loop (blocking callers hop onto it).
        assert threading.get_ident() == self._loop_thread, "server sent from outside the event loop"
        if self.fail_with is not None:
            raise self.fail_with
        if not self.deliver:
            return False
        try:
            check_server_message(message, self.revision)
        except AssertionError as exc:
            # Kept, as the server may swallow a failed send; every request() then fails on it.
            self.violations.append(exc)
            raise
        sent = Sent(message, related_request_id)
        self.sent.append(sent)
        self._changed.set()
        script = self._scripts.get(sent.method) if sent.is_request else None
        if script is not None:
            self._spawn(self._answer(sent, script))
        return True

    # Scripting answers to server-to-client requests ----------------------------------------------
    def answer(self, method: str, result: Any = None, *, error: dict | None = None,
               respond: Callable[[dict], Any] | None = None, delay: float = 0.0,
               check: bool = True) -> Script:
        """Answer every ``method`` request from now on; unscripted requests are never answered."""
        script = Script(result=result, error=error, respond=respond, delay=delay, check=check)
        self._scripts[method] = script
        return script

    def never_answer(self, method: str) -> None:
        self._scripts.pop(method, None)

    async def _answer(self, sent: Sent, script: Script) -> None:
        if script.delay:
            await asyncio.sleep(script.delay)
        request_id = sent.message["id"]
        if script.error is not None:
            await self.respond(request_id, error=script.error, check=script.check)
        else:
            result = script.respond(sent.params) if script.respond is not None else script.result
            await self.respond(request_id, result=result, check=script.check)
        script.answered.append(sent.message)

    async def respond(self, request_id: Any, result: Any = None, *, error: dict | None = None,
                      check: bool = True) -> None:
        """Send the client's response to a server request, as a transport hands it over."""
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            response["error"] = error
        else:
            response["result"] = result
        if check:
            check_client_message(response, self.revision)
        self.replies.append(response)
        answer = await asyncio.wait_for(self.server.handle_async(response, self.session), WAIT)
        assert answer is None, f"a response must get no reply, got {answer!r}"

    # The client side: requests and notifications to the server -----------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def build(self, method: str, params: dict | None = None, *, request_id: Any = None) -> dict:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id if request_id is not None
                                   else self.next_id(), "method": method}
        if params is not None:
            message["params"] = params
        return message

    async def request(self, method: str, params: dict | None = None, *, request_id: Any = None,
                      timeout: float = WAIT) -> dict | None:
        """Send a request and return the server's response (None when it sends none)."""
        message = self.build(method, params, request_id=request_id)
        check_client_message(message, self.revision)
        answer = await asyncio.wait_for(self.server.handle_async(message, self.session), timeout)
        assert not self.violations, f"the server sent invalid messages: {self.violations}"
        if answer is not None:
            assert answer.get("id") == message["id"], answer
            check_server_message(answer, self.revision, method)
        return answer

    def start(self, method: str, params: dict | None = None, *, request_id: Any = None,
              timeout: float = WAIT) -> asyncio.Task:
        """The same request running concurrently: a task whose result is the response."""
        return self._spawn(self.request(method, params, request_id=request_id, timeout=timeout))

    async def result(self, method: str, params: dict | None = None) -> Any:
        response = await self.request(method, params)
        assert response is not None and "result" in response, response
        return response["result"]

    def tool_params(self, name: str, arguments: dict | None = None, *,
                    meta: dict | None = None) -> dict:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta is not None:
            params["_meta"] = meta
        return params

    async def call_tool(self, name: str, arguments: dict | None = None, *, meta: dict | None = None,
                        request_id: Any = None, timeout: float = WAIT) -> dict | None:
        return await self.request("tools/call", self.tool_params(name, arguments, meta=meta),
                                  request_id=request_id, timeout=timeout)

    def start_tool(self, name: str, arguments: dict | None = None, *, meta: dict | None = None,
                   request_id: Any = None, timeout: float = WAIT) -> asyncio.Task:
        return self.start("tools/call", self.tool_params(name, arguments, meta=meta),
                          request_id=request_id, timeout=timeout)

    async def notify(self, method: str, params: dict | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        check_client_message(message, self.revision)
        answer = await asyncio.wait_for(self.server.handle_async(message, self.session), WAIT)
        assert answer is None, f"a notification must get no reply, got {answer!r}"

    async def cancel(self, request_id: Any, reason: str | None = None) -> None:
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        await self.notify("notifications/cancelled", params)

    async def initialize(self, capabilities: dict | None = None,
                         protocol_version: str | None = None) -> dict:
        result = await self.result("initialize", {
            "protocolVersion": protocol_version or self.revision,
            "capabilities": capabilities or {},
            "clientInfo": CLIENT_INFO,
        })
        self.revision = result["protocolVersion"]
        await self.notify("notifications/initialized")
        return result

    async def set_level(self, level: str) -> None:
        assert await self.result("logging/setLevel", {"level": level}) == {}

    # Reading what the server sent -----------------------------------------------------------------
    def requests(self, method: str | None = None) -> list[Sent]:
        return [s for s in self.sent if s.is_request and method in (None, s.method)]

    def notifications(self, method: str | None = None) -> list[Sent]:
        return [s for s in self.sent if "id" not in s.message and method in (None, s.method)]

    async def wait_for(self, predicate: Callable[[Sent], bool] | str,
                       timeout: float = WAIT) -> Sent:
        """The first message sent that matches (a method name, or a predicate on ``Sent``)."""
        if isinstance(predicate, str):
            method = predicate
            predicate = lambda sent: sent.method == method  # noqa: E731

        async def first() -> Sent:
            while True:
                assert not self.violations, f"the server sent invalid messages: {self.violations}"
                for sent in self.sent:
                    if predicate(sent):
                        return sent
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(first(), timeout)

    async def wait_for_request(self, method: str, timeout: float = WAIT) -> Sent:
        return await self.wait_for(lambda s: s.is_request and s.method == method, timeout)

    # Housekeeping ------------------------------------------------------------------------------------
    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def settle(self, timeout: float = WAIT) -> None:
        """Wait for the peer's own pending answers and requests to finish."""
        if self._tasks:
            await asyncio.wait_for(asyncio.gather(*list(self._tasks), return_exceptions=True), timeout)


async def connected(server: Server, revision: str = "2025-11-25", capabilities: dict | None = None,
                    *, request_timeout: float | None = 600.0, level: str | None = None) -> Peer:
    """A peer that has completed the handshake (and set a log level, if given)."""
    peer = Peer(server, revision, request_timeout=request_timeout)
    await peer.initialize(capabilities)
    if level is not None:
        await peer.set_level(level)
    return peer
