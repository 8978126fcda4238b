"""What each ASGI server keeps of the endpoint's protections, on a real process (daphne, uvicorn,
hypercorn, granian serving ``get_asgi_application()``): the Host and Origin checks, a header block
too large refused before the application, Nagle's algorithm off on every connection, and a client
that goes away cancelling its 2026-07-28 call; and each of granian's workers draining on SIGTERM.

The body limit, the slow reader and the drain on SIGTERM are tested under each server where they
live (``test_input_hardening``, ``test_http_limits``, ``test_rolling_restart``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from .http_harness import children_of
from .http_support import error_of, running
from .modern_support import MODERN, envelope, modern_headers
from .waiting import PATIENCE, wait_until
from .wire import check_client_message

SERVERS = ["daphne", "uvicorn", "hypercorn", "granian"]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}


@pytest.fixture(scope="module", params=SERVERS)
def server(request, django_db_setup, django_db_blocker):
    with running(django_db_blocker, server=request.param) as served:
        yield served


def post(server, headers: dict) -> httpx.Response:
    return httpx.post(server.url, json=INITIALIZE, timeout=PATIENCE, headers={
        "accept": "application/json, text/event-stream", **headers})


@pytest.mark.feature("HTTP-22")
def test_the_host_and_origin_checks_hold(server, transactional_db):
    own = f"127.0.0.1:{server.port}"
    assert post(server, {"host": own, "origin": f"http://{own}"}).status_code == 200
    refused = post(server, {"host": "evil.example"})
    assert refused.status_code == 403 and error_of(refused)["message"] == "Invalid Host header"
    refused = post(server, {"host": own, "origin": "http://evil.example"})
    assert refused.status_code == 403 and error_of(refused)["message"] == "Invalid Origin header"


def test_a_header_block_past_the_servers_limit_is_refused_and_the_server_goes_on(server, transactional_db):
    # 1 MiB of headers: past every server's bound (as measured: daphne 16 KiB, hypercorn under
    # 64 KiB, granian under 120 KiB and 100 lines, uvicorn under 400 KiB). Each answers 4xx (or
    # closes the connection); none passes the request on.
    filler = "x" * 1024
    head = "".join(f"x-filler-{index}: {filler}\r\n" for index in range(1024))
    request = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}content-length: 2\r\n\r\n{{}}").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)  # (refused while the headers still arrive)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                reply += chunk
    if reply:
        status = int(reply.split(b" ", 2)[1])
        assert status in (400, 413, 431), reply[:200]
    assert post(server, {"host": f"127.0.0.1:{server.port}"}).status_code == 200


# TCP_NODELAY, read in the serving process ---------------------------------------------------------
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # x86-64 and arm64 alike


def socket_of(pid: int, local_port: int, remote_port: int) -> socket.socket:
    """A duplicate (pidfd_getfd) of process ``pid``'s socket for the TCP connection between
    ``local_port`` (its side) and ``remote_port``."""
    inode = None
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
            inode = fields[9]
    assert inode is not None, "no such connection"
    target = f"socket:[{inode}]"
    fd = next(int(name) for name in os.listdir(f"/proc/{pid}/fd")
              if os.readlink(f"/proc/{pid}/fd/{name}") == target)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        pytest.skip(f"pidfd_open: {os.strerror(ctypes.get_errno())}")
    try:
        copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            pytest.skip(f"pidfd_getfd (reading another process's socket): {os.strerror(ctypes.get_errno())}")
        return socket.socket(fileno=copy)
    finally:
        os.close(pidfd)


def test_every_connection_has_nagle_off(server, transactional_db):
    """A response written in pieces (SSE events) goes out piece by piece, never waiting for the
    client's delayed ACK: the server side of each connection has TCP_NODELAY."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")  # kept alive after
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        theirs = socket_of(server.serving_pid, server.port, sock.getsockname()[1])
        try:
            assert theirs.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            theirs.close()


def post_modern_call(port: int, message: dict) -> socket.socket:
    """A 2026-07-28 call (checked against its schema) sent as a raw POST on a connection of its
    own, left open for the caller to read."""
    check_client_message(message, MODERN)
    body = json.dumps(message).encode()
    headers = {**modern_headers(message), "host": f"127.0.0.1:{port}", "content-length": str(len(body))}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body)
    return sock


# A client that goes away -----------------------------------------------------------------------
@pytest.mark.feature("HTTP-30")
def test_a_client_that_goes_away_cancels_its_modern_call(server, transactional_db):
    message = {"jsonrpc": "2.0", "id": "gone-1", "method": "tools/call", "params": {
        "name": "progress_then_wait_for_cancel", "arguments": {},
        "_meta": {**envelope(), "progressToken": "p"}}}
    sock = post_modern_call(server.port, message)
    seen = b""
    while b"notifications/progress" not in seen:  # the call runs
        chunk = sock.recv(65536)
        assert chunk, seen
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen
    sock.close()
    wait_until(lambda: "progress_then_wait_for_cancel of request 'gone-1' saw the cancellation"
               in server.log, PATIENCE, "the call cancelled")


# granian's workers -----------------------------------------------------------------------------
def test_each_of_granians_workers_drains_on_sigterm(django_db_setup, django_db_blocker, transactional_db):
    """``granian --workers 2``: SIGTERM to its main process reaches every worker, and the one
    serving a call lets it finish (each progress notification, then the result) before it exits."""
    with running(django_db_blocker, server="granian", server_args=("--workers", "2")) as server:
        wait_until(lambda: len(children_of(server.process.pid)) == 2, PATIENCE, "two workers")
        message = {"jsonrpc": "2.0", "id": "drained", "method": "tools/call", "params": {
            "name": "slow_count", "arguments": {"count": 6, "delay": 0.5},
            "_meta": {**envelope(), "progressToken": "p"}}}
        with post_modern_call(server.port, message) as sock:
            seen = b""
            while b"notifications/progress" not in seen:
                chunk = sock.recv(65536)
                assert chunk, seen
                seen += chunk
            server.process.send_signal(signal.SIGTERM)
            while chunk := sock.recv(65536):
                seen += chunk
        assert server.process.wait(PATIENCE) == 0, server.log
        events = [json.loads(line[len(b"data: "):]) for line in seen.split(b"\n")
                  if line.startswith(b"data: {")]
        assert [event["params"]["progress"] for event in events[:-1]] == [1, 2, 3, 4, 5, 6]
        assert events[-1]["result"]["content"][0]["text"] == "Counted to 6"
        assert server.log.count("drained") == 2, server.log
