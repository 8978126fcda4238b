"""Under daphne, an open stream's request costs less and its send window keeps nothing on it: the
attributes every request gets are slots (their class defaults kept), its messages wait in a
lean queue, the window is the connection's producer (paused, it counts what is written and
closes past its limit; resumed, it opens; the response's end lets it go; a stalled client is cut
off), and the hook that turns Nagle off leaves nothing on the connection once it ran."""

from __future__ import annotations

import importlib

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from mcp_server.asgi import (
    cut_off_slow_daphne_readers,
    lean_daphne_request_queues,
    send_daphne_writes_at_once,
    slim_daphne_requests,
)
from mcp_server.http.mailbox import Mailbox
from mcp_server.http.send_window import MAX_BUFFERED_BYTES_KEY, SEND_WINDOW_KEY, SendWindow

REQUEST = (b"GET /mcp HTTP/1.1\r\nHost: testserver\r\nAccept: text/event-stream\r\n"
           b"Mcp-Session-Id: abc\r\n\r\n")


class Server:
    """What daphne's request asks of its server, and the requests it was handed."""

    proxy_forwarded_address_header = None
    root_path = ""
    server_name = "daphne"
    request_buffer_size = 8192

    def __init__(self) -> None:
        self.requests: list = []

    def protocol_connected(self, protocol) -> None:
        pass

    def protocol_disconnected(self, protocol) -> None:
        pass

    def create_application(self, protocol, scope):
        self.requests.append(protocol)
        return Mailbox()


class AbortableTransport(StringTransport):
    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True
        super().abortConnection()


@pytest.fixture
def http_protocol():
    """daphne's module with the hooks installed (once per process: an application built earlier
    may have installed them already)."""
    module = importlib.import_module("daphne.http_protocol")
    slim_daphne_requests()
    cut_off_slow_daphne_readers()
    send_daphne_writes_at_once()
    return module


def open_request(module, transport: StringTransport | None = None):
    server = Server()
    protocol = module.HTTPFactory(server).buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    protocol.makeConnection(transport or AbortableTransport())
    protocol.dataReceived(REQUEST)
    (request,) = server.requests
    return protocol, request


def start(request, window: SendWindow, limit: int = 100) -> None:
    request.handle_reply({"type": "http.response.start", "status": 200,
                          "headers": [(b"content-type", b"text/event-stream")],
                          SEND_WINDOW_KEY: window, MAX_BUFFERED_BYTES_KEY: limit})


def body(request, window: SendWindow, data: bytes, more: bool = True) -> None:
    request.handle_reply({"type": "http.response.body", "body": data, "more_body": more,
                          SEND_WINDOW_KEY: window})


def test_a_requests_attributes_are_slots_with_their_class_defaults(http_protocol):
    request_class = http_protocol.WebRequest
    assert "code" in {name for cls in request_class.__mro__ for name in getattr(cls, "__slots__", ())}
    _protocol, request = open_request(http_protocol)
    assert request.code == 200 and request.finished == 0 and request.startedWriting == 0
    assert request.client_scheme == "http" and request.query_string == b"" and request.server is not None
    assert "code" not in vars(request) and "server" not in vars(request)
    request.handle_reply({"type": "http.response.start", "status": 204, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"", "more_body": False})
    assert request.code == 204 and request.finished


async def test_a_requests_messages_wait_in_a_lean_queue():
    from daphne.server import Server as DaphneServer

    lean_daphne_request_queues()
    received = []

    async def application(scope, receive, send):
        received.append(await receive())

    server = DaphneServer(application, endpoints=["tcp:port=0:interface=127.0.0.1"], signal_handlers=False)
    server.connections = {}
    protocol = object()
    server.protocol_connected(protocol)
    queue = server.create_application(protocol, {"type": "http"})
    assert isinstance(queue, Mailbox)
    queue.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    await server.connections[protocol]["application_instance"]
    assert received == [{"type": "http.request", "body": b"", "more_body": False}]


def test_the_window_counts_what_waits_for_a_paused_connection(http_protocol):
    protocol, request = open_request(http_protocol)
    window = SendWindow()
    start(request, window, limit=10)
    assert window.honoured and window.attached
    assert protocol._channel._requestProducer is window  # the connection pauses and resumes it
    window.pauseProducing()
    body(request, window, b"x" * 8)
    assert not window.closed
    body(request, window, b"x" * 8)  # 16 bytes wait for the client: past the limit
    assert window.closed
    window.resumeProducing()  # the client read them
    assert not window.closed
    body(request, window, b"", more=False)
    assert not window.attached and protocol._channel._requestProducer is None
    assert "_window" not in vars(request)


async def test_a_client_that_reads_nothing_is_cut_off(http_protocol):
    transport = AbortableTransport()
    protocol, request = open_request(http_protocol, transport)
    window = SendWindow(stall_timeout=0.01)
    start(request, window, limit=0)
    window.pauseProducing()
    body(request, window, b"data")
    assert await window.wait() is False
    assert transport.aborted and protocol._channel._requestProducer is None


def test_the_connection_keeps_nothing_of_the_nodelay_hook(http_protocol):
    protocol, _request = open_request(http_protocol)
    assert "makeConnection" not in vars(protocol._channel)
