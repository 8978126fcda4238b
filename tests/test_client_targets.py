"""``Client(server, mode=...)``: the server named by a URL or a command line, as the command line
names it, the connection mode given once to the constructor, and a second ``connect()`` that asks
for another connection than the first refused instead of silently ignored.

The transports the clients build are the checked ones (tests/client_support.py): every message
in both directions is checked against the schema of its revision.
"""

from __future__ import annotations

import sys

import pytest

import mcp_client.transports.http
import mcp_client.transports.stdio
from mcp_client import AlreadyConnectedError, AsyncClient, Client, HTTPTransport, StdioTransport

from .client_support import (
    STDIO_SETTINGS,
    CheckedHTTPTransport,
    CheckedStdioTransport,
    every_message_checked,
)
from .harness import REPO

OUR_SERVER = f"{sys.executable} {REPO / 'manage.py'} mcp_stdio"


@pytest.fixture(autouse=True)
def _checked(monkeypatch):
    """The transports built from a string are the checked ones; the stdio child serves the demo
    plus tests/stdio_app."""
    monkeypatch.setattr(mcp_client.transports.stdio, "StdioTransport", CheckedStdioTransport)
    monkeypatch.setattr(mcp_client.transports.http, "HTTPTransport", CheckedHTTPTransport)
    for name, value in STDIO_SETTINGS.items():
        monkeypatch.setenv(name, value)
    yield from every_message_checked()


def test_a_command_line_names_a_stdio_server():
    with Client(OUR_SERVER) as client:
        assert isinstance(client.transport, StdioTransport)
        assert client.transport.command == sys.executable
        assert client.transport.args == [str(REPO / "manage.py"), "mcp_stdio"]
        assert client.is_modern  # auto: the server speaks 2026-07-28
        assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"sum": 5}


def test_a_url_names_a_streamable_http_server_and_progress_reaches_its_callback(reference_http):
    progress: list[float] = []
    with Client(reference_http.url, mode="legacy") as client:
        assert isinstance(client.transport, HTTPTransport) and client.transport.url == reference_http.url
        assert not client.is_modern and client.protocol_version == "2025-11-25"
        result = client.call_tool("count", {"to": 2}, on_progress=lambda p: progress.append(p["progress"]))
    assert result.text == "counted to 2" and progress == [1, 2]


def test_the_constructors_mode_is_how_with_connects():
    with Client(OUR_SERVER, mode="legacy") as client:
        assert client.mode == "legacy" and not client.is_modern
        # Asking again for what it has is harmless.
        assert client.connect(mode="legacy") is client.server_info
        assert client.connect() is client.server_info


def test_a_second_connect_that_asks_for_another_connection_raises():
    with Client(OUR_SERVER) as client:
        assert client.is_modern
        first = client.server_info
        refused = r"already connected with mode='auto'; connect\(mode='legacy'\) asks for another connection"
        with pytest.raises(AlreadyConnectedError, match=refused):
            client.connect(mode="legacy")
        with pytest.raises(AlreadyConnectedError, match="protocol_version"):
            client.connect(protocol_version="2025-11-25")
        assert client.connect(mode="auto") is first and client.connect() is first
        assert client.call_tool("add", {"a": 1, "b": 1}).structured_content == {"sum": 2}
        # After close(), another connection is what connect() makes.
        client.close()
        client.connect(mode="legacy")
        assert not client.is_modern


async def test_the_async_client_takes_the_same():
    client = AsyncClient(OUR_SERVER, mode="legacy")
    async with client:
        assert not client.is_modern
        with pytest.raises(AlreadyConnectedError):
            await client.connect(mode="modern")
        assert (await client.call_tool("add", {"a": 2, "b": 2})).text == '{"sum": 4}'


@pytest.mark.parametrize(("server", "error"), [("", ValueError), ("   ", ValueError), (b"python", TypeError)])
def test_a_server_that_names_nothing_is_refused(server, error):
    with pytest.raises(error):
        Client(server)


def test_a_mode_that_does_not_exist_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="mode must be 'auto', 'modern' or 'legacy'"):
        Client(OUR_SERVER, mode="sideways")
