"""Progress and log notifications sent while a request runs, in process, on both eras' wires.

Every message the server sends goes through :class:`tests.peer.Peer`, which checks it against the
negotiated revision's schema and records the client request it belongs to.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from typing import Any

import pytest

from mcp_server import Configuration, Server, ServerContext, StdioTransport

from .peer import WAIT, Peer, connected
from .wire import check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def progress_server() -> tuple[Server, list[Any]]:
    server = Server("progress")
    returned: list[Any] = []

    @server.tool
    async def steps(server_context: ServerContext) -> str:
        returned.append(await server_context.report_progress(1, 3))
        returned.append(await server_context.report_progress(2.5, 3))
        returned.append(await server_context.report_progress(3))
        return "done"

    @server.tool
    def blocking_steps(server_context: ServerContext) -> str:
        # A plain def runs on a worker thread, where the same calls block until sent.
        returned.append(server_context.report_progress(1, 2))
        returned.append(server_context.report_progress(2, 2))
        return "done"

    @server.tool
    async def described(server_context: ServerContext) -> str:
        returned.append(await server_context.report_progress(1, 2, "halfway"))
        return "done"

    return server, returned


# PROG-01 ------------------------------------------------------------------------------------------

@pytest.mark.feature("PROG-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("token", ["tok-1", 7])
async def test_report_progress_sends_the_clients_token(revision, token):
    server, returned = progress_server()
    peer = await connected(server, revision)
    response = await peer.call_tool("steps", meta={"progressToken": token}, request_id=11)
    assert response["result"]["content"] == [{"type": "text", "text": "done"}]
    assert [s.message for s in peer.notifications("notifications/progress")] == [
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": token, "progress": 1, "total": 3}},
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": token, "progress": 2.5, "total": 3}},
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": token, "progress": 3}},
    ]
    assert returned == [True, True, True]
    assert len(peer.sent) == 3  # nothing else was sent


@pytest.mark.feature("PROG-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_report_progress_blocks_in_a_plain_def_tool(revision):
    server, returned = progress_server()
    peer = await connected(server, revision)
    await peer.call_tool("blocking_steps", meta={"progressToken": "p"})
    assert [s.params for s in peer.notifications("notifications/progress")] == [
        {"progressToken": "p", "progress": 1, "total": 2},
        {"progressToken": "p", "progress": 2, "total": 2},
    ]
    assert returned == [True, True]


@pytest.mark.feature("PROG-01")
async def test_report_progress_message():
    """``message`` arrived with 2025-03-26; it is sent as given."""
    server, _ = progress_server()
    peer = await connected(server, "2025-11-25")
    await peer.call_tool("described", meta={"progressToken": "p"})
    [sent] = peer.notifications("notifications/progress")
    assert sent.params == {"progressToken": "p", "progress": 1, "total": 2, "message": "halfway"}


# PROG-02 ------------------------------------------------------------------------------------------

@pytest.mark.feature("PROG-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["steps", "blocking_steps", "described"])
async def test_no_progress_token_means_no_notification_and_no_error(revision, tool):
    server, returned = progress_server()
    peer = await connected(server, revision)
    response = await peer.call_tool(tool, meta={"com.example/other": 1})
    assert response["result"]["isError"] is False
    assert peer.sent == []
    assert returned and set(returned) == {False}  # "not sent", never an exception


# PROG-03 ------------------------------------------------------------------------------------------

@pytest.mark.feature("PROG-03", "NOTIF-02")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_progress_goes_only_to_the_requesting_session_tagged_with_its_request(revision):
    server = Server("progress")
    gate = asyncio.Event()

    @server.tool
    async def wait_and_report(server_context: ServerContext) -> str:
        await server_context.report_progress(1)
        await asyncio.wait_for(gate.wait(), WAIT)
        await server_context.report_progress(2)
        return "done"

    first, second = await connected(server, revision), await connected(server, revision)
    # Two requests in flight at once in one session, and one in another session.
    a = first.start_tool("wait_and_report", meta={"progressToken": "a"}, request_id=1)
    b = first.start_tool("wait_and_report", meta={"progressToken": "b"}, request_id=2)
    c = second.start_tool("wait_and_report", meta={"progressToken": "c"}, request_id=1)
    for peer, count in ((first, 2), (second, 1)):
        await peer.wait_for(lambda s, n=count, p=peer: len(p.notifications("notifications/progress")) == n)
    gate.set()
    for task in (a, b, c):
        assert (await asyncio.wait_for(task, WAIT))["result"]["isError"] is False

    def seen(peer: Peer) -> list[tuple[Any, Any, Any]]:
        return sorted((s.params["progressToken"], s.params["progress"], s.related_request_id)
                      for s in peer.notifications("notifications/progress"))

    assert seen(first) == [("a", 1, 1), ("a", 2, 1), ("b", 1, 2), ("b", 2, 2)]
    assert seen(second) == [("c", 1, 1), ("c", 2, 1)]


# LOG-01 -------------------------------------------------------------------------------------------

@pytest.mark.feature("LOG-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_set_level_accepts_the_eight_levels(revision):
    peer = await connected(Server("log"), revision)
    for level in LEVELS:
        assert await peer.result("logging/setLevel", {"level": level}) == {}
        assert peer.session.log_level == level


@pytest.mark.feature("LOG-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("level", ["verbose", "INFO", "", 3, None])
async def test_set_level_rejects_other_levels(revision, level):
    peer = await connected(Server("log"), revision)
    await peer.set_level("error")
    message = peer.build("logging/setLevel", {"level": level})
    answer = await asyncio.wait_for(server_answer(peer, message), WAIT)
    assert answer["error"]["code"] == -32602
    assert peer.session.log_level == "error", "a rejected level changes nothing"


async def server_answer(peer: Peer, message: dict) -> dict:
    """A deliberately invalid request (not schema-checked); the answer still is."""
    answer = await peer.server.handle_async(message, peer.session)
    check_server_message(answer, peer.revision)
    return answer


@pytest.mark.feature("LOG-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_set_level_without_the_logging_capability_is_an_error(revision):
    peer = await connected(Server("log", capabilities={"tools": {}}), revision)
    answer = await peer.request("logging/setLevel", {"level": "info"})
    assert answer["error"]["code"] == -32601
    assert answer["error"]["data"]["missingCapability"] == "logging"
    assert peer.session.log_level is None


# LOG-02 / LOG-03 ----------------------------------------------------------------------------------

def logging_server() -> tuple[Server, list[Any]]:
    server = Server("log")
    returned: list[Any] = []

    @server.tool
    async def log_all(server_context: ServerContext) -> str:
        for level in LEVELS:
            returned.append(await server_context.notify_log_message(f"at {level}", level=level))
        return "logged"

    @server.tool
    def log_blocking(server_context: ServerContext) -> str:
        for level in LEVELS:
            returned.append(server_context.notify_log_message({"level": level}, level=level,
                                                              logger="worker"))
        return "logged"

    return server, returned


@pytest.mark.feature("LOG-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["log_all", "log_blocking"])
async def test_nothing_is_logged_until_a_level_is_set(revision, tool):
    server, returned = logging_server()
    peer = await connected(server, revision)
    assert (await peer.call_tool(tool))["result"]["isError"] is False
    assert peer.sent == []
    assert returned == [False] * len(LEVELS)


@pytest.mark.feature("LOG-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("threshold", ["debug", "warning", "emergency"])
async def test_only_messages_at_or_above_the_level_are_sent(revision, threshold):
    server, returned = logging_server()
    peer = await connected(server, revision, level=threshold)
    await peer.call_tool("log_all")
    expected = LEVELS[LEVELS.index(threshold):]
    assert [s.params["level"] for s in peer.notifications("notifications/message")] == expected
    assert returned == [level in expected for level in LEVELS]

    # Lowering the level later lets more through, for this session.
    await peer.set_level("debug")
    peer.sent.clear()
    await peer.call_tool("log_blocking")
    assert [s.params["level"] for s in peer.sent] == LEVELS


@pytest.mark.feature("LOG-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_log_notification_shape(revision):
    server = Server("log")
    data_values: list[Any] = ["text", 42, 1.5, True, None, ["a", 1], {"nested": {"k": [1, 2]}}]

    @server.tool
    async def log_data(server_context: ServerContext) -> str:
        for value in data_values:
            await server_context.notify_log_message(value, level="error")
        await server_context.notify_log_message({"event": "db"}, level="warning", logger="db")
        return "logged"

    @server.tool
    async def bad_level(server_context: ServerContext) -> str:
        await server_context.notify_log_message("x", level="verbose")
        return "unreachable"

    peer = await connected(server, revision, level="debug")
    await peer.call_tool("log_data")
    assert [s.message for s in peer.sent] == [
        *({"jsonrpc": "2.0", "method": "notifications/message",
           "params": {"level": "error", "data": value}} for value in data_values),
        {"jsonrpc": "2.0", "method": "notifications/message",
         "params": {"level": "warning", "data": {"event": "db"}, "logger": "db"}},
    ]
    # A level outside the eight is the tool author's mistake: the tool fails, nothing is sent.
    peer.sent.clear()
    result = (await peer.call_tool("bad_level"))["result"]
    assert result["isError"] is True and peer.sent == []


# LOG-04 -------------------------------------------------------------------------------------------

@pytest.mark.feature("LOG-04", "NOTIF-02")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_context_log_goes_to_the_requesting_session_at_its_own_level(revision):
    server, _ = logging_server()
    # The server's own in-process session asks for everything; each session's level still rules.
    answer = await server.handle_async({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
                                        "params": {"level": "debug"}})
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}
    strict = await connected(server, revision, level="critical")
    bystander = await connected(server, revision, level="debug")
    await strict.call_tool("log_all", request_id="req-1")
    assert [(s.params["level"], s.related_request_id) for s in strict.sent] == [
        ("critical", "req-1"), ("alert", "req-1"), ("emergency", "req-1"),
    ]
    assert bystander.sent == []


@pytest.mark.feature("LOG-04")
async def test_server_log_goes_through_the_transport_at_each_sessions_level():
    """``server.notify_log_message`` is a broadcast: the transport filters by the session's level."""
    server = Server("log")
    out = io.BytesIO()
    transport = StdioTransport(server, stdin=io.BytesIO(), stdout=out)
    revision = "2025-11-25"
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ):
        await server.handle_async(message, transport.session)
    assert server.notify_log_message("before any level", level="emergency") is False
    await server.handle_async({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                               "params": {"level": "warning"}}, transport.session)
    assert server.notify_log_message("too chatty", level="info") is False
    assert server.notify_log_message({"disk": "full"}, level="error", logger="ops") is True
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    for line in lines:
        check_server_message(line, revision)
    assert lines == [{"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "error", "data": {"disk": "full"}, "logger": "ops"}}]


@pytest.mark.feature("LOG-04", "CFG-02")
async def test_server_log_failure_is_reported_not_raised():
    reports: list[tuple[BaseException, dict]] = []
    server = Server("log", configuration=Configuration(
        exception_reporter=lambda exc, context: reports.append((exc, context))))

    class Broken:
        def broadcast(self, message: dict, *, level: str | None = None) -> bool:
            raise OSError("stream gone")

    server.transport = Broken()
    assert server.notify_log_message("x", level="error") is False
    # Called on the event loop's thread, the plain reporter runs on a worker thread: wait for it.
    deadline = asyncio.get_running_loop().time() + 30
    while not reports and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    [(exc, context)] = reports
    assert isinstance(exc, OSError) and context == {"notification": "log_message"}
    with pytest.raises(ValueError, match="unknown log level"):
        server.notify_log_message("x", level="loud")


# LOG-05 -------------------------------------------------------------------------------------------

@pytest.mark.feature("LOG-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_no_transport_means_no_send(make_client, revision):
    server = Server("log")
    returned: list[Any] = []

    @server.tool
    def log(server_context: ServerContext) -> str:
        returned.append(server_context.notify_log_message("x", level="emergency"))
        return "fine"

    assert server.transport is None
    assert server.notify_log_message("x", level="emergency") is False
    client = make_client(server, revision)
    client.result("logging/setLevel", {"level": "debug"})
    # server.handle() uses the server's own session, which has no transport to write to.
    result = client.result("tools/call", {"name": "log", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "fine"}] and result["isError"] is False
    assert returned == [False]


@pytest.mark.feature("PROG-01")
async def test_progress_from_a_plain_def_tool_is_sent_from_the_event_loop():
    """The worker thread hands the send to the loop (the peer asserts which thread writes)."""
    server = Server("progress")
    threads: list[int] = []

    @server.tool
    def work(server_context: ServerContext) -> str:
        threads.append(threading.get_ident())
        assert server_context.report_progress(1, 1) is True
        return "done"

    peer = await connected(server)
    await peer.call_tool("work", meta={"progressToken": 1})
    assert threads and threads[0] != threading.get_ident()
    assert [s.params for s in peer.sent] == [{"progressToken": 1, "progress": 1, "total": 1}]
