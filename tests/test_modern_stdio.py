"""The 2026-07-28 lifecycle over stdio (``manage.py mcp_stdio`` as a subprocess): discover, the
era lock of a connection, log levels per request, and what stdio cannot serve. Every line is
checked against the schema of the era the connection speaks."""

from __future__ import annotations

import json

import pytest

from .harness import StdioServer
from .modern_support import MODERN, envelope

TEST_SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}


def modern_server() -> StdioServer:
    return StdioServer(env=TEST_SETTINGS, revision=MODERN)


def unchecked(server: StdioServer, method: str, fields: dict, request_id: int) -> dict:
    """A request that is deliberately not what the era allows: sent as it is, answered by id."""
    server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": fields}, check=False)
    return server.wait_for(lambda m: "method" not in m and m.get("id") == request_id)


def params(meta: dict | None = None, **fields) -> dict:
    return {**fields, "_meta": meta if meta is not None else envelope()}


@pytest.mark.feature("MOD-01", "MOD-03", "MOD-13", "STDIO-03")
def test_discover_locks_the_connection_to_the_modern_era():
    with modern_server() as server:
        result = server.request("server/discover", params())["result"]
        assert result["supportedVersions"] == [MODERN]
        # MOD-03: stdio has no listen streams, so nothing promises their notifications.
        for section in ("tools", "prompts", "resources"):
            assert "listChanged" not in result["capabilities"].get(section, {}), section
        assert "subscribe" not in result["capabilities"].get("resources", {})
        listed = server.request("tools/list", params())["result"]
        assert listed["resultType"] == "complete" and listed["ttlMs"] == 0
        # Locked: no envelope is -32602, initialize is -32601, and that never changes.
        assert unchecked(server, "tools/list", {}, 101)["error"]["code"] == -32602
        assert unchecked(server, "server/discover", {}, 102)["error"]["code"] == -32602
        initialize = {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "c", "version": "1"}}
        assert unchecked(server, "initialize", initialize, 103)["error"]["code"] == -32601
        assert server.request("tools/list", params())["result"]["tools"]


@pytest.mark.feature("MOD-13", "STDIO-03")
def test_initialize_locks_the_connection_to_the_handshake_era():
    with StdioServer(env=TEST_SETTINGS, revision="2025-11-25") as server:
        server.initialize()
        # An enveloped request: the client breaks its own era.
        answer = unchecked(server, "tools/list", params(), 50)
        assert answer["error"]["code"] == -32600
        assert "legacy lifecycle" in answer["error"]["message"]
        assert server.request("ping")["result"] == {}
        assert "resultType" not in server.request("tools/list")["result"]


@pytest.mark.feature("MOD-13", "MOD-05", "MOD-06", "MOD-07", "PING-04")
def test_errors_of_the_envelope_do_not_lock_the_connection():
    with modern_server() as server:
        bad = unchecked(server, "tools/list", params({"io.modelcontextprotocol/protocolVersion": MODERN}), 60)
        assert bad["error"]["code"] == -32602
        unknown = unchecked(server, "tools/list", params(envelope(version="2099-01-01")), 61)
        assert unknown["error"]["code"] == -32022
        assert unknown["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
        for number, method in enumerate(("ping", "logging/setLevel", "initialize")):
            answer = unchecked(server, method, params(level="info"), 70 + number)
            assert answer["error"]["code"] == -32601, method
        # Nothing succeeded yet, so the connection may still choose the handshake era.
        server.revision = "2025-11-25"
        server.initialize()
        assert server.request("ping")["result"] == {}


@pytest.mark.feature("LSN-08", "STDIO-08")
def test_subscriptions_listen_is_method_not_found_on_stdio():
    with modern_server() as server:
        answer = server.request("subscriptions/listen",
                                params(notifications={"toolsListChanged": True}))
        assert answer["error"]["code"] == -32601


@pytest.mark.feature("MOD-11", "LOG-06", "PROG-05")
def test_log_messages_follow_the_envelope_level_of_each_request():
    with modern_server() as server:
        answer = server.request("tools/call", params(envelope(log_level="error"),
                                                     name="log_every_level", arguments={}))
        reported = json.loads(answer["result"]["content"][0]["text"])
        assert reported["session"] == ["error", "critical", "alert", "emergency"]
        assert reported["server"] == []  # the server-wide level does not apply to modern requests
        levels = [n["params"]["level"] for n in server.notifications
                  if n["method"] == "notifications/message"]
        assert levels == ["error", "critical", "alert", "emergency"]
        server.notifications.clear()
        answer = server.request("tools/call", params(name="log_every_level", arguments={}))
        assert json.loads(answer["result"]["content"][0]["text"])["session"] == []
        assert not [n for n in server.notifications if n["method"] == "notifications/message"]


@pytest.mark.feature("MOD-12", "STDIO-04")
def test_a_modern_handler_cannot_ask_the_client():
    with modern_server() as server:
        answer = server.request("tools/call", params(envelope({"roots": {}, "sampling": {}}),
                                                     name="ask_client", arguments={"request": "roots"}))
        text = json.dumps(answer)
        assert "SEP-2575" in text
        assert not server.server_requests


@pytest.mark.feature("MOD-13")
def test_a_cancel_reaches_a_modern_request_on_stdio():
    with modern_server() as server:
        request_id = server.send_request("tools/call", params(name="wait_for_cancel", arguments={}))
        server.notify("notifications/cancelled", {"requestId": request_id, "reason": "enough"})
        # A cancelled request gets no response; the next one is served.
        assert server.request("tools/list", params())["result"]["tools"]
        server.read_to_end()
        assert not any(m.get("id") == request_id for m in server.received if "method" not in m)
