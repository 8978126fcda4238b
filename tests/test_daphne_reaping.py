"""Under daphne, a request is forgotten as soon as its application instance ends cleanly, not at
daphne's once-a-second walk of its connections: finished requests no longer pile up between
walks (they made the process's full garbage collections longer and more frequent, the latency
tail at concurrency 1). A failed or cancelled instance is still left to daphne's checker, which
logs it and answers the client as it always did."""

from __future__ import annotations

import asyncio

import pytest
from daphne.server import Server

from mcp_server.asgi import reap_finished_daphne_requests


class Request:
    """What daphne's server keeps per HTTP request: a protocol object, told apart by identity."""


def server_with(application) -> Server:
    reap_finished_daphne_requests()
    server = Server(application, endpoints=["tcp:port=0:interface=127.0.0.1"], signal_handlers=False)
    server.connections = {}  # what Server.run() starts with, without listening
    return server


def serve(server: Server, *, disconnect_before_end: bool = True):
    """Start one request as daphne does: connected, then its application instance created."""
    protocol = Request()
    server.protocol_connected(protocol)
    ended = asyncio.Event()
    scope = {"type": "http", "method": "POST", "path": "/mcp"}
    queue = server.create_application(protocol, scope)
    assert queue is not None
    instance = server.connections[protocol]["application_instance"]
    if disconnect_before_end:
        # daphne's WebRequest.finish() marks the request disconnected when the response is out,
        # before the application's coroutine returns.
        server.protocol_disconnected(protocol)
    instance.add_done_callback(lambda _: ended.set())
    return protocol, instance, ended


async def settle(instance) -> None:
    """Wait for the instance to end and for the callbacks it scheduled to run."""
    await asyncio.wait([instance])
    await asyncio.sleep(0)


async def test_a_finished_request_is_forgotten_when_its_application_ends():
    release = asyncio.Event()

    async def application(scope, receive, send):
        await release.wait()

    server = server_with(application)
    protocol, instance, _ended = serve(server)
    await asyncio.sleep(0)
    assert protocol in server.connections  # still running: kept
    release.set()
    await settle(instance)
    assert protocol not in server.connections


async def test_an_ended_instance_of_an_open_connection_is_dropped_and_the_connection_kept():
    async def application(scope, receive, send):
        return None

    server = server_with(application)
    protocol, instance, _ended = serve(server, disconnect_before_end=False)
    await settle(instance)
    assert server.connections[protocol] == {"connected": server.connections[protocol]["connected"]}


@pytest.mark.parametrize("outcome", ["raises", "cancelled"])
async def test_a_failed_or_cancelled_instance_is_left_to_daphne(outcome):
    async def application(scope, receive, send):
        if outcome == "raises":
            raise ValueError("the application failed")
        await asyncio.Event().wait()

    server = server_with(application)
    protocol, instance, _ended = serve(server)
    if outcome == "cancelled":
        instance.cancel()
    await asyncio.wait([instance])
    await asyncio.sleep(0)
    assert server.connections[protocol]["application_instance"] is instance


def test_the_hook_is_installed_once():
    reap_finished_daphne_requests()
    hooked = Server.__dict__["create_application"]
    reap_finished_daphne_requests()
    assert Server.__dict__["create_application"] is hooked
