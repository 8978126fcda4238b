"""``mcp_client.StdioTransport`` against our own server: ``manage.py mcp_stdio`` as the child.

The child serves the demo project plus tests/stdio_app (``sleepy``, ``ask_client``,
``log_every_level``, ``wait_for_cancel``, ``touch_resource``, ``announce``). Every message in both
directions is checked against the schema of the negotiated revision; one test goes through
``tests.stdio_tap``, which checks and records the lines as the server side sees them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time

import pytest

from mcp_client import (
    AsyncClient,
    Cancellation,
    CancelledError,
    Client,
    ConnectionClosedError,
    NotConnectedError,
    ServerError,
    ServerRequestError,
    StdioTransport,
    TransportError,
    apply_defaults,
)
from mcp_client.transports.stdio import DEFAULT_MAX_LINE_BYTES

from .client_support import (
    STDIO_SETTINGS,
    WAIT,
    CheckedStdioTransport,
    cancel_when,
    eventually,
    every_message_checked,
    our_stdio,
    wait_until,
)
from .harness import REPO

REVISIONS = ["2025-11-25", "2024-11-05"]
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "tiny",
           "stopReason": "endTurn"}


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


@pytest.mark.feature("CSTDIO-01", "CLI-05", "CLI-10", "CLI-11", "TOOL-24", "PRM-08", "PRM-09", "RES-13",
                     "RES-14", "CMP-07", "PING-03", "PROG-04")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_whole_session_with_our_server(revision):
    transport = our_stdio()
    client = AsyncClient(transport)
    await client.connect(protocol_version=revision)
    assert client.protocol_version == revision == transport.wire.revision
    assert client.server_implementation["name"] == "django-mcp-demo"
    assert transport.process.pid > 0

    tools = {tool.name: tool for tool in await client.tools()}
    assert {"echo", "add", "slow_count", "confirm_action", "ask_client"} <= set(tools)
    assert tools["add"].description == "Add two numbers"
    assert tools["add"].output_schema["properties"] == {"sum": {"type": "number"}}
    assert tools["echo"].input_schema["required"] == ["message"]
    added = await client.call_tool(tool=tools["add"], arguments={"a": 2, "b": 3.5})
    assert added.structured_content == {"sum": 5.5} and not added.is_error
    assert (await client.call_tool("echo", {"message": "héllo ✓"})).text == "héllo ✓"

    progress: list[tuple] = []
    counted = await client.call_tool(
        "slow_count", {"count": 3, "delay": 0.01}, progress_token="count-1",
        on_progress=lambda p: progress.append((p["progressToken"], p["progress"])))
    assert counted.text == "Counted to 3"
    assert progress == [("count-1", 1), ("count-1", 2), ("count-1", 3)]

    [greeting] = await client.prompts()
    assert greeting.name == "greeting" and greeting.arguments[0]["name"] == "name"
    prompt = await client.get_prompt("greeting", {"name": "Ada", "style": "pirate"})
    assert prompt["messages"][0]["content"]["text"] == "Write a pirate greeting in english for Ada."

    # The demo's skill (SEP-2640) lists its SKILL.md among the resources.
    assert [r.uri for r in await client.resources()] == ["skill://note-keeping/SKILL.md", "demo://readme"]
    assert [t.uri_template for t in await client.resource_templates()] == ["demo://users/{user_id}/profile"]
    [readme] = await client.read_resource("demo://readme")
    assert readme["text"].startswith("This is the django-mcp-sdk demo server")
    [profile] = await client.read_resource("demo://users/7/profile")
    assert json.loads(profile["text"]) == {"id": "7", "name": "User 7"}

    completion = await client.complete({"type": "ref/prompt", "name": "greeting"},
                                       {"name": "language", "value": "f"})
    assert completion["values"] == ["french"]
    assert await client.ping() == {}
    with pytest.raises(ServerError) as raised:
        await client.read_resource("demo://nothing")
    assert raised.value.code == -32602
    await client.close()
    assert transport.process is None


@pytest.mark.feature("CLI-12", "ELI-09", "SMP-04", "SMP-05", "ROOT-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_live_server_requests_are_answered_over_stdio(revision):
    """The Ruby client's stdio transport cannot do this (Appendix A, item 26)."""
    asked: list[str] = []

    def elicit(params: dict) -> dict:
        asked.append("elicit")
        return {"action": "accept", "content": apply_defaults(params["requestedSchema"], {"colour": "red"})}

    def sample(params: dict) -> dict:
        asked.append("sample")
        if asked.count("sample") > 1:
            raise ServerRequestError("the user said no", code=-1)
        return SAMPLED

    client = Client(our_stdio())
    client.on_elicitation(elicit)
    client.on_sampling(sample)
    client.on_roots(lambda params: {"roots": [{"uri": "file:///work", "name": "work"}]})
    client.connect(protocol_version=revision)
    with client:  # connected already: the context manager only closes it at the end
        assert client.protocol_version == revision

        def ask(request: str) -> dict:
            return json.loads(client.call_tool("ask_client", {"request": request}).text)

        assert ask("sample") == {"result": SAMPLED}
        assert ask("roots") == {"result": {"roots": [{"uri": "file:///work", "name": "work"}]}}
        assert ask("ping") == {"result": {}}
        # The user's rejection reaches the tool as error -1 (SMP-04).
        assert ask("sample")["error"]["code"] == -1
        if revision == "2025-11-25":  # elicitation came with 2025-06-18
            assert ask("elicit") == {"result": {"action": "accept", "content": {"colour": "red"}}}
            # The demo's form: confirm defaults to false, which apply_defaults fills in.
            assert client.call_tool("confirm_action", {"action": "ship"}).text == "Not done: ship (accept)"
        assert asked == ["sample", "sample"] + (["elicit", "elicit"] if revision == "2025-11-25" else [])
        assert "stdio_app: ask_client(ping)" in client.transport.stderr_tail


