"""Interop: the official Python SDK client while the server talks back over stdio.

Progress, cancellation, sampling, elicitation, roots, logging and the server-to-client request
timeout, between the SDK's ``ClientSession`` and ``manage.py mcp_stdio`` (demo project plus the test
app, tests/stdio_settings.py), through the relay tests/stdio_tap.py. The relay checks every line in
both directions against the negotiated revision's schema (its report must show no violation) and
records them (``MCP_TAP_RECORD``), so the tests can check what really went over the wire.
"""

from __future__ import annotations

import io
import json
import os
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from .harness import REPO
from .stdio_tap import Tap
from .test_official_client import tap_summary
from .test_stdio_server_requests import INSTRUMENTATION_PREFIX
from .waiting import PATIENCE, SLOW_STEPS


@asynccontextmanager
async def official_client(tmp_path: Path, env: dict | None = None,
                          **callbacks: Any) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession of the SDK, through the checking and recording relay."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.stdio_tap"], cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.stdio_settings",
             "MCP_TAP_REPORT": str(tmp_path / "tap-report.txt"),
             "MCP_TAP_RECORD": str(tmp_path / "wire.jsonl"), **(env or {})},
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=20, **callbacks) as session:
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            yield session


def wire(tmp_path: Path) -> list[tuple[str, dict]]:
    """Every message the relay passed on, in order, as (``"client"`` or ``"server"``, message)."""
    lines = (tmp_path / "wire.jsonl").read_text().splitlines()
    return [(entry["from"], entry["message"]) for entry in map(json.loads, lines)]


def text_of(result: types.CallToolResult) -> str:
    assert result.is_error is False, result
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def instrumentation(tmp_path: Path, tool: str, calls: int, timeout: float = PATIENCE) -> list[dict]:
    """The server's instrumentation data (MCP_TEST_INSTRUMENT, on stderr) of the first ``calls``
    calls of ``tool``, once that many have ended."""
    with anyio.fail_after(timeout):
        while True:
            found = []
            for line in (tmp_path / "stderr.txt").read_text().splitlines():
                if line.startswith(INSTRUMENTATION_PREFIX):
                    data = json.loads(line[len(INSTRUMENTATION_PREFIX):])
                    if data.get("tool_name") == tool:
                        found.append(data)
            if len(found) >= calls:
                return found[:calls]
            await anyio.sleep(0.02)


@pytest.mark.feature("PROG-01", "CAN-01", "CAN-02", "CAN-03")
async def test_progress_and_cancelling_slow_count_with_the_official_client(tmp_path):
    with anyio.fail_after(3 * PATIENCE):
        async with official_client(tmp_path, {"MCP_TEST_INSTRUMENT": "1"}) as session:
            seen: list[tuple] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                seen.append((progress, total, message))

            done = await session.call_tool("slow_count", {"count": 3, "delay": 0.05},
                                           progress_callback=on_progress)
            assert text_of(done) == "Counted to 3"
            assert seen == [(1, 3, "counted 1"), (2, 3, "counted 2"), (3, 3, "counted 3")]

            # A minute of steps; the SDK cancels the call when its caller is cancelled.
            second: list[float] = []
            two_steps = anyio.Event()
            outcome: dict[str, Any] = {}

            async def count_progress(progress: float, total: float | None, message: str | None) -> None:
                second.append(progress)
                if progress >= 2:
                    two_steps.set()

            async def count_long() -> None:
                outcome["result"] = await session.call_tool(
                    "slow_count", {"count": SLOW_STEPS, "delay": 0.1}, progress_callback=count_progress
                )

            async with anyio.create_task_group() as group:
                group.start_soon(count_long)
                with anyio.fail_after(PATIENCE):
                    await two_steps.wait()
                group.cancel_scope.cancel()
            assert outcome == {}

            # The handler saw it: raise_if_cancelled ended the loop (its progress, below, stopped).
            first, data = await instrumentation(tmp_path, "slow_count", calls=2)
            assert "cancelled" not in first
            assert data["cancelled"] is True, data
            assert data["cancellation_reason"] == "caller cancelled"
            await session.send_ping()
            assert text_of(await session.call_tool("echo", {"message": "still here"})) == "still here"

    messages = wire(tmp_path)
    [cancelled_call] = [m for side, m in messages if side == "client" and m.get("method") == "tools/call"
                        and m["params"]["arguments"].get("count") == SLOW_STEPS]
    cancelled_id, token = cancelled_call["id"], cancelled_call["params"]["_meta"]["progressToken"]
    cancels = [m["params"] for side, m in messages
               if side == "client" and m.get("method") == "notifications/cancelled"]
    assert cancels == [{"requestId": cancelled_id, "reason": "caller cancelled"}]
    # No response ever came for the cancelled call, and its progress stopped.
    assert not [m for side, m in messages if side == "server" and m.get("id") == cancelled_id]
    progress = [m["params"]["progress"] for side, m in messages if side == "server"
                and m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token]
    assert progress == list(range(1, len(progress) + 1)) and 2 <= len(progress) < SLOW_STEPS, progress
    tap_summary(tmp_path)


