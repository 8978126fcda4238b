"""Notifications: server-wide broadcasts, session-scoped ones, the client notifications the server
accepts, broken streams, and the exact method names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_protocol import methods
from mcp_server import Configuration, Server, ServerContext

from .peer import connected
from .wire import SCHEMAS, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]


class Reports:
    def __init__(self) -> None:
        self.calls: list[tuple[BaseException, dict]] = []

    def __call__(self, exc: BaseException, context: dict) -> None:
        self.calls.append((exc, context))


class BroadcastRecorder:
    """A transport as ``Server`` sees it for server-wide notifications."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.broadcasts: list[tuple[dict, str | None]] = []

    def broadcast(self, message: dict, *, level: str | None = None) -> bool:
        if self.fail:
            raise ConnectionError("stream gone")
        self.broadcasts.append((message, level))
        return True


LIST_CHANGED = {
    "tools": ("notify_tools_list_changed", "notifications/tools/list_changed", "tools_list_changed"),
    "prompts": ("notify_prompts_list_changed", "notifications/prompts/list_changed",
                "prompts_list_changed"),
    "resources": ("notify_resources_list_changed", "notifications/resources/list_changed",
                  "resources_list_changed"),
}


# NOTIF-01 -----------------------------------------------------------------------------------------

@pytest.mark.feature("NOTIF-01")
@pytest.mark.parametrize("kind", list(LIST_CHANGED))
def test_list_changed_without_a_transport_does_nothing(kind):
    notify, _, _ = LIST_CHANGED[kind]
    server = Server("n")
    assert server.transport is None
    assert getattr(server, notify)() is False


