"""A POST stream resumed on another process while its first connection is still open, unread.

A client whose network changes may resume a POST stream (GET with ``Last-Event-ID``) before the
process serving the call sees the old connection go. That process must not go on writing the
call's events on a connection nobody reads: from the moment the stream is resumed, they reach the
resumed stream. Needs PostgreSQL and Redis (two daphne processes).
"""

from __future__ import annotations

import json
import re
import socket
from urllib.parse import urlsplit

from .http_cluster import cluster, new_session, next_event, redis_client, require_services, wait_until
from .http_harness import HTTPClient
from .wire import check_client_message

REDIS_DB = 11
EVENT_ID = re.compile(rb"id: (post:[^\r\n]+)")


def post_unread(client: HTTPClient, url: str, message: dict) -> socket.socket:
    """POST ``message`` on a raw connection, left open for the caller to read (or not)."""
    check_client_message(message, client.revision)
    body = json.dumps(message).encode()
    parts = urlsplit(url)
    headers = {**client.headers(), "Content-Type": "application/json", "Content-Length": str(len(body)),
               "Host": parts.netloc}
    connection = socket.create_connection((parts.hostname, parts.port), timeout=60)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    connection.sendall(f"POST {parts.path} HTTP/1.1\r\n{head}\r\n".encode() + body)
    return connection


def read_until(connection: socket.socket, marker: bytes) -> bytes:
    received = b""
    while marker not in received:
        chunk = connection.recv(65536)
        assert chunk, f"the connection ended before {marker!r}: {received!r}"
        received += chunk
    return received


def test_a_stream_resumed_elsewhere_gets_what_follows_though_the_first_connection_is_open(
        django_db_setup, transactional_db):
    require_services()
    with cluster(2, redis_db=REDIS_DB) as (serving, other):
        client = new_session(serving.url)
        # Long enough (100 s) that progress reaching the resumed stream only at the call's end
        # fails the wait below.
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "slow_count", "arguments": {"count": 1000, "delay": 0.1},
                           "_meta": {"progressToken": "p"}}}
        connection = post_unread(client, serving.url, call)
        try:
            # The client reads the first progress, then no further on this connection, and
            # resumes after it on the other process.
            received = read_until(connection, b'"progress":1,')
            first = EVENT_ID.findall(received)[-1].decode()
            resumed = client.listen(first, url=other.url)
            assert resumed.status == 200
            with redis_client(REDIS_DB) as redis:
                wait_until(lambda: redis.exists(f"mcp:stream:{client.session_id}:post:i7"), 30,
                           "the resumed stream's claim")
            # What the call sends from now on reaches the resumed stream while the call runs,
            # in order and each once (events stored before the claim come from the replay).
            steps = [next_event(resumed, timeout=60).message["params"]["progress"] for _ in range(5)]
            assert steps == list(range(steps[0], steps[0] + 5)) and steps[0] >= 2, steps
        finally:
            connection.close()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            check_client_message(cancel, client.revision)
            client.post_raw(json.dumps(cancel), url=other.url)