@pytest.mark.feature("SMP-01", "ELI-01", "LOG-02", "LOG-03", "STDIO-04")
async def test_official_client_answers_sampling_elicitation_and_roots_through_its_callbacks(tmp_path):
    asked: dict[str, list] = {"sampling": [], "elicitation": [], "roots": []}
    elicit_actions = iter(["accept", "decline"])
    logged: list[types.LoggingMessageNotificationParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked["sampling"].append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="4"),
                                         model="sdk-model", stop_reason="endTurn")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked["elicitation"].append(params)
        action = next(elicit_actions)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True, "priority": "high"})
        return types.ElicitResult(action=action)

    async def list_roots(context: Any) -> types.ListRootsResult:
        asked["roots"].append(context.request_id)
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    with anyio.fail_after(3 * PATIENCE):
        async with official_client(tmp_path, sampling_callback=sampling, elicitation_callback=elicitation,
                                   list_roots_callback=list_roots, logging_callback=on_log) as session:
            sampled = json.loads(text_of(await session.call_tool("ask_client", {"request": "sample"})))
            assert sampled == {"result": {"role": "assistant", "content": {"type": "text", "text": "4"},
                                          "model": "sdk-model", "stopReason": "endTurn"}}
            [params] = asked["sampling"]
            assert params.messages[0].role == "user" and params.messages[0].content.text == "What is 2 + 2?"
            assert (params.max_tokens, params.system_prompt) == (64, "Answer briefly.")
            assert params.temperature == 0.5
            assert (params.stop_sequences, params.metadata) == (["END"], {"purpose": "test"})
            assert params.include_context == "thisServer"
            assert params.model_preferences.hints[0].name == "small"

            confirmed = await session.call_tool("confirm_action", {"action": "deploy"})
            assert text_of(confirmed) == "Done: deploy (priority high)"
            declined = await session.call_tool("confirm_action", {"action": "deploy"})
            assert text_of(declined) == "Not done: deploy (decline)"
            first = asked["elicitation"][0]
            assert isinstance(first, types.ElicitRequestFormParams)
            assert first.message == "Do you want to deploy?"
            assert first.requested_schema["required"] == ["confirm"]
            assert set(first.requested_schema["properties"]) == {"confirm", "priority"}

            roots = json.loads(text_of(await session.call_tool("ask_client", {"request": "roots"})))
            assert roots == {"result": {"roots": [{"uri": "file:///work/project", "name": "project"}]}}
            assert len(asked["roots"]) == 1

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # logging is deprecated at 2026-07-28, not at 2025-11-25
                await session.set_logging_level("error")
            levels = json.loads(text_of(await session.call_tool("log_every_level", {})))
            assert levels["session"] == levels["server"] == ["error", "critical", "alert", "emergency"]
            assert [(p.level, p.logger, p.data) for p in logged[:2]] == [
                ("error", "stdio_app", {"index": 4, "level": "error"}), ("error", None, "server-wide error")]
            assert [p.level for p in logged] == [lvl for lvl in levels["session"] for _ in (0, 1)]

    # The client's answers went back under the ids of the server's requests.
    messages = wire(tmp_path)
    asked_ids = {m["id"]: m["method"] for side, m in messages
                 if side == "server" and "method" in m and "id" in m}
    answered = {m["id"] for side, m in messages if side == "client" and "method" not in m}
    assert sorted(asked_ids.values()) == ["elicitation/create", "elicitation/create", "roots/list",
                                          "sampling/createMessage"]
    assert answered == set(asked_ids)
    tap_summary(tmp_path)


