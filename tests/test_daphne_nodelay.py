"""Under daphne, every accepted connection has Nagle's algorithm off (``TCP_NODELAY``), as
uvicorn's do: a response written in pieces (SSE events, a chunked body's last chunk) goes out at
once instead of waiting for the client's delayed ACK of the piece before."""

from __future__ import annotations

import importlib

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from mcp_server.asgi import send_daphne_writes_at_once


class TCPTransport(StringTransport):
    """A transport that records what a TCP connection's ``setTcpNoDelay`` was told."""

    nodelay: bool | None = None

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.nodelay = enabled


class UnixTransport(StringTransport):
    """A UNIX socket's transport has no ``setTcpNoDelay``."""


@pytest.fixture
def http_protocol():
    """daphne's module with the hook installed (by this test, or by an application built earlier
    in the process: other hooks wrap the same factory, so it is not taken off again)."""
    module = importlib.import_module("daphne.http_protocol")
    send_daphne_writes_at_once()
    return module


def connect(module, transport: StringTransport):
    protocol = module.HTTPFactory(server=None).buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    protocol.makeConnection(transport)
    return protocol


def test_a_connection_daphne_accepts_sends_without_waiting(http_protocol):
    wrapped = http_protocol.HTTPFactory.__dict__["buildProtocol"]
    send_daphne_writes_at_once()  # once per process: a second call wraps nothing again
    assert http_protocol.HTTPFactory.__dict__["buildProtocol"] is wrapped
    transport = TCPTransport()
    protocol = connect(http_protocol, transport)
    assert transport.nodelay is True
    # What daphne's own buildProtocol does still happens: its request class serves the connection.
    assert protocol._channel.requestFactory is http_protocol.WebRequest
    assert protocol._channel.transport is transport


def test_a_connection_without_tcp_is_served_as_before(http_protocol):
    transport = UnixTransport()
    connect(http_protocol, transport)
    assert transport.connected