# No feature ID: notification callbacks, subscriptions and the log level from the client (where
# the Ruby client falls short, FEATURES.md Appendix A, item 25), end to end over stdio.
@pytest.mark.parametrize("revision", REVISIONS)
async def test_notifications_reach_their_callbacks_over_stdio(revision):
    client = AsyncClient(our_stdio())
    logs: list[dict] = []
    updated: list[dict] = []
    changed: list[str] = []
    client.on_log_message(logs.append)
    client.on_resource_updated(updated.append)
    client.on_list_changed(changed.append)
    await client.connect(protocol_version=revision)
    assert await client.set_logging_level("error") == {}
    levels = json.loads((await client.call_tool("log_every_level")).text)
    assert levels["session"] == ["error", "critical", "alert", "emergency"]
    assert [entry["level"] for entry in logs if entry.get("logger") == "stdio_app"] == levels["session"]
    assert await client.subscribe_resource("demo://readme") == {}
    assert (await client.call_tool("touch_resource", {"uri": "demo://readme"})).text == "sent=True"
    assert await client.unsubscribe_resource("demo://readme") == {}
    assert (await client.call_tool("touch_resource", {"uri": "demo://readme"})).text == "sent=False"
    assert (await client.call_tool("announce")).text == "sent=True"
    await client.ping()
    assert updated == [{"uri": "demo://readme"}]
    assert changed == ["tools"]
    await client.close()


@pytest.mark.feature("CSTDIO-01")
async def test_spawn_passes_args_env_and_keeps_stderr():
    transport = CheckedStdioTransport(sys.executable, [str(REPO / "manage.py"), "mcp_stdio"],
                                      env={**STDIO_SETTINGS, "MCP_TEST_NO_LOGGING": "1"}, cwd=str(REPO))
    assert transport.read_timeout is None
    assert transport.max_line_bytes == DEFAULT_MAX_LINE_BYTES == 4 * 1024 ** 2
    client = AsyncClient(transport)
    await client.connect()
    # The environment reached the child: its settings left the logging capability out.
    assert "logging" not in client.server_capabilities and "tools" in client.server_capabilities
    process = transport.process
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    await client.call_tool("ask_client", {"request": "ping"})
    await eventually(lambda: "stdio_app: ask_client(ping)" in transport.stderr_tail)
    await client.close()


@pytest.mark.feature("CLI-03", "CLI-07", "CSTDIO-06")
async def test_connect_once_close_and_connect_again_with_a_new_process():
    transport = our_stdio()
    client = AsyncClient(transport)
    first = await client.connect(mode="legacy")
    pid = transport.process.pid
    assert await client.connect(mode="legacy") is first and transport.process.pid == pid
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    await client.close()
    assert not client.connected and transport.process is None
    await client.connect(mode="legacy")
    assert client.connected and transport.process.pid != pid
    assert transport.wire.methods_sent().count("initialize") == 2
    assert await client.ping() == {}
    await client.close()


@pytest.mark.feature("CSTDIO-02")
async def test_nothing_is_sent_before_connect():
    transport = our_stdio()
    client = AsyncClient(transport)
    with pytest.raises(NotConnectedError):
        await client.call_tool("echo", {"message": "too early"})
    with pytest.raises(NotConnectedError):
        await transport.send({"jsonrpc": "2.0", "id": "1", "method": "ping"})
    assert transport.process is None  # nothing was spawned, nothing written