@pytest.mark.feature("CAN-10", "STDIO-05", "ELI-01")
async def test_an_unanswered_elicitation_times_out_with_32001_and_the_client_is_told(tmp_path):
    asked = anyio.Event()
    interrupted = anyio.Event()

    async def never_answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            interrupted.set()  # the SDK applied the server's notifications/cancelled
            raise
        raise AssertionError("unreachable")

    with anyio.fail_after(3 * PATIENCE):
        async with official_client(tmp_path, {"MCP_TEST_S2C_TIMEOUT": "1"},
                                   elicitation_callback=never_answers) as session:
            started = anyio.current_time()
            with pytest.raises(MCPError) as timed_out:
                await session.call_tool("confirm_action", {"action": "wait forever"})
            assert timed_out.value.code == -32001
            assert anyio.current_time() - started >= 1  # the server's timeout, not before its time
            assert asked.is_set()
            with anyio.fail_after(PATIENCE):
                await interrupted.wait()
            await session.send_ping()

    messages = wire(tmp_path)
    [(elicit_at, elicit)] = [(i, m) for i, (side, m) in enumerate(messages)
                             if side == "server" and m.get("method") == "elicitation/create"]
    [(cancel_at, cancel)] = [(i, m) for i, (side, m) in enumerate(messages)
                             if side == "server" and m.get("method") == "notifications/cancelled"]
    [(answer_at, answer)] = [(i, m) for i, (side, m) in enumerate(messages)
                             if side == "server" and "error" in m]
    assert cancel["params"] == {"requestId": elicit["id"], "reason": "timed out"}
    assert answer["error"]["code"] == -32001
    assert elicit_at < cancel_at < answer_at
    # The SDK never answered the request it was told is cancelled.
    assert not [m for side, m in messages if side == "client" and m.get("id") == elicit["id"]]
    tap_summary(tmp_path)


def test_the_relay_checks_answers_by_the_method_they_answer_and_records_every_line(capsys):
    """ClientResult alone accepts any object; the relay holds an answer to its request's result type."""
    record = io.StringIO()
    tap = Tap(report=None, record=record)
    lines = [
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}},
            "clientInfo": {"name": "c", "version": "1"}}}),
        ("server", {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
            "mode": "form", "message": "?", "requestedSchema": {"type": "object", "properties": {}}}}),
        ("client", {"jsonrpc": "2.0", "id": "e1", "result": {"action": "maybe"}}),
        ("server", {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {
            "messages": [], "maxTokens": 5}}),
        ("client", {"jsonrpc": "2.0", "id": "s1", "result": {"role": "assistant",
                                                             "content": {"type": "text", "text": "x"}}}),
        ("server", {"jsonrpc": "2.0", "id": "e2", "method": "elicitation/create", "params": {
            "mode": "form", "message": "?", "requestedSchema": {"type": "object", "properties": {}}}}),
        ("client", {"jsonrpc": "2.0", "id": "e2", "result": {"action": "decline"}}),
    ]
    for side, message in lines:
        tap.check(side, json.dumps(message).encode())
    # An unknown action, then a sampling result without its model; the decline is fine.
    assert tap.violations == 2
    stderr = capsys.readouterr().err
    assert "not a valid ElicitResult" in stderr and "not a valid CreateMessageResult" in stderr
    recorded = [json.loads(line) for line in record.getvalue().splitlines()]
    assert recorded == [{"from": side, "message": message} for side, message in lines]
