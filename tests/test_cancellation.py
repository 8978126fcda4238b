"""Cancellation of requests in flight: ``notifications/cancelled``, cooperative checks, suppressed
responses, ``initialize``, and cancellation of a request that waits on the client (nested).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mcp_protocol import CancelledError, MCPError
from mcp_server import Configuration, Server, ServerContext

from .peer import WAIT, Peer, connected

REVISIONS = ["2025-11-25", "2024-11-05"]
CLIENT_CAPABILITIES = {"roots": {}, "sampling": {}, "elicitation": {}}


class Started:
    """Set from any thread (a plain ``def`` handler runs on a worker), awaited in the test."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    async def wait(self) -> None:
        deadline = asyncio.get_running_loop().time() + WAIT
        while not self._event.is_set():
            assert asyncio.get_running_loop().time() < deadline, "the handler never started"
            await asyncio.sleep(0.005)


async def until_cancelled(ctx: ServerContext) -> None:
    """Poll the token, as a long async handler does between steps; bounded."""
    for _ in range(int(WAIT / 0.005)):
        if ctx.cancelled():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never cancelled")


# CAN-01 -------------------------------------------------------------------------------------------

@pytest.mark.feature("CAN-01", "CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("request_id", [5, "call-5"])
async def test_cancelled_notification_flips_the_token_of_the_request(revision, request_id):
    server = Server("cancel")
    started = Started()
    seen: list[tuple[bool, Any, str | None]] = []

    @server.tool
    async def slow(server_context: ServerContext) -> str:
        started.set()
        await until_cancelled(server_context)
        token = server_context.cancellation
        seen.append((server_context.cancelled(), token.request_id, token.reason))
        return "stopped early"  # returned, yet never sent

    peer = await connected(server, revision)
    task = peer.start_tool("slow", request_id=request_id)
    await started.wait()
    await peer.cancel(request_id, "user pressed stop")
    assert await asyncio.wait_for(task, WAIT) is None
    assert seen == [(True, request_id, "user pressed stop")]
    assert peer.sent == [] and peer.session.in_flight == {}


@pytest.mark.feature("CAN-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_unknown_request_ids_are_ignored_silently(revision):
    server = Server("cancel")
    release = asyncio.Event()
    started = Started()

    @server.tool
    async def wait_for_release(server_context: ServerContext) -> str:
        started.set()
        await asyncio.wait_for(release.wait(), WAIT)
        return "cancelled" if server_context.cancelled() else "completed"

    peer = await connected(server, revision)
    release.set()
    finished = await peer.call_tool("wait_for_release", request_id=3)
    assert finished["result"]["content"] == [{"type": "text", "text": "completed"}]
    release.clear()
    started.clear()

    task = peer.start_tool("wait_for_release", request_id=4)
    await started.wait()
    await peer.cancel(999, "no such request")  # never sent
    await peer.cancel(3)  # already answered
    await peer.cancel("4")  # another id: a string is not the number
    release.set()
    response = await asyncio.wait_for(task, WAIT)
    assert response["result"]["content"] == [{"type": "text", "text": "completed"}]
    assert peer.sent == []


# CAN-02 -------------------------------------------------------------------------------------------

def cooperative_server(observed: list[tuple[str, Any, str | None]], started: Started) -> Server:
    """One handler of each kind that waits for cancellation, then raises at a safe point."""
    server = Server("cancel", capabilities={
        "tools": {}, "prompts": {}, "resources": {"subscribe": True}, "completions": {}})

    async def watch(kind: str, ctx: ServerContext) -> None:
        started.set()
        await until_cancelled(ctx)
        try:
            ctx.raise_if_cancelled()
        except CancelledError as exc:
            observed.append((kind, exc.request_id, exc.reason))
            raise

    def watch_blocking(kind: str, ctx: ServerContext) -> None:
        started.set()
        assert ctx.cancellation.wait(WAIT), "never cancelled"
        assert ctx.cancelled()
        try:
            ctx.raise_if_cancelled()
        except CancelledError as exc:
            observed.append((kind, exc.request_id, exc.reason))
            raise

    @server.tool
    async def tool(server_context: ServerContext) -> str:
        await watch("tool", server_context)
        return "unreachable"

    @server.tool
    def blocking_tool(server_context: ServerContext) -> str:
        watch_blocking("blocking_tool", server_context)
        return "unreachable"

    @server.prompt
    async def prompt(server_context: ServerContext) -> str:
        await watch("prompt", server_context)
        return "unreachable"

    @server.resource("mem://slow", name="slow")
    def read(server_context: ServerContext) -> str:
        watch_blocking("read", server_context)
        return "unreachable"

    @server.resource_template("mem://items/{item}", name="items")
    async def read_template(item: str, server_context: ServerContext) -> str:
        await watch("read_template", server_context)
        return "unreachable"

    @server.completion_handler
    async def complete(params: dict, server_context: ServerContext) -> dict:
        await watch("completion", server_context)
        return {"completion": {"values": []}}

    @server.resources_subscribe_handler
    def subscribe(params: dict, server_context: ServerContext) -> None:
        watch_blocking("subscribe", server_context)

    @server.resources_unsubscribe_handler
    async def unsubscribe(params: dict, server_context: ServerContext) -> None:
        await watch("unsubscribe", server_context)

    @server.define_custom_method("example/slow")
    def custom(params: dict, server_context: ServerContext) -> dict:
        watch_blocking("custom", server_context)
        return {}

    return server


COOPERATIVE_REQUESTS = {
    "tool": ("tools/call", {"name": "tool", "arguments": {}}),
    "blocking_tool": ("tools/call", {"name": "blocking_tool", "arguments": {}}),
    "prompt": ("prompts/get", {"name": "prompt"}),
    "read": ("resources/read", {"uri": "mem://slow"}),
    "read_template": ("resources/read", {"uri": "mem://items/7"}),
    "completion": ("completion/complete", {"ref": {"type": "ref/prompt", "name": "prompt"},
                                           "argument": {"name": "x", "value": "y"}}),
    "subscribe": ("resources/subscribe", {"uri": "mem://slow"}),
    "unsubscribe": ("resources/unsubscribe", {"uri": "mem://slow"}),
    "custom": ("example/slow", {}),
}


@pytest.mark.feature("CAN-02", "CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("kind", list(COOPERATIVE_REQUESTS))
async def test_every_kind_of_handler_sees_cancellation(revision, kind):
    observed: list[tuple[str, Any, str | None]] = []
    started = Started()
    peer = await connected(cooperative_server(observed, started), revision)
    method, params = COOPERATIVE_REQUESTS[kind]
    message = peer.build(method, params, request_id=21)
    # A custom method is not in the schema; every standard request is checked.
    task = asyncio.ensure_future(peer.server.handle_async(message, peer.session)) if kind == "custom" \
        else peer.start(method, params, request_id=21)
    await started.wait()
    await peer.cancel(21, "stop")
    assert await asyncio.wait_for(task, WAIT) is None
    assert observed == [(kind, 21, "stop")]
    assert peer.sent == []


# CAN-03 -------------------------------------------------------------------------------------------

class Instrumented:
    def __init__(self) -> None:
        self.data: list[dict] = []
        self.reports: list[tuple[BaseException, dict]] = []

    def configuration(self) -> Configuration:
        return Configuration(instrumentation_callback=self.data.append,
                             exception_reporter=lambda exc, ctx: self.reports.append((exc, ctx)))


@pytest.mark.feature("CAN-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("ending", ["returns", "raises_cancelled", "raises_mcp_error", "ignores"])
async def test_a_cancelled_request_gets_no_response_however_it_ends(revision, ending):
    hooks = Instrumented()
    server = Server("cancel", configuration=hooks.configuration())
    started = Started()
    release = asyncio.Event()

    @server.tool
    async def slow(server_context: ServerContext) -> str:
        started.set()
        if ending == "ignores":  # does not look at the token at all
            await asyncio.wait_for(release.wait(), WAIT)
            return "finished anyway"
        await until_cancelled(server_context)
        if ending == "raises_cancelled":
            server_context.raise_if_cancelled()
        if ending == "raises_mcp_error":
            raise MCPError("gave up", code=-32000)
        return "stopped"

    peer = await connected(server, revision)
    task = peer.start_tool("slow", request_id=9)
    await started.wait()
    await peer.cancel(9, "user stop")
    release.set()
    assert await asyncio.wait_for(task, WAIT) is None
    data = hooks.data[-1]
    assert data["tool_name"] == "slow"
    assert data["cancelled"] is True and data["cancellation_reason"] == "user stop"
    assert hooks.reports == []
    # The id is free again once the cancelled request has ended.
    release.clear()
    started.clear()
    reuse = peer.start_tool("slow", request_id=9)
    await started.wait()
    release.set()
    if ending == "ignores":
        assert (await asyncio.wait_for(reuse, WAIT))["result"]["content"][0]["text"] == "finished anyway"
    else:
        await peer.cancel(9)
        assert await asyncio.wait_for(reuse, WAIT) is None


@pytest.mark.feature("CAN-03")
async def test_requests_that_were_not_cancelled_still_get_their_response():
    hooks = Instrumented()
    server = Server("cancel", configuration=hooks.configuration())
    started = Started()

    @server.tool
    async def slow(server_context: ServerContext) -> str:
        started.set()
        await until_cancelled(server_context)
        return "stopped"

    @server.tool
    def quick() -> str:
        return "quick"

    peer = await connected(server)
    task = peer.start_tool("slow", request_id=1)
    await started.wait()
    assert (await peer.call_tool("quick", request_id=2))["result"]["content"][0]["text"] == "quick"
    assert "cancelled" not in hooks.data[-1]
    await peer.cancel(1)
    assert await asyncio.wait_for(task, WAIT) is None
    assert hooks.data[-1]["cancelled"] is True and hooks.data[-1]["cancellation_reason"] is None


# CAN-04 -------------------------------------------------------------------------------------------

@pytest.mark.feature("CAN-04")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_initialize_cannot_be_cancelled(revision):
    """A cancel for the id of an ``initialize`` in flight changes nothing."""
    peers: list[Peer] = []
    in_flight_during: list[dict] = []

    async def around(data: dict, call_next: Any) -> Any:
        peer = peers[0]
        if data["method"] == "initialize":
            in_flight_during.append(dict(peer.session.in_flight))
            # The message a client would send while its initialize is still unanswered.
            answer = await peer.server.handle_async(
                {"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": 1, "reason": "changed my mind"}}, peer.session)
            assert answer is None
        return await call_next()

    server = Server("cancel", configuration=Configuration(around_request=around))
    peer = Peer(server, revision)
    peers.append(peer)
    response = await peer.request("initialize", {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        request_id=1)
    assert response["result"]["protocolVersion"] == revision
    assert in_flight_during == [{}]
    assert peer.session.initialized is True


# CAN-05 -------------------------------------------------------------------------------------------

NESTED = {
    "roots": "roots/list",
    "sampling": "sampling/createMessage",
    "elicitation": "elicitation/create",
}


def nested_server(observed: list[Any], started: Started) -> Server:
    server = Server("nested")

    def ask(ctx: ServerContext, kind: str) -> Any:
        started.set()
        if kind == "roots":
            return ctx.list_roots()
        if kind == "sampling":
            return ctx.create_sampling_message(
                [{"role": "user", "content": {"type": "text", "text": "hi"}}], 10)
        return ctx.create_form_elicitation(
            "Name?", {"type": "object", "properties": {"name": {"type": "string"}}})

    @server.tool
    async def ask_async(kind: str, server_context: ServerContext) -> str:
        try:
            await ask(server_context, kind)
        except CancelledError as exc:
            observed.append(("raised", exc.request_id, exc.reason))
            raise
        return "answered"

    @server.tool
    def ask_blocking(kind: str, server_context: ServerContext) -> str:
        try:
            ask(server_context, kind)  # blocks on the worker thread
        except CancelledError as exc:
            observed.append(("raised", exc.request_id, exc.reason))
            raise
        return "answered"

    return server


@pytest.mark.feature("CAN-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("kind", list(NESTED))
@pytest.mark.parametrize("tool", ["ask_async", "ask_blocking"])
async def test_cancelling_the_parent_cancels_the_nested_request(revision, kind, tool):
    if kind == "elicitation" and revision == "2024-11-05":
        revision = "2025-06-18"  # elicitation arrived with 2025-06-18
    observed: list[Any] = []
    started = Started()
    peer = await connected(nested_server(observed, started), revision, CLIENT_CAPABILITIES)
    parent = peer.start_tool(tool, {"kind": kind}, request_id="parent-1")
    nested = await peer.wait_for_request(NESTED[kind])
    assert nested.related_request_id == "parent-1"
    await peer.cancel("parent-1", "user stop")
    assert await asyncio.wait_for(parent, WAIT) is None
    # The client is told, on the parent's stream, that the nested request is abandoned...
    told = await peer.wait_for("notifications/cancelled")
    assert told.params == {"requestId": nested.message["id"], "reason": "user stop"}
    assert told.related_request_id == "parent-1"
    # ...and the handler saw CancelledError for its own request.
    assert observed == [("raised", "parent-1", "user stop")]
    assert len(peer.session.pending) == 0
    # An answer that arrives afterwards is ignored.
    await peer.respond(nested.message["id"], error={"code": -32000, "message": "too late"})
    assert [s.method for s in peer.sent] == [NESTED[kind], "notifications/cancelled"]


@pytest.mark.feature("CAN-05")
async def test_a_request_cancelled_before_it_asks_sends_nothing():
    started = Started()
    release = asyncio.Event()
    observed: list[Any] = []
    server = Server("nested")

    @server.tool
    async def late(server_context: ServerContext) -> str:
        started.set()
        await asyncio.wait_for(release.wait(), WAIT)
        try:
            await server_context.list_roots()
        except CancelledError as exc:
            observed.append(exc.reason)
            raise
        return "unreachable"

    peer = await connected(server, capabilities={"roots": {}})
    task = peer.start_tool("late", request_id=1)
    await started.wait()
    await peer.cancel(1, "too slow")
    release.set()
    assert await asyncio.wait_for(task, WAIT) is None
    assert observed == ["too slow"]
    assert peer.sent == []


@pytest.mark.feature("CAN-05")
async def test_cancelling_one_parent_leaves_the_other_nested_requests_alone():
    started = Started()
    observed: list[Any] = []
    peer = await connected(nested_server(observed, started), capabilities=CLIENT_CAPABILITIES)
    first = peer.start_tool("ask_async", {"kind": "roots"}, request_id=1)
    second = peer.start_tool("ask_async", {"kind": "roots"}, request_id=2)
    await peer.wait_for(lambda s: len(peer.requests("roots/list")) == 2)
    await peer.cancel(1)
    assert await asyncio.wait_for(first, WAIT) is None
    told = await peer.wait_for("notifications/cancelled")
    [of_first] = [s for s in peer.requests("roots/list") if s.related_request_id == 1]
    [of_second] = [s for s in peer.requests("roots/list") if s.related_request_id == 2]
    assert told.params == {"requestId": of_first.message["id"]}
    await peer.respond(of_second.message["id"], {"roots": []})
    response = await asyncio.wait_for(second, WAIT)
    assert response["result"]["content"] == [{"type": "text", "text": "answered"}]
    assert observed == [("raised", 1, None)]