@pytest.mark.feature("CSTDIO-03")
async def test_read_timeout_bounds_a_silent_server():
    transport = our_stdio()
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    transport.read_timeout = 0.5  # after the handshake: Django takes longer than that to start
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"read_timeout \(0.5 s\)"):
        await client.call_tool("sleepy", {"seconds": WAIT})
    assert time.monotonic() - started >= 0.45  # not before its time
    # The connection is still fine, and a server that keeps talking (progress) is never cut off:
    # a call longer than the read timeout, with progress far more often.
    transport.read_timeout = 3.0
    assert await client.ping() == {}
    counted = await client.call_tool("slow_count", {"count": 8, "delay": 0.5}, progress_token=1)
    assert counted.text == "Counted to 8"
    await client.close()


@pytest.mark.feature("CSTDIO-04")
async def test_a_frame_over_max_line_bytes_is_a_transport_error():
    transport = our_stdio(max_line_bytes=2000)
    client = AsyncClient(transport)
    await client.connect()
    assert (await client.call_tool("echo", {"message": "x" * 1000})).text == "x" * 1000
    with pytest.raises(TransportError, match=r"max_line_bytes \(2000\)"):
        await client.call_tool("echo", {"message": "x" * 5000})
    # What follows the oversized frame cannot be trusted: the connection stays failed.
    with pytest.raises(TransportError, match="max_line_bytes"):
        await client.call_tool("echo", {"message": "y"})
    await client.close()


@pytest.mark.feature("CSTDIO-04")
@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_max_line_bytes_must_be_positive(size):
    with pytest.raises(ValueError, match="max_line_bytes"):
        StdioTransport(sys.executable, max_line_bytes=size)


@pytest.mark.feature("CSTDIO-06")
async def test_close_ends_our_server_by_closing_its_stdin():
    transport = our_stdio()
    client = AsyncClient(transport)
    await client.connect()
    process = transport.process
    transport.close_wait = WAIT  # however long the exit takes, no signal is needed
    await client.close()
    assert process.returncode == 0
    assert not client.connected and client.protocol_version is None and transport.process is None
    with pytest.raises(NotConnectedError):
        await client.ping()


STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == "ignore" else signal.SIG_DFL)
for line in sys.stdin:
    request_id = __import__("json").loads(line)["id"]
    print('{"jsonrpc":"2.0","id":"%s","result":{"protocolVersion":"2025-11-25","capabilities":{},'
          '"serverInfo":{"name":"stubborn","version":"1"}}}' % request_id, flush=True)
    break
for line in sys.stdin:
    pass  # never answers anything else
