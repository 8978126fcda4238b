"""Interop: the official Python SDK client (the ``mcp`` package) against ``manage.py mcp_stdio``.

The SDK spawns ``python -m tests.stdio_tap``, a relay that runs the demo project's ``mcp_stdio``
and checks every line in both directions against the negotiated revision's schema; its report
(``MCP_TAP_REPORT``) must show no violation and a clean exit.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from .harness import REPO
from .stdio_tap import Tap

SUMMARY = re.compile(
    r"checked (?P<client>\d+) client and (?P<server>\d+) server messages, (?P<violations>\d+) "
    r"violations; mcp_stdio exited with (?P<status>-?\d+)"
)


@asynccontextmanager
async def official_client(tmp_path: Path) -> AsyncIterator[ClientSession]:
    """A ClientSession of the SDK over stdio, through the checking relay."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.stdio_tap"], cwd=REPO,
        # The whole environment, so DATABASE_URL and friends reach manage.py as in the other tests.
        env={**os.environ, "MCP_TAP_REPORT": str(tmp_path / "tap-report.txt")},
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=20) as session:
            yield session


def tap_summary(tmp_path: Path) -> dict[str, int]:
    """The relay's verdict: fails on any violation, or if the relay or the server did not end cleanly."""
    report = (tmp_path / "tap-report.txt").read_text().splitlines()
    violations = [line for line in report if "VIOLATION" in line]
    stderr = (tmp_path / "stderr.txt").read_text()
    assert not violations, "\n".join(violations)
    assert report, f"the relay wrote no report; stderr:\n{stderr}"
    match = SUMMARY.search(report[-1])
    assert match, f"the relay did not finish (killed?): {report[-1]!r}; stderr:\n{stderr}"
    summary = {key: int(value) for key, value in match.groupdict().items()}
    assert summary["violations"] == 0 and summary["status"] == 0, (summary, stderr)
    return summary


@pytest.mark.feature("STDIO-01", "LIFE-01", "LIFE-03", "TOOL-05", "TOOL-15", "RES-03", "RES-05", "RES-06",
                     "PRM-02", "PRM-03", "CMP-01")
async def test_official_client_uses_the_demo_server_over_stdio(tmp_path):
    with anyio.fail_after(60):
        async with official_client(tmp_path) as session:
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            assert initialized.server_info.name == "django-mcp-demo"
            assert initialized.capabilities.completions is not None
            await session.send_ping()

            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"echo", "add", "slow_count", "confirm_action", "arrange_meeting",
                                  "delete_note", "diagnose", "count_in_background", "ticket_list",
                                  "ticket_retrieve", "ticket_create", "ticket_partial_update",
                                  "ticket_destroy", "ticket_close", "close_tickets",
                                  "query_records"}
            assert tools["add"].output_schema["properties"] == {"sum": {"type": "number"}}
            echoed = await session.call_tool("echo", {"message": "héllo ✓"})
            assert echoed.is_error is False
            assert [(c.type, c.text) for c in echoed.content] == [("text", "héllo ✓")]
            added = await session.call_tool("add", {"a": 2, "b": 3.5})
            assert added.is_error is False
            assert added.structured_content == {"sum": 5.5}
            assert json.loads(added.content[0].text) == {"sum": 5.5}
            with pytest.raises(MCPError) as unknown:
                await session.call_tool("no_such_tool", {})
            assert unknown.value.code == -32602

            resources = (await session.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["skill://note-keeping/SKILL.md", "demo://readme"]
            readme = (await session.read_resource("demo://readme")).contents
            assert readme[0].mime_type == "text/plain" and "demo server" in readme[0].text
            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["demo://users/{user_id}/profile"]
            profile = (await session.read_resource("demo://users/42/profile")).contents
            assert json.loads(profile[0].text) == {"id": "42", "name": "User 42"}

            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            assert [a.name for a in prompts["greeting"].arguments] == ["name", "language", "style"]
            greeting = await session.get_prompt(
                "greeting", {"name": "Ada", "language": "french", "style": "pirate"}
            )
            assert greeting.messages[0].role == "user"
            assert greeting.messages[0].content.text == "Write a pirate greeting in french for Ada."

            reference = types.PromptReference(type="ref/prompt", name="greeting")
            completion = (await session.complete(reference, {"name": "language", "value": "fr"})).completion
            assert completion.values == ["french"] and completion.has_more is False
            everything = (await session.complete(reference, {"name": "language", "value": ""})).completion
            assert everything.values == ["english", "french", "german", "italian", "spanish"]

    summary = tap_summary(tmp_path)
    # 14 requests (initialize included) and notifications/initialized; one answer per request.
    assert (summary["client"], summary["server"]) == (15, 14), summary


def test_the_relay_reports_violations_in_both_directions(capsys):
    """The relay would catch a bad message: otherwise the interop test above could not fail."""
    tap = Tap(report=None)
    tap.check("client", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}).encode())
    # An initialize result without serverInfo, then a tools/call result whose content is not a list.
    tap.check("server", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",'
                        b'"capabilities":{}}}')
    tap.check("client", b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}')
    tap.check("server", b'{"jsonrpc":"2.0","id":2,"result":{"content":"nope"}}')
    tap.check("server", b"not json")
    tap.check("client", b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}')  # no name
    assert tap.violations == 4
    assert tap.counts == {"client": 3, "server": 3}
    stderr = capsys.readouterr().err
    assert stderr.count("stdio_tap: VIOLATION in a server message") == 3
    assert "serverInfo" in stderr and "not JSON" in stderr
    assert stderr.count("stdio_tap: VIOLATION in a client message") == 1
