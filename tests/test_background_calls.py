"""Background tool calls (``@mcp_server.tool(background=True)``): the ``BACKGROUND_CALLS``
setting, in process. Every message is checked against the schema of its revision."""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_server import Configuration, Server, StdioTransport
from mcp_server.background.runner import runner_name
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import ToolCall

from .harness import CLIENT_INFO
from .modern_support import modern_request, post
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

pytestmark = pytest.mark.django_db(transaction=True)

HOST = socket.gethostname()


def runs_in(pid: int) -> str:
    """The ``worker`` of a record run by the process ``pid`` (host and pid)."""
    return f"{HOST}:{pid}"


# The BACKGROUND_CALLS setting -------------------------------------------------------------------
# A broker nothing listens on: a call handed to Celery here would never be answered.
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def background_calls(choice: str, **other_settings: object) -> override_settings:
    return override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALLS": choice}, **other_settings)


def where_server(reports: list) -> Server:
    """A server with one background tool, ``where``, which says which process ran it."""
    server = Server("background-settings", configuration=Configuration(
        exception_reporter=lambda exc, context: reports.append(exc)))

    @server.tool(background=True)
    def where() -> str:
        """The id of the process it runs in."""
        return str(os.getpid())

    return server


async def call_over_http(server: Server) -> dict:
    """``where`` called on a 2026-07-28 request to the server's HTTP transport, in process."""
    transport = StreamableHTTPTransport(server)
    try:
        reply = await post(transport.as_asgi(), modern_request("tools/call", 1, name="where", arguments={}))
    finally:
        await transport.close()
    return reply.response


async def call_over_stdio(server: Server) -> dict:
    """``where`` called on a stdio session (initialize, then the call), in process."""
    revision = "2025-11-25"
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "where", "arguments": {}}},
    ]
    for message in messages:
        check_client_message(message, revision)
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdout = io.BytesIO()
    transport = StdioTransport(server, stdin=stdin, stdout=stdout, stderr=io.StringIO())
    await asyncio.wait_for(transport.serve(), PATIENCE)
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, revision)
    return next(a for a in answers if a.get("id") == 2)


async def test_local_runs_in_the_web_process_even_with_a_broker(short_lived_connections):
    with background_calls("auto", CELERY_BROKER_URL=UNREACHABLE_BROKER):
        assert runner_name() == "celery"  # the broker is configured: "auto" would use it
    with background_calls("local", CELERY_BROKER_URL=UNREACHABLE_BROKER):
        assert runner_name() == "local"
        response = await call_over_http(where_server([]))
    assert response["result"]["content"][0]["text"] == str(os.getpid())
    call = await run_in_thread(ToolCall.objects.get)
    assert (call.state, call.delivery, call.worker) == ("completed", "local", runs_in(os.getpid()))


@pytest.mark.parametrize("call", [call_over_http, call_over_stdio], ids=["http", "stdio"])
async def test_an_unknown_background_calls_value_is_refused(short_lived_connections, call):
    reports: list = []
    with background_calls("sometimes"):
        with pytest.raises(ImproperlyConfigured, match=r"MCP_SERVER\['BACKGROUND_CALLS'\] must be one of"):
            runner_name()
        response = await call(where_server(reports))
    assert response["error"]["code"] == -32603
    [error] = reports
    assert isinstance(error, ImproperlyConfigured) and "BACKGROUND_CALLS" in str(error)
    assert "'sometimes'" in str(error)
    assert not await run_in_thread(ToolCall.objects.exists)  # nothing ran, nothing was recorded
