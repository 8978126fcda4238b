"""The MCP Inspector CLI (tests/inspector, installed by scripts/setup) and declared asks, in both
eras, against ``manage.py mcp_stdio`` (the demo and tests/stdio_app).

The CLI answers ``roots/list`` with the roots of its server's entry in the config file, and so a
declared roots ask: live in the legacy era, as an input_required round in the modern one. It never
declares the elicitation capability (its CLI builds its client with ``elicit: false``; no option or
config key changes that), so it cannot answer ``confirm_action`` (nor ``arrange_meeting``): the server
says which capability is missing instead of asking.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO
from .services import require

INSPECTOR = REPO / "tests" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
ROOT = {"uri": "file:///work/project", "name": "project"}


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    require(shutil.which("node") is not None and INSPECTOR.exists(),
            "the MCP Inspector is not installed: npm ci --prefix tests/inspector (scripts/setup does it)")
    path = tmp_path_factory.mktemp("inspector") / "mcp.json"
    env = {key: value for key, value in os.environ.items() if key in ("DATABASE_URL", "MCP_TEST_SQLITE_NAME")}
    path.write_text(json.dumps({"mcpServers": {"demo": {
        "command": sys.executable, "args": ["manage.py", "mcp_stdio"], "cwd": str(REPO),
        "env": {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings", **env}, "roots": [ROOT]}}}))
    return path


def inspect(config: Path, era: str, tool: str, *arguments: str) -> dict:
    """One ``tools/call`` by the Inspector CLI: its JSON output (a result or an error)."""
    finished = subprocess.run(
        [str(INSPECTOR), "--cli", "--config", str(config), "--server", "demo", "--protocol-era", era,
         "--format", "json", "-q", "--method", "tools/call", "--tool-name", tool,
         *[f"--tool-arg={argument}" for argument in arguments]],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    output = (finished.stdout.strip() or finished.stderr.strip()).splitlines()
    assert output, finished
    return json.loads(output[-1])


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_inspector_answers_a_declared_roots_ask_and_is_told_what_it_lacks_for_forms(config, era):
    answered = inspect(config, era, "where_am_i")
    assert answered["result"]["content"] == [{"type": "text", "text": ROOT["uri"]}], answered
    assert answered["result"]["isError"] is False
    assert ("resultType" in answered["result"]) == (era == "modern")
    missing = {"modern": "Missing required client capabilities: elicitation.form",
               "legacy": "input_required needs client capabilities this session did not declare: "
                         "elicitation.form"}[era]
    refused = inspect(config, era, "confirm_action", "action=ship")
    assert refused["error"]["message"] == missing, refused