@pytest.mark.feature("NOTIF-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("kind", list(LIST_CHANGED))
def test_list_changed_is_broadcast_through_the_transport(revision, kind):
    notify, method, _ = LIST_CHANGED[kind]
    server = Server("n")
    server.transport = BroadcastRecorder()
    assert getattr(server, notify)() is True
    [(message, level)] = server.transport.broadcasts
    assert message == {"jsonrpc": "2.0", "method": method} and level is None
    check_server_message(message, revision)


@pytest.mark.feature("NOTIF-01", "CFG-02")
@pytest.mark.parametrize("kind", list(LIST_CHANGED))
def test_list_changed_failure_goes_to_the_exception_reporter(kind):
    notify, _, label = LIST_CHANGED[kind]
    reports = Reports()
    server = Server("n", configuration=Configuration(exception_reporter=reports))
    server.transport = BroadcastRecorder(fail=True)
    assert getattr(server, notify)() is False
    [(exc, context)] = reports.calls
    assert isinstance(exc, ConnectionError) and context == {"notification": label}


# NOTIF-02 -----------------------------------------------------------------------------------------

@pytest.mark.feature("NOTIF-02")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_progress_and_log_reach_only_the_requesting_session(revision):
    server = Server("n")

    @server.tool
    async def chatty(server_context: ServerContext) -> str:
        await server_context.report_progress(1, 2)
        await server_context.notify_log_message("working", level="info")
        await server_context.report_progress(2, 2)
        return "done"

    caller = await connected(server, revision, level="debug")
    others = [await connected(server, revision, level="debug") for _ in range(2)]
    await caller.call_tool("chatty", meta={"progressToken": "t"}, request_id=42)
    assert [(s.method, s.related_request_id) for s in caller.sent] == [
        ("notifications/progress", 42), ("notifications/message", 42), ("notifications/progress", 42),
    ]
    assert all(other.sent == [] for other in others)


# NOTIF-03 / ELI-04 --------------------------------------------------------------------------------

def standalone_server() -> tuple[Server, list[Any]]:
    server = Server("n", capabilities={"tools": {}, "resources": {"subscribe": True}, "logging": {}})
    returned: list[Any] = []

    @server.tool
    async def finish(elicitation_id: str, server_context: ServerContext) -> str:
        returned.append(await server_context.notify_resources_updated("mem://doc"))
        returned.append(await server_context.notify_elicitation_complete(elicitation_id))
        return "done"

    @server.tool
    def finish_blocking(elicitation_id: str, server_context: ServerContext) -> str:
        returned.append(server_context.notify_resources_updated("mem://doc"))
        returned.append(server_context.notify_elicitation_complete(elicitation_id))
        return "done"

    return server, returned


@pytest.mark.feature("NOTIF-03", "ELI-04")
@pytest.mark.parametrize("tool", ["finish", "finish_blocking"])
async def test_session_scoped_notifications_are_not_tied_to_the_request(tool):
    server, returned = standalone_server()
    capabilities = {"elicitation": {"url": {}}}
    caller = await connected(server, "2025-11-25", capabilities)
    other = await connected(server, "2025-11-25", capabilities)
    await caller.call_tool(tool, {"elicitation_id": "el-7"}, request_id=5)
    assert [(s.message, s.related_request_id) for s in caller.sent] == [
        ({"jsonrpc": "2.0", "method": "notifications/resources/updated",
          "params": {"uri": "mem://doc"}}, None),
        ({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
          "params": {"elicitationId": "el-7"}}, None),
    ]
    assert other.sent == []
    assert returned == [True, True]


@pytest.mark.feature("ELI-04")
@pytest.mark.parametrize("revision", ["2025-06-18", "2024-11-05"])
async def test_elicitation_complete_is_not_sent_before_2025_11_25(revision):
    """Older wires have no such notification: nothing is sent, and the call says so."""
    server, returned = standalone_server()
    peer = await connected(server, revision, {"elicitation": {"url": {}}})
    await peer.call_tool("finish", {"elicitation_id": "el-1"})
    assert [s.method for s in peer.sent] == ["notifications/resources/updated"]
    assert returned == [True, False]


# NOTIF-05 -----------------------------------------------------------------------------------------

@pytest.mark.feature("NOTIF-05")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_accepted_client_notifications_get_no_reply(revision):
    server = Server("n")
    changed: list[dict] = []
    server.roots_list_changed_handler(changed.append)
    peer = await connected(server, revision, {"roots": {"listChanged": True}})
    await peer.notify("notifications/initialized")
    await peer.notify("notifications/progress", {"progressToken": "t", "progress": 1, "total": 2})
    await peer.notify("notifications/roots/list_changed")
    await peer.notify("notifications/cancelled", {"requestId": 77, "reason": "gone"})
    assert changed == [{}]
    assert peer.sent == []


# NOTIF-06 -----------------------------------------------------------------------------------------

def broken_stream_server() -> tuple[Server, list[Any], Reports]:
    reports = Reports()
    server = Server("n", configuration=Configuration(exception_reporter=reports))
    returned: list[Any] = []

    @server.tool
    async def keeps_going(server_context: ServerContext) -> str:
        returned.append(await server_context.report_progress(1))
        returned.append(await server_context.notify_log_message("x", level="error"))
        returned.append(await server_context.notify_resources_updated("mem://x"))
        return "finished"

    @server.tool
    def keeps_going_blocking(server_context: ServerContext) -> str:
        returned.append(server_context.report_progress(1))
        returned.append(server_context.notify_log_message("x", level="error"))
        returned.append(server_context.notify_resources_updated("mem://x"))
        return "finished"

    return server, returned, reports


@pytest.mark.feature("NOTIF-06")
@pytest.mark.parametrize("tool", ["keeps_going", "keeps_going_blocking"])
@pytest.mark.parametrize("failure", ["not_delivered", "raises"])
async def test_a_broken_stream_never_raises_into_the_handler(tool, failure):
    server, returned, reports = broken_stream_server()
    peer = await connected(server, level="debug")
    if failure == "raises":
        peer.fail_with = BrokenPipeError("client went away")
    else:
        peer.deliver = False
    response = await peer.call_tool(tool, meta={"progressToken": 1})
    assert response["result"]["content"] == [{"type": "text", "text": "finished"}]
    assert returned == [False, False, False]
    if failure == "raises":  # the transport's failure is reported, named by notification
        assert [context for _, context in reports.calls] == [
            {"notification": "notifications/progress"}, {"notification": "notifications/message"},
            {"notification": "notifications/resources/updated"},
        ]
        assert all(isinstance(exc, BrokenPipeError) for exc, _ in reports.calls)
    else:
        assert reports.calls == []


@pytest.mark.feature("NOTIF-06")
async def test_a_request_on_a_broken_stream_fails_with_an_error_not_a_hang():
    reports = Reports()
    server = Server("n", configuration=Configuration(exception_reporter=reports))

    @server.tool
    async def ask(server_context: ServerContext) -> str:
        await server_context.list_roots()
        return "unreachable"

    peer = await connected(server, capabilities={"roots": {}})
    peer.fail_with = BrokenPipeError("client went away")
    response = await peer.call_tool("ask")
    assert response["error"]["code"] == -32603
    assert "roots/list" in response["error"]["message"]
    assert len(peer.session.pending) == 0
    [(exc, context)] = reports.calls
    assert isinstance(exc, BrokenPipeError) and context["request"]["method"] == "roots/list"


# NOTIF-07 -----------------------------------------------------------------------------------------

NOTIFICATION_NAMES = {
    "NOTIFICATIONS_TOOLS_LIST_CHANGED": "notifications/tools/list_changed",
    "NOTIFICATIONS_PROMPTS_LIST_CHANGED": "notifications/prompts/list_changed",
    "NOTIFICATIONS_RESOURCES_LIST_CHANGED": "notifications/resources/list_changed",
    "NOTIFICATIONS_RESOURCES_UPDATED": "notifications/resources/updated",
    "NOTIFICATIONS_ROOTS_LIST_CHANGED": "notifications/roots/list_changed",
    "NOTIFICATIONS_MESSAGE": "notifications/message",
    "NOTIFICATIONS_PROGRESS": "notifications/progress",
    "NOTIFICATIONS_CANCELLED": "notifications/cancelled",
    "NOTIFICATIONS_ELICITATION_COMPLETE": "notifications/elicitation/complete",
    "NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED": "notifications/subscriptions/acknowledged",
}


def _schema_notification_methods(revision: str) -> set[str]:
    document = json.loads((Path(SCHEMAS) / revision / "schema.json").read_text())
    definitions = document.get("$defs", document.get("definitions", {}))
    found = set()
    for definition in definitions.values():
        method = definition.get("properties", {}).get("method", {}).get("const")
        if isinstance(method, str) and method.startswith("notifications/"):
            found.add(method)
    return found


@pytest.mark.feature("NOTIF-07")
def test_notification_method_names():
    for constant, name in NOTIFICATION_NAMES.items():
        assert getattr(methods, constant) == name
    # Each is a notification of the revision that defines it.
    assert set(NOTIFICATION_NAMES.values()) - {"notifications/subscriptions/acknowledged"} <= \
        _schema_notification_methods("2025-11-25")
    assert "notifications/subscriptions/acknowledged" in _schema_notification_methods("2026-07-28")


@pytest.mark.feature("NOTIF-07")
async def test_the_server_sends_notifications_under_those_names():
    server, _ = standalone_server()

    @server.tool
    async def everything(server_context: ServerContext) -> str:
        await server_context.report_progress(1)
        await server_context.notify_log_message("x", level="error")
        return "done"

    peer = await connected(server, "2025-11-25", {"elicitation": {"url": {}}}, level="debug")
    await peer.call_tool("everything", meta={"progressToken": 1})
    await peer.call_tool("finish", {"elicitation_id": "e"})
    server.transport = BroadcastRecorder()
    server.notify_tools_list_changed()
    server.notify_prompts_list_changed()
    server.notify_resources_list_changed()
    sent = [s.method for s in peer.sent] + [m["method"] for m, _ in server.transport.broadcasts]
    assert sent == [
        "notifications/progress", "notifications/message", "notifications/resources/updated",
        "notifications/elicitation/complete", "notifications/tools/list_changed",
        "notifications/prompts/list_changed", "notifications/resources/list_changed",
    ]
    assert set(sent) <= set(NOTIFICATION_NAMES.values())
