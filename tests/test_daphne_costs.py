"""Under daphne, what each request costs Twisted for nothing is spared: ``twisted.web.http`` is
read without its deprecation proxy; no access-log line is made for a Twisted log that daphne
sends nowhere (below verbosity 2), and from verbosity 2 the line is written as before; a
connection's idle timer is kept through its requests, not cancelled and made anew for each."""

from __future__ import annotations

import importlib
import types

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.web import http as proxied

from mcp_server.http.daphne_costs import (
    keep_daphne_idle_timers,
    read_twisted_web_directly,
    skip_discarded_twisted_access_lines,
)

from .test_daphne_memory import Server as DaphneServerStub


def test_daphne_reads_twisted_web_itself_not_through_its_deprecation_proxy():
    """Each read through Twisted's module proxy runs Python code; daphne makes three a request."""
    modules = [importlib.import_module(name) for name in ("daphne.http_protocol", "daphne.server")]
    assert type(proxied) is not types.ModuleType  # Twisted still wraps it: the hook has work to do
    for _ in range(2):  # twice: the second finds nothing left to do
        read_twisted_web_directly()
        for module in modules:
            assert type(module.http) is types.ModuleType
            assert module.http.Request is proxied.Request and module.http.HTTPFactory is proxied.HTTPFactory


class Server(DaphneServerStub):
    """What daphne's request and factory ask of its server, at a verbosity."""

    def __init__(self, verbosity: int) -> None:
        super().__init__()
        self.verbosity = verbosity


@pytest.mark.parametrize(("verbosity", "lines"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_twisteds_access_line_is_made_only_when_daphne_keeps_twisteds_log(tmp_path, verbosity, lines):
    http_protocol = importlib.import_module("daphne.http_protocol")
    skip_discarded_twisted_access_lines()
    skip_discarded_twisted_access_lines()  # once per process: a second call changes nothing
    server = Server(verbosity)
    factory = http_protocol.HTTPFactory(server)
    factory.logPath = str(tmp_path / "access.log")
    factory.startFactory()
    try:
        protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
        protocol.makeConnection(StringTransport())
        protocol.dataReceived(b"POST /mcp HTTP/1.1\r\nHost: testserver\r\nContent-Length: 0\r\n"
                              b"User-Agent: tests\r\n\r\n")
        (request,) = server.requests
        request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
        request.handle_reply({"type": "http.response.body", "body": b"{}", "more_body": False})
        assert request.finished
    finally:
        factory.stopFactory()
    written = (tmp_path / "access.log").read_text().splitlines()
    assert len(written) == lines
    assert all('"POST /mcp HTTP/1.1" 200 2 "-" "tests"' in line for line in written)



def test_a_connections_idle_timer_is_kept_through_its_requests_and_still_times_an_idle_one_out():
    from twisted.internet.task import Clock

    http_protocol = importlib.import_module("daphne.http_protocol")
    keep_daphne_idle_timers()
    keep_daphne_idle_timers()  # once per process: a second call changes nothing
    server, clock = Server(verbosity=1), Clock()
    factory = http_protocol.HTTPFactory(server)
    factory.reactor = clock  # what the connection's timers are made on
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    transport = StringTransport()
    protocol.makeConnection(transport)
    channel = protocol._channel
    idle = channel.timeOut
    [timer] = clock.getDelayedCalls()
    for _ in range(3):  # requests on the connection, kept alive: the same timer all along
        clock.advance(10)
        protocol.dataReceived(b"POST /mcp HTTP/1.1\r\nHost: testserver\r\nContent-Length: 0\r\n\r\n")
        assert channel.timeOut is None and clock.getDelayedCalls() == [timer]  # off while served
        clock.advance(idle + 1)  # the timer fires while the request is served: nothing happens
        assert not transport.disconnecting and clock.getDelayedCalls() == []
        request = server.requests[-1]
        request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
        request.handle_reply({"type": "http.response.body", "body": b"{}", "more_body": False})
        assert channel.timeOut == idle
        [timer] = clock.getDelayedCalls()  # answered: an idle timer again
        assert timer.getTime() == clock.seconds() + idle
    # A request answered before its timer fired leaves the same timer, moved later.
    protocol.dataReceived(b"POST /mcp HTTP/1.1\r\nHost: testserver\r\nContent-Length: 0\r\n\r\n")
    server.requests[-1].handle_reply({"type": "http.response.start", "status": 204, "headers": []})
    clock.advance(5)
    server.requests[-1].handle_reply({"type": "http.response.body", "body": b"", "more_body": False})
    assert clock.getDelayedCalls() == [timer] and timer.getTime() == clock.seconds() + idle
    clock.advance(idle - 1)
    assert not transport.disconnecting
    clock.advance(2)  # idle for its whole timeout: the connection is closed
    assert transport.disconnecting


def test_a_connection_lost_in_a_request_leaves_no_timer_behind():
    from twisted.internet.task import Clock
    from twisted.python.failure import Failure

    http_protocol = importlib.import_module("daphne.http_protocol")
    keep_daphne_idle_timers()
    server, clock = Server(verbosity=1), Clock()
    factory = http_protocol.HTTPFactory(server)
    factory.reactor = clock
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    protocol.makeConnection(StringTransport())
    protocol.dataReceived(b"POST /mcp HTTP/1.1\r\nHost: testserver\r\nContent-Length: 0\r\n\r\n")
    assert len(clock.getDelayedCalls()) == 1  # kept while the request is served
    protocol.connectionLost(Failure(ConnectionError("gone")))
    assert clock.getDelayedCalls() == []