time.sleep(30)  # and lingers after stdin closes
"""


@pytest.mark.feature("CSTDIO-06")
@pytest.mark.parametrize(("sigterm", "ended_by"), [("default", -signal.SIGTERM), ("ignore", -signal.SIGKILL)])
async def test_close_escalates_to_sigterm_then_sigkill(sigterm, ended_by):
    assert StdioTransport.close_wait == 2.0
    transport = CheckedStdioTransport(sys.executable, ["-c", STUBBORN, sigterm], check_server=False)
    transport.close_wait = 0.3  # the same schedule, faster
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    process = transport.process
    # A request that will never be answered is waiting when the client closes: it is freed.
    waiting = asyncio.ensure_future(client.ping())
    await eventually(lambda: transport.wire.sent_of("ping"))
    started = time.monotonic()
    await client.close()
    elapsed = time.monotonic() - started
    assert process.returncode == ended_by
    # Not before its time: SIGTERM after one close_wait, SIGKILL after two.
    assert elapsed >= (0.25 if ended_by == -signal.SIGTERM else 0.55)
    with pytest.raises(TransportError):
        await asyncio.wait_for(waiting, WAIT)
    assert not client.connected


@pytest.mark.feature("CAN-07", "CAN-08")
def test_a_cancel_line_follows_its_request_line_on_the_server_side(tmp_path):
    """Through tests/stdio_tap, which records the lines in the order the server reads them."""
    record = tmp_path / "record.jsonl"
    transport = CheckedStdioTransport(
        sys.executable, ["-m", "tests.stdio_tap"], cwd=str(REPO), read_timeout=30,
        env={**STDIO_SETTINGS, "MCP_TAP_RECORD": str(record), "MCP_TAP_REPORT": str(tmp_path / "report")})
    client = Client(transport)
    client.connect(mode="legacy")  # the tap checks every line against the handshake-era schema
    with client:
        token = Cancellation()
        cancel_when(lambda: transport.wire.sent_of("tools/call"), token, reason="enough")
        with pytest.raises(CancelledError):
            client.call_tool("wait_for_cancel", {"limit": WAIT}, cancellation=token)
        # Cancelled as soon as possible: before the request (nothing is sent), or after its line.
        for delay in (0.0, 0.001, 0.005, 0.01):
            early = Cancellation()
            threading.Timer(delay, early.cancel).start()
            with pytest.raises(CancelledError):
                client.call_tool("wait_for_cancel", {"limit": 0.5}, cancellation=early)
        assert client.ping() == {}
        wait_until(lambda: "saw the cancellation: enough" in transport.stderr_tail)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    from_client = [entry["message"] for entry in lines if entry["from"] == "client"]
    calls = [m["id"] for m in from_client if m.get("method") == "tools/call"]
    cancels = [m["params"]["requestId"] for m in from_client if m.get("method") == "notifications/cancelled"]
    assert cancels and set(cancels) == set(calls)
    for request_id in cancels:
        request = next(i for i, m in enumerate(from_client) if m.get("id") == request_id)
        cancel = next(i for i, m in enumerate(from_client) if m.get("method") == "notifications/cancelled"
                      and m["params"]["requestId"] == request_id)
        assert request < cancel
    first_cancel = next(m for m in from_client if m.get("method") == "notifications/cancelled")
    assert first_cancel["params"] == {"requestId": calls[0], "reason": "enough"}
    report = (tmp_path / "report").read_text()
    assert "VIOLATION" not in report and ", 0 violations" in report


@pytest.mark.feature("CSTDIO-05")
async def test_a_server_that_dies_gives_connection_closed_errors():
    transport = our_stdio()
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": WAIT}))
    assert await client.ping() == {}  # read after the call: the call is running
    transport.process.kill()
    with pytest.raises(ConnectionClosedError, match="exited with status -9"):
        await asyncio.wait_for(call, WAIT)
    with pytest.raises(ConnectionClosedError):
        await client.ping()
    await client.close()


@pytest.mark.parametrize("count", [0, -1, 2.5, True])
def test_stderr_tail_lines_must_be_positive(count):
    with pytest.raises(ValueError, match="stderr_tail_lines"):
        StdioTransport(sys.executable, stderr_tail_lines=count)


async def test_the_last_lines_of_stderr_are_kept_bounded(tmp_path):
    """A ring of the server's last lines, each cut to 1000 characters, read to the end by close()."""
    script = tmp_path / "noisy.py"
    script.write_text("import sys\nfor i in range(500):\n    print(f'line {i}', file=sys.stderr)\n"
                      "print('x' * 50000, file=sys.stderr)\nsys.stderr.write('unfinished')\n")
    transport = StdioTransport(sys.executable, [str(script)], stderr_tail_lines=5)
    client = AsyncClient(transport)
    with pytest.raises(ConnectionClosedError, match="exited with status 0; its last words: unfinished"):
        await client.connect(mode="legacy")
    lines = transport.stderr_lines
    assert lines[:3] == ["line 497", "line 498", "line 499"] and lines[4] == "unfinished"
    assert lines[3] == "x" * 999 + "…" and len(lines) == 5 == transport.stderr_tail_lines


def answer_the_demo_forms(params: dict) -> dict:
    """The user's answers to the demo's declared asks (confirm_action, then arrange_meeting's two)."""
    message = params["message"]
    if message.startswith("Do you want to"):
        return {"action": "accept", "content": {"confirm": True, "priority": "high"}}
    if message.startswith("How should we meet"):
        return {"action": "accept", "content": {"kind": "visit"}}
    if message == "Where should we meet?":
        return {"action": "accept", "content": {"where": "1 Main Street"}}
    return {"action": "decline"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_declared_asks_of_the_demo_over_stdio_in_either_era(mode):
    """The demo's confirm_action and two-round arrange_meeting, written once: in auto mode the
    client speaks 2026-07-28 and answers input_required rounds; in legacy mode it is asked live."""
    asked: list[str] = []

    def elicit(params: dict) -> dict:
        asked.append(params["message"])
        return answer_the_demo_forms(params)

    client = AsyncClient(our_stdio(), mode=mode)
    client.on_elicitation(elicit)  # before connecting: the capability is declared then
    async with client:
        assert client.is_modern == (mode == "auto")
        confirmed = await client.call_tool("confirm_action", {"action": "ship"})
        assert confirmed.text == "Done: ship (priority high)"
        meeting = await client.call_tool("arrange_meeting", {"topic": "the roof"})
        assert meeting.text == "Arranged a visit about the roof: 1 Main Street"
    assert asked == ["Do you want to ship?", "How should we meet about the roof?", "Where should we meet?"]
