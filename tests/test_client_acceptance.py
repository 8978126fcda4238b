"""Acceptance of the 2026-07-28 client (issue 14): in auto mode, with no mode given, our client
completes a session (list, a call with progress, a call that needs input answered by a handler,
read, prompt) against

(a) our demo server under daphne, in the modern era;
(b) the official Python SDK 2.3.0 server (tests/reference_server.py) in its modern mode;
(c) a handshake-era-only server, the official TypeScript SDK 1.32.2 server (tests/interop/
    ts_server.mjs over stdio), reached by falling back to ``initialize``;
(d) our demo server over stdio (``manage.py mcp_stdio``), in the modern era.

The same ``on_elicitation`` handler serves every one: embedded in an input_required result where
the connection is modern, a live server request where it is not. Every message both ways is
checked against the schema of its revision.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conformance.run import MODERN_CLIENT_SCENARIOS
from mcp_client import AsyncClient, apply_defaults

from .client_support import (
    CheckedHTTPTransport,
    CheckedStdioTransport,
    ReferenceHTTPServer,
    every_message_checked,
    our_stdio,
)
from .harness import REPO
from .http_support import HOOKS, running
from .modern_support import MODERN
from .services import require

INTEROP = REPO / "tests" / "interop"


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


def answering_client(transport) -> tuple[AsyncClient, list[dict]]:
    """A client whose one elicitation handler accepts, filling the form from its defaults and
    saying yes to every boolean."""
    client = AsyncClient(transport)
    asked: list[dict] = []

    def elicit(params: dict) -> dict:
        asked.append(params)
        schema = params.get("requestedSchema") or {}
        yes = {name: True for name, field in (schema.get("properties") or {}).items()
               if field.get("type") == "boolean"}
        return {"action": "accept", "content": apply_defaults(schema, yes)}

    client.on_elicitation(elicit)
    return client, asked


async def session(client: AsyncClient, *, count: tuple[str, dict], ask: tuple[str, dict],
                  resource: str, prompt: tuple[str, dict]) -> dict:
    """List, call with progress, call that needs input, read, prompt; what each gave back."""
    seen: dict = {"tools": {tool.name for tool in await client.tools()}, "progress": []}
    name, arguments = count
    result = await client.call_tool(name, arguments,
                                    on_progress=lambda params: seen["progress"].append(params["progress"]))
    seen["counted"] = result.text
    seen["asked"] = (await client.call_tool(*ask)).text
    seen["read"] = (await client.read_resource(resource))[0]["text"]
    seen["prompt"] = (await client.get_prompt(*prompt))["messages"][0]["content"]["text"]
    return seen


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings=HOOKS) as server:
        yield server


DEMO_SESSION = {"count": ("slow_count", {"count": 3, "delay": 0.01}),
                "ask": ("delete_note", {"title": "groceries"}), "resource": "demo://readme",
                "prompt": ("greeting", {"name": "Ada"})}


def check_demo(seen: dict) -> None:
    assert {"echo", "slow_count", "delete_note"} <= seen["tools"]
    assert seen["counted"] == "Counted to 3" and seen["progress"] == [1, 2, 3]
    assert seen["asked"] == "Deleted the note 'groceries'"
    assert seen["read"].startswith("This is the django-mcp-sdk demo server")
    assert seen["prompt"] == "Write a casual greeting in english for Ada."


@pytest.mark.feature("CLI-02", "MRTR-12", "PRM-08", "RES-13")
async def test_a_session_with_our_demo_in_the_modern_era(daphne):
    transport = CheckedHTTPTransport(daphne.url)
    client, asked = answering_client(transport)
    await client.connect()
    assert client.is_modern and client.protocol_version == MODERN
    check_demo(await session(client, **DEMO_SESSION))
    assert [params["message"] for params in asked] == ["Delete the note 'groceries'?"]
    assert "initialize" not in transport.wire.methods_sent()
    retry = transport.wire.sent_of("tools/call")[-1]["params"]
    assert retry["inputResponses"]["confirm"]["action"] == "accept"
    await client.close()


@pytest.mark.feature("CLI-02", "TRACE-05")
async def test_the_log_level_set_in_the_modern_era_rides_in_every_later_envelope(daphne):
    transport = CheckedHTTPTransport(daphne.url)
    client = AsyncClient(transport)
    logged: list[dict] = []
    client.on_log_message(logged.append)
    await client.connect()
    assert client.is_modern
    with pytest.raises(ValueError, match="level must be one of"):
        await client.set_logging_level("loud")
    assert await client.set_logging_level("warning") == {}
    await client.call_tool("diagnose", {}, meta={"io.modelcontextprotocol/logLevel": "debug", "mine": 1})
    assert [entry["level"] for entry in logged] == ["warning", "error"]
    sent = transport.wire.sent_of("tools/call")[-1]["params"]["_meta"]
    # The envelope's own keys win over the caller's meta; the caller's other keys are kept.
    assert sent["io.modelcontextprotocol/logLevel"] == "warning" and sent["mine"] == 1
    assert "logging/setLevel" not in transport.wire.methods_sent()
    await client.close()


@pytest.mark.feature("CLI-02", "CSTDIO-07", "MRTR-12")
async def test_a_session_with_our_demo_over_stdio_in_the_modern_era():
    transport = our_stdio()
    client, asked = answering_client(transport)
    await client.connect()
    assert client.is_modern and transport.wire.methods_sent()[0] == "server/discover"
    check_demo(await session(client, **DEMO_SESSION))
    # Every request carried the envelope triple (CSTDIO-07).
    for message in transport.wire.sent:
        if "id" in message and "method" in message:
            assert {"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities",
                    "io.modelcontextprotocol/clientInfo"} <= set(message["params"]["_meta"])
    assert len(asked) == 1
    await client.close()


@pytest.mark.feature("CLI-02", "MRTR-12")
async def test_a_session_with_the_official_python_sdk_server_in_its_modern_mode(tmp_path):
    server = ReferenceHTTPServer(tmp_path / "reference.log")
    try:
        transport = CheckedHTTPTransport(server.url)
        client, asked = answering_client(transport)
        await client.connect()
        assert client.is_modern and client.server_implementation == {"name": "reference-server",
                                                                     "version": "2.3.0"}
        seen = await session(client, count=("count", {"to": 3}), ask=("approve", {"action": "deploy"}),
                             resource="ref://readme", prompt=("greet", {"name": "Ada"}))
        assert {"echo", "count", "approve"} <= seen["tools"]
        assert seen["counted"] == "counted to 3" and seen["progress"] == [1, 2, 3]
        assert seen["asked"] == "deploy: approved" and asked[0]["message"] == "Approve deploy?"
        assert "inputResponses" in transport.wire.sent_of("tools/call")[-1]["params"]
        assert seen["read"] == "The reference server of the interop tests."
        assert seen["prompt"] == "Write a plain greeting for Ada."
        await client.close()
    finally:
        server.stop()


@pytest.mark.feature("CLI-02", "CLI-12")
async def test_a_session_with_a_handshake_era_only_server_by_falling_back():
    node = shutil.which("node")
    if node is None or not (INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.fail("node and the TypeScript SDK are needed: npm ci --prefix tests/interop (scripts/setup)")
    transport = CheckedStdioTransport(node, [str(INTEROP / "ts_server.mjs")], cwd=str(INTEROP),
                                      read_timeout=30)
    client, asked = answering_client(transport)
    await client.connect()
    # It refused server/discover (-32601): the handshake followed.
    assert not client.is_modern and client.protocol_version == "2025-11-25"
    assert transport.wire.methods_sent()[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert client.server_implementation == {"name": "ts-server", "version": "1.32.2"}
    seen = await session(client, count=("count", {"to": 3}), ask=("confirm", {"action": "deploy"}),
                         resource="ts://readme", prompt=("greet", {"name": "Ada"}))
    assert {"echo", "count", "confirm"} <= seen["tools"]
    assert seen["counted"] == "counted to 3" and seen["progress"] == [1, 2, 3]
    assert seen["asked"] == "done: deploy" and asked[0]["message"] == "Confirm deploy?"
    assert seen["read"] == "The TypeScript SDK server." and seen["prompt"] == "Greet Ada."
    await client.close()


MODERN_SAMPLE = ["request-metadata", "sep-2322-client-request-state", "http-custom-headers",
                 "auth/iss-supported"]


@pytest.mark.feature("CONF-02", "MRTR-12", "CLI-15")
def test_the_official_suite_passes_a_sample_of_its_2026_07_28_client_scenarios(tmp_path):
    """``conformance/run --suite 0.2-modern --client-scenario ...``: the alpha's 2026-07-28 leg runs
    its client scenarios against conformance/client. CI runs them all as part of ``conformance/run``."""
    suite = REPO / "conformance" / "suite-0.2" / "node_modules" / "@modelcontextprotocol" / "conformance"
    require(shutil.which("node") is not None and suite.is_dir(),
            "node or the conformance suite is missing (conformance/run installs it)")
    finished = subprocess.run(
        [str(REPO / "conformance" / "run"), "--suite", "0.2-modern", "--results", str(tmp_path),
         *(f"--client-scenario={name}" for name in MODERN_SAMPLE)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    lines = [line for line in finished.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert lines == [f"PASS {name} (0.2.0-alpha.12-2026-07-28, client)" for name in MODERN_SAMPLE], \
        finished.stdout + finished.stderr
    assert finished.returncode == 0
    assert set(MODERN_SAMPLE) <= set(MODERN_CLIENT_SCENARIOS) and len(MODERN_CLIENT_SCENARIOS) == 13
