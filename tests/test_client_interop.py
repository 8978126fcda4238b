"""Interop: our client against the official Python SDK's server (``mcp`` on PyPI), over stdio
and over Streamable HTTP on a loopback port.

The server is tests/reference_server.py: an ``MCPServer`` (FastMCP's name since v2) with tools
(structured output, progress, logging, elicitation, sampling, roots, an error), prompts,
resources and a template, completion, subscriptions and ``logging/setLevel``. Every message in
both directions is checked against the schema of the negotiated revision.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from mcp_client import AsyncClient, Cancellation, CancelledError, ServerError, apply_defaults

from .client_support import (
    WAIT,
    CheckedHTTPTransport,
    CheckedStdioTransport,
    cancel_when,
    eventually,
    every_message_checked,
)
from .harness import REPO

TRANSPORTS = ["stdio", "http"]
REVISIONS = ["2025-11-25", "2024-11-05"]
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "tiny",
           "stopReason": "endTurn"}


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    """A fresh transport to the official SDK's server (the HTTP server is shared by the module)."""
    if request.param == "stdio":
        return CheckedStdioTransport(sys.executable, ["-m", "tests.reference_server", "stdio"], cwd=str(REPO),
                                     read_timeout=30)
    return CheckedHTTPTransport(request.getfixturevalue("reference_http").url)


@pytest.mark.feature("CLI-03", "CLI-05", "CLI-07", "CLI-10", "CLI-11", "TOOL-24", "PRM-08", "PRM-09",
                     "RES-13", "RES-14", "CMP-07", "PING-03", "PROG-04", "TRACE-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_whole_session_with_the_official_server(transport, revision):
    client = AsyncClient(transport)
    first = await client.connect(protocol_version=revision, mode="legacy")
    assert await client.connect(mode="legacy") is first and client.protocol_version == revision
    assert transport.wire.methods_sent() == ["initialize", "notifications/initialized"]
    assert client.server_implementation == {"name": "reference-server", "version": "2.3.0"}
    assert client.server_capabilities["resources"]["subscribe"] is True

    tools = {tool.name: tool for tool in await client.tools()}
    assert {"echo", "add", "fail", "count", "sign_up", "ask_llm", "client_roots", "touch"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers (structured output)."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.output_schema["properties"]["result"]["type"] == "integer"
    added = await client.call_tool(tool=add, arguments={"a": 2, "b": 40})
    assert added.structured_content == {"result": 42} and added.text == "42"  # checked against its schema
    failed = await client.call_tool("fail", {"reason": "testing"})
    assert failed.is_error and "failed on purpose: testing" in failed.text
    with pytest.raises(ServerError) as raised:
        await client.read_resource("ref://no-such-thing")
    assert raised.value.code and raised.value.message

    assert await client.set_logging_level("debug") == {}
    logs: list[dict] = []
    client.on_log_message(logs.append)
    progress: list[tuple] = []
    counted = await client.call_tool("count", {"to": 3}, progress_token=f"count-{revision}",
                                     on_progress=lambda p: progress.append((p["progress"], p.get("total"))))
    assert counted.text == "counted to 3" and progress == [(1, 3), (2, 3), (3, 3)]
    assert [entry["data"] for entry in logs] == ["counted 1", "counted 2", "counted 3"]

    [greet] = (await client.list_prompts()).prompts
    assert greet.name == "greet" and [a["name"] for a in greet.arguments] == ["name", "style"]
    prompt = await client.get_prompt("greet", {"name": "Ada", "style": "pirate"})
    assert prompt["messages"][0]["content"]["text"] == "Write a pirate greeting for Ada."

    [readme] = await client.resources()
    assert (readme.uri, readme.mime_type) == ("ref://readme", "text/plain")
    [template] = await client.resource_templates()
    assert template.uri_template == "ref://items/{item_id}"
    assert (await client.read_resource("ref://readme"))[0]["text"].startswith("The reference server")
    [item] = await client.read_resource("ref://items/7", meta={"traceparent": "00-ab-cd-01"})
    assert transport.wire.sent_of("resources/read")[-1]["params"]["_meta"] == {"traceparent": "00-ab-cd-01"}
    assert json.loads(item["text"]) == {"id": "7"}

    completion = await client.complete({"type": "ref/prompt", "name": "greet"},
                                       {"name": "style", "value": "p"})
    assert completion["values"] == ["plain", "pirate", "poetic"] and completion["hasMore"] is False
    assert await client.ping() == {}

    updated: list[dict] = []
    changed: list[str] = []
    client.on_resource_updated(updated.append)
    client.on_list_changed(changed.append)
    assert await client.subscribe_resource("ref://readme") == {}
    await client.call_tool("touch", {"uri": "ref://readme"})
    await eventually(lambda: updated and changed)
    assert updated == [{"uri": "ref://readme"}] and changed == ["tools"]
    assert await client.unsubscribe_resource("ref://readme") == {}
    await client.close()
    assert not client.connected
    await client.connect(protocol_version=revision)  # again, from scratch (a new process over stdio)
    assert await client.ping() == {} and transport.wire.methods_sent().count("initialize") == 2
    await client.close()


@pytest.mark.feature("CLI-12", "ELI-09", "SMP-05", "ROOT-05")
async def test_the_official_server_asks_and_our_handlers_answer(transport):
    client = AsyncClient(transport)
    asked: list[dict] = []

    async def elicit(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": apply_defaults(params["requestedSchema"], {"name": "Ada"})}

    client.on_elicitation(elicit)
    client.on_sampling(lambda params: SAMPLED)
    client.on_roots(lambda params: {"roots": [{"uri": "file:///work/a", "name": "a"}, {"uri": "file:///tmp"}]})
    await client.connect(mode="legacy")
    signed = await client.call_tool("sign_up")
    assert signed.text == "signed up Ada <nobody@example.com> newsletter=False"
    assert asked[0]["message"] == "Who are you?"
    assert asked[0]["requestedSchema"]["properties"]["email"]["default"] == "nobody@example.com"
    assert (await client.call_tool("ask_llm", {"question": "6 x 7?"})).text == "the model said: 42"
    assert (await client.call_tool("client_roots")).text == "file:///work/a\nfile:///tmp"
    await client.close()


@pytest.mark.feature("ELI-09")
async def test_a_declined_elicitation(transport):
    client = AsyncClient(transport)
    client.on_elicitation(lambda params: {"action": "decline"})
    await client.connect(mode="legacy")
    assert (await client.call_tool("sign_up")).text == "not signed up (decline)"
    await client.close()


@pytest.mark.feature("CAN-07")
async def test_cancelling_a_call_to_the_official_server(transport):
    client = AsyncClient(transport)
    await client.connect(mode="legacy")
    token = Cancellation()
    cancel_when(lambda: transport.wire.sent_of("tools/call"), token, reason="bored")
    # A nap longer than WAIT: raising within WAIT is the cancel's doing.
    with pytest.raises(CancelledError):
        await asyncio.wait_for(client.call_tool("nap", {"seconds": 2 * WAIT}, cancellation=token), WAIT)
    [call] = transport.wire.sent_of("tools/call")
    await eventually(lambda: transport.wire.sent_of("notifications/cancelled"))
    assert transport.wire.sent_of("notifications/cancelled")[0]["params"] == {
        "requestId": call["id"], "reason": "bored"}
    assert await client.ping() == {}  # the server carries on
    await client.close()
