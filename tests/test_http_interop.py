"""Interop over Streamable HTTP: the official SDK clients against the demo served by daphne.

The Python SDK (``mcp`` on PyPI, ``streamable_http_client``) and the TypeScript SDK
(``@modelcontextprotocol/sdk`` on npm, ``StreamableHTTPClientTransport``, run by node from
tests/interop) each complete a session: initialize, tools/list, a call with progress, a call whose
elicitation the client answers, and the end of the session (DELETE). They talk to daphne through
:class:`WireTap`, a relay that checks every message in both directions against the schema of the
negotiated revision.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from asgiref.sync import sync_to_async
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_protocol.envelope import PROTOCOL_VERSION_KEY
from mcp_server.models import Session

from .harness import REPO
from .http_harness import iter_events
from .http_support import running
from .services import require
from .wire import check_client_message, check_server_message

INTEROP = REPO / "tests" / "interop"
HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class WireTap:
    """A relay in front of the server that checks every JSON-RPC message passing through it.

    Violations are collected (a relay thread cannot fail the test) in ``violations``; ``seen``
    counts the messages checked each way, by method (or "response").
    """

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.revision = "2025-11-25"
        self.violations: list[str] = []
        self.seen: dict[str, list[str]] = {"client": [], "server": []}
        self.methods: dict[Any, str] = {}
        self.http = httpx.Client(timeout=httpx.Timeout(30.0, read=None))
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.http.close()
        self._thread.join(5)

    def check(self, side: str, message: Any) -> None:
        with self._lock:
            try:
                if side == "client":
                    if "method" in message and "id" in message:
                        self.methods[message["id"]] = message["method"]
                    if message.get("method") == "initialize":
                        self.revision = message["params"]["protocolVersion"]
                    meta = (message.get("params") or {}).get("_meta") or {}
                    if PROTOCOL_VERSION_KEY in meta:  # a 2026-07-28 request names its revision
                        self.revision = meta[PROTOCOL_VERSION_KEY]
                    check_client_message(message, self.revision)
                    self.seen[side].append(message.get("method", "response"))
                else:
                    method = None if "method" in message else self.methods.get(message.get("id"))
                    if method == "initialize" and "result" in message:
                        self.revision = message["result"]["protocolVersion"]
                    check_server_message(message, self.revision, method)
                    self.seen[side].append(message.get("method", f"response to {method}"))
            except Exception as exc:
                self.violations.append(f"{side}: {exc}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        tap = self

        class Relay(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.relay()

            def do_GET(self) -> None:
                self.relay()

            def do_DELETE(self) -> None:
                self.relay()

            def relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if body:
                    tap.check("client", json.loads(body))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                with tap.http.stream(self.command, tap.upstream, headers=headers, content=body) as upstream:
                    self.send_response(upstream.status_code)
                    for name, value in upstream.headers.items():
                        if name.lower() not in HOP_BY_HOP:
                            self.send_header(name, value)
                    kind = upstream.headers.get("content-type", "")
                    if kind.startswith("text/event-stream"):
                        self.end_headers()
                        self.relay_events(upstream)
                    else:
                        content = upstream.read()
                        self.send_header("content-length", str(len(content)))
                        self.end_headers()
                        self.wfile.write(content)
                        # DELETE answers {"success": true}, which is no JSON-RPC message.
                        if content and kind.startswith("application/json") and self.command == "POST":
                            tap.check("server", json.loads(content))

            def relay_events(self, upstream: httpx.Response) -> None:
                try:
                    for event in iter_events(upstream):
                        frame = ""
                        if event.id is not None:
                            frame += f"id: {event.id}\n"
                        if event.retry is not None:
                            frame += f"retry: {event.retry}\n"
                        frame += "".join(f"data: {line}\n" for line in event.data.split("\n")) + "\n"
                        self.wfile.write(frame.encode())
                        self.wfile.flush()
                        if event.message is not None:
                            tap.check("server", event.message)
                except (OSError, httpx.HTTPError):
                    pass  # either side went away

        return Relay


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker) as server:
        yield server


@pytest.fixture
def tap(daphne, transactional_db):
    relay = WireTap(daphne.url)
    yield relay
    relay.close()


def stored_sessions() -> list[str]:
    """The ids of the sessions in the database, read on a worker thread that keeps no connection
    open (the test database must be droppable at the end)."""
    from django.db import connection

    try:
        return list(Session.objects.values_list("pk", flat=True))
    finally:
        connection.close()


@pytest.mark.feature("HTTP-01", "HTTP-09", "HTTP-14", "HTTP-15", "HTTP-17", "HTTP-25", "PROG-03")
async def test_the_official_python_client_completes_a_session(tap):
    progress: list[tuple] = []
    elicited: list[types.ElicitRequestParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True, "priority": "high"})

    with anyio.fail_after(60):
        async with streamable_http_client(tap.url) as (read, write), ClientSession(
                read, write, elicitation_callback=elicitation, read_timeout_seconds=20) as session:
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            assert initialized.server_info.name == "django-mcp-demo"
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert {"echo", "add", "slow_count", "confirm_action"} <= tools
            counted = await session.call_tool("slow_count", {"count": 3, "delay": 0.05},
                                              progress_callback=on_progress)
            assert counted.content[0].text == "Counted to 3"
            assert progress == [(1, 3, "counted 1"), (2, 3, "counted 2"), (3, 3, "counted 3")]
            confirmed = await session.call_tool("confirm_action", {"action": "ship"})
            assert confirmed.content[0].text == "Done: ship (priority high)"
            assert [p.message for p in elicited] == ["Do you want to ship?"]
            session_ids = await sync_to_async(stored_sessions)()
            assert len(session_ids) == 1
    # Leaving the client ended the session (DELETE).
    assert await sync_to_async(stored_sessions)() == []
    assert tap.violations == []
    assert tap.seen["server"].count("notifications/progress") == 3
    assert "elicitation/create" in tap.seen["server"] and "response" in tap.seen["client"]


@pytest.mark.feature("MOD-14", "MRTR-02", "MRTR-03", "MRTR-07")
async def test_the_official_python_client_in_either_era_against_the_same_server(tap):
    """The SDK's Client probes server/discover and adopts 2026-07-28, answering the demo's
    input_required through its elicitation callback; pinned to the handshake era, the same tool
    asks it live instead. Both against the one running server, through the checking relay."""
    from mcp.client import Client

    asked: list[str] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with anyio.fail_after(60):
        async with Client(tap.url, elicitation_callback=elicitation) as modern:
            assert modern.protocol_version == "2026-07-28"
            assert modern.server_info.name == "django-mcp-demo"
            assert "delete_note" in {tool.name for tool in (await modern.list_tools()).tools}
            deleted = await modern.call_tool("delete_note", {"title": "draft"})
            assert deleted.content[0].text == "Deleted the note 'draft'"
            assert (await modern.call_tool("echo", {"message": "hi"})).content[0].text == "hi"
        assert "server/discover" in tap.seen["client"]
        assert "initialize" not in tap.seen["client"]
        assert await sync_to_async(stored_sessions)() == []  # the modern era keeps no session
        async with Client(tap.url, mode="legacy", elicitation_callback=elicitation) as legacy:
            assert legacy.protocol_version == "2025-11-25"
            deleted = await legacy.call_tool("delete_note", {"title": "notes"})
            assert deleted.content[0].text == "Deleted the note 'notes'"
    assert asked == ["Delete the note 'draft'?", "Delete the note 'notes'?"]
    assert "initialize" in tap.seen["client"] and "elicitation/create" in tap.seen["server"]
    assert tap.violations == []


async def test_the_official_python_client_answers_declared_asks_in_either_era(tap):
    """The demo's confirm_action and two-round arrange_meeting (asks declared as parameters), for
    the SDK's Client pinned to 2026-07-28 (input_required rounds) and in its handshake mode (live)."""
    from mcp.client import Client

    from .test_client_stdio import answer_the_demo_forms

    asked: list[str] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        answer = answer_the_demo_forms({"message": params.message})
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    with anyio.fail_after(60):
        for mode in ("2026-07-28", "legacy"):
            async with Client(tap.url, mode=mode, elicitation_callback=elicitation) as client:
                assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
                confirmed = await client.call_tool("confirm_action", {"action": "ship"})
                assert confirmed.content[0].text == "Done: ship (priority high)"
                meeting = await client.call_tool("arrange_meeting", {"topic": "the roof"})
                assert meeting.is_error is False
                assert meeting.content[0].text == "Arranged a visit about the roof: 1 Main Street"
    assert asked == ["Do you want to ship?", "How should we meet about the roof?",
                     "Where should we meet?"] * 2
    assert tap.seen["server"].count("elicitation/create") == 3  # live, in the handshake era only
    assert tap.violations == []


@pytest.mark.feature("HTTP-01", "HTTP-09", "HTTP-14", "HTTP-15", "HTTP-17", "HTTP-25", "PROG-03")
def test_the_official_typescript_client_completes_a_session(tap):
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    require((INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(),
            "the TypeScript SDK is not installed: npm ci --prefix tests/interop (scripts/setup does it)")
    finished = subprocess.run([node, str(INTEROP / "ts_client.mjs"), tap.url], capture_output=True,
                              text=True, timeout=60, cwd=INTEROP)
    assert finished.returncode == 0, finished.stderr
    summary = json.loads(finished.stdout.strip().splitlines()[-1])
    assert summary["protocolVersion"] == "2025-11-25"
    assert summary["server"]["name"] == "django-mcp-demo"
    assert {"echo", "add", "slow_count", "confirm_action"} <= set(summary["tools"])
    assert [(p["progress"], p["total"]) for p in summary["progress"]] == [(1, 3), (2, 3), (3, 3)]
    assert summary["counted"] == "Counted to 3"
    [asked] = summary["elicitations"]
    assert asked["message"] == "Do you want to ship?"
    assert asked["schema"]["required"] == ["confirm"]
    assert summary["confirmed"] == "Done: ship (priority high)"
    # terminateSession() ended the session.
    assert not Session.objects.filter(pk=summary["sessionId"]).exists()
    assert tap.violations == []
    assert "elicitation/create" in tap.seen["server"] and "response" in tap.seen["client"]
