"""When Redis or PostgreSQL fail under running daphne processes.

Redis here is one the test starts on a free port (so it can be paused, flushed and stopped without
touching anyone else's), alone or behind a loopback proxy that stops forwarding on demand.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.db import connection

from mcp_server import Server, ServerContext
from mcp_server.http import StreamableHTTPTransport
from mcp_server.http.event_store import DatabaseEventStore
from mcp_server.http.redis_client import RedisUnavailable
from mcp_server.http.runtime import GROUP_REJOIN_INTERVAL, runtime_group

from .harness import CLIENT_INFO
from .http_cluster import (
    call_tool,
    cluster,
    ends,
    new_session,
    next_event,
    open_stream,
    require_services,
    twin,
    wait_until,
)
from .http_harness import DaphneServer, HTTPClient
from .http_support import call_asgi, post_headers
from .redis_faults import pausable_proxy, redis_server
from .test_database_connections import connections_of
from .wire import check_client_message, check_server_message

LIST_CHANGED = "notifications/tools/list_changed"
INTERNAL_ERROR = -32603
# The channel layer's key of the group of the processes serving the demo server (channels_redis,
# prefix "asgi").
GROUP_KEY = f"asgi:group:{runtime_group(settings.MCP_SERVER['NAME'])}"
# Generous room on top of each documented bound, for a loaded machine.
SLACK = 30


def echo(client: HTTPClient, url: str, text: str):
    return client.request("tools/call", {"name": "echo", "arguments": {"message": text}}, url=url)


def assert_unavailable(exchange, what: str = "the shared state") -> None:
    assert exchange.status == 503, (exchange.status, exchange.response)
    assert int(exchange.headers["retry-after"]) >= 1
    error = exchange.response["error"]
    assert error["code"] == INTERNAL_ERROR
    assert error["message"] == f"Service Unavailable: {what} does not answer; try again later"


@pytest.mark.parametrize("client_settings", [{}, {"REDIS_OPTIONS": {}}], ids=["fast-client", "redis-py"])
def test_a_redis_that_stops_answering_gets_503_at_once_and_the_process_recovers_by_itself(
        django_db_setup, transactional_db, tmp_path, client_settings):
    require_services()
    with redis_server(tmp_path) as redis, pausable_proxy(redis.port) as proxy:
        # The shared state, the event store and the channel layer all reach Redis through the proxy.
        server = DaphneServer(mcp_settings={"REDIS_COMMAND_TIMEOUT": 1, **client_settings},
                              env={"REDIS_URL": proxy.url})
        try:
            client = new_session(server.url)
            assert echo(client, server.url, "before").response["result"]["content"][0]["text"] == "before"

            proxy.pause()
            # Each request waits at most the command deadline (or not at all while the process backs
            # off from reconnecting), and gets 503 with Retry-After; the client's own 30 s read
            # timeout would fail the test if one hung.
            for attempt in range(3):
                assert_unavailable(echo(client, server.url, f"during {attempt}"))
            listener = client.listen(url=server.url)
            assert listener.status == 503
            listener.close()
            assert client.delete(url=server.url).status_code == 503
            assert server.process.poll() is None
            assert "Redis did not answer within 1 s" in server.log  # REDIS_COMMAND_TIMEOUT

            proxy.resume()
            wait_until(lambda: echo(client, server.url, "after").status == 200, 60,
                       "the process to serve again once Redis answers")
            # The same session, nothing lost; and the channel layer works again: a list change
            # reaches the session's GET stream.
            stream = open_stream(client, server.url)
            call_tool(client, server.url, "define_extra_tool", {"name": "after_the_pause"})
            assert next_event(stream, timeout=SLACK).message["method"] == LIST_CHANGED
            stream.close()
            assert client.delete(url=server.url).status_code == 200
        finally:
            server.stop()


def test_a_request_that_ends_while_redis_does_not_answer_frees_its_id_once_redis_is_back(
        django_db_setup, transactional_db, tmp_path):
    require_services()
    with redis_server(tmp_path) as redis, pausable_proxy(redis.port) as proxy, redis.client() as direct:
        # JSON responses: once its tool runs, the call's answer needs no Redis, only the release
        # of its id does.
        server = DaphneServer(mcp_settings={"REDIS_COMMAND_TIMEOUT": 1, "ENABLE_JSON_RESPONSE": True},
                              env={"REDIS_URL": proxy.url})
        try:
            client = new_session(server.url)
            claim = f"mcp:req:{client.session_id}:sslow"  # the claim of request id "slow"
            with ThreadPoolExecutor(1) as pool:
                call = pool.submit(twin(client, server.url).request, "tools/call", {
                    "name": "wait_for_cancel", "arguments": {"limit": 5}}, request_id="slow", url=server.url)
                # The tool runs: the request needs no Redis again before its answer.
                wait_until(lambda: "wait_for_cancel of request 'slow' is waiting" in server.log, SLACK,
                           "the call to reach its tool")
                assert direct.exists(claim)
                proxy.pause()
                answer = call.result(timeout=SLACK)
            assert answer.status == 200
            assert answer.response["result"]["content"][0]["text"] == "never cancelled"
            wait_until(lambda: f"releasing req:{client.session_id}:sslow failed" in server.log, SLACK,
                       "the release to fail")
            assert direct.exists(claim)
            proxy.resume()
            wait_until(lambda: not direct.exists(claim), SLACK, "the claim to be released in the background")
            again = client.request("tools/call", {"name": "echo", "arguments": {"message": "again"}},
                                   request_id="slow", url=server.url)
            assert again.status == 200 and again.response["result"]["content"][0]["text"] == "again"
        finally:
            server.stop()


def test_a_process_whose_first_request_finds_redis_not_answering_starts_once_it_answers(
        django_db_setup, transactional_db, tmp_path):
    require_services()
    with redis_server(tmp_path) as redis, pausable_proxy(redis.port) as proxy:
        server = DaphneServer(mcp_settings={"REDIS_COMMAND_TIMEOUT": 1}, env={"REDIS_URL": proxy.url})
        try:
            proxy.pause()
            # Joining the group of processes fails (after LAYER_TIMEOUT): 503, and the process is
            # not left half started.
            client = HTTPClient(server.url)
            message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": client.revision, "capabilities": {}, "clientInfo": CLIENT_INFO}}
            check_client_message(message, client.revision)
            response = client.post_raw(json.dumps(message), url=server.url)
            assert response.status_code == 503, response.text
            check_server_message(response.json(), client.revision)
            assert response.json()["error"]["message"].startswith("Service Unavailable")
            proxy.resume()
            client.initialize(url=server.url)
            stream = open_stream(client, server.url)
            call_tool(client, server.url, "define_extra_tool", {"name": "once_started"})
            assert next_event(stream, timeout=SLACK).message["method"] == LIST_CHANGED
            stream.close()
        finally:
            server.stop()


def test_after_redis_loses_its_data_broadcasts_resumes_and_delete_recover_within_the_bound(
        django_db_setup, transactional_db, tmp_path):
    require_services()
    keepalive = 1
    with redis_server(tmp_path) as redis, \
            cluster(2, redis_db=0, redis_port=redis.port, mcp_settings={"KEEPALIVE_INTERVAL": keepalive}) \
            as (a, b), redis.client() as direct:
        first, second = new_session(a.url), new_session(a.url)
        first_stream, second_stream = open_stream(first, b.url), open_stream(second, b.url)
        call_tool(first, a.url, "define_extra_tool", {"name": "before_the_flush"})
        for stream in (first_stream, second_stream):
            assert next_event(stream).message["method"] == LIST_CHANGED
        # A call in flight on B, which only a cancel or the end of the session stops.
        waiting = twin(first, b.url)
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(waiting.request, "tools/call", {"name": "wait_for_cancel",
                                                               "arguments": {"limit": 120}},
                               request_id="in-flight", url=b.url)

            def claims() -> dict[str, int]:
                return {client.session_id: int(direct.get(f"mcp:held:{client.session_id}") or 0)
                        for client in (first, second)}

            expected = {first.session_id: 2, second.session_id: 1}  # streams, and the call
            wait_until(lambda: claims() == expected, SLACK, "the call to be in flight")

            direct.flushall()  # a failover to an empty replica looks the same
            assert direct.zcard(GROUP_KEY) == 0 and claims() == {first.session_id: 0, second.session_id: 0}
            # The documented bound: every GROUP_REJOIN_INTERVAL, each process renews its group
            # membership and finds its marker gone: it claims its streams and requests again.
            wait_until(lambda: direct.zcard(GROUP_KEY) == 2, GROUP_REJOIN_INTERVAL + SLACK,
                       "both processes to be back in the group")
            wait_until(lambda: claims() == expected, GROUP_REJOIN_INTERVAL + SLACK,
                       "the claims of the streams and the call to be made again")

            # A broadcast from A reaches the GET streams B holds.
            call_tool(first, a.url, "define_extra_tool", {"name": "after_the_flush"})
            seen = next_event(second_stream)
            assert seen.message["method"] == LIST_CHANGED
            assert next_event(first_stream).message["method"] == LIST_CHANGED

            # A client that misses a broadcast resumes on the other process and gets it.
            second_stream.close()
            call_tool(first, a.url, "define_extra_tool", {"name": "while_away"})
            assert next_event(first_stream).message["method"] == LIST_CHANGED
            resumed = open_stream(second, a.url, last_event_id=seen.id, timeout=SLACK)
            missed = next_event(resumed)
            assert missed.message["method"] == LIST_CHANGED and missed.id != seen.id
            resumed.close()

            # DELETE on A ends the stream B holds since before the flush, and stops the call
            # there: it sends nothing more (long before its 120 s limit).
            assert first.delete(url=a.url).status_code == 200
            ends(first_stream, timeout=SLACK)
            assert call.result(timeout=SLACK).response is None
        assert second.request("ping", url=b.url).response["result"] == {}


def terminate_backends() -> int:
    """``pg_terminate_backend`` every connection of the processes to the test database (named by
    tests/http_settings.py; the test run's own stay); returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'mcp-test-server'")
        return cursor.fetchone()[0]


def test_postgresql_backends_terminated_between_requests_lose_no_session(django_db_setup, transactional_db,
                                                                        tmp_path):
    """The server ending the processes' connections (a restart, a failover, pg_terminate_backend)
    between requests fails none of them: a process keeps no connection between requests
    (``CONN_MAX_AGE`` 0), so each step opens its own, and no session is lost."""
    require_services()
    with redis_server(tmp_path) as redis, cluster(2, redis_db=0, redis_port=redis.port) as servers:
        urls = [server.url for server in servers]
        kept = [new_session(url) for url in urls]
        terminate_backends()
        for round_ in range(6):
            # Each step uses the database (a session opened, changed, closed), each on a process
            # whose connections were just terminated: none fails, none is retried.
            url, other = urls[round_ % 2], urls[(round_ + 1) % 2]
            client = new_session(url)
            terminate_backends()
            assert client.request("logging/setLevel", {"level": "debug"}, url=other).status == 200
            terminate_backends()
            assert client.request("ping", url=url).response["result"] == {}
            assert client.delete(url=url).status_code == 200
            terminate_backends()
            client.close()
        # Nothing is kept idle for the server to end: once the requests are done, no connection.
        wait_until(lambda: connections_of("mcp-test-server") == 0, what="the processes to hold no connection")
        # The sessions opened before are all there, on every process.
        for client in kept:
            for url in urls:
                assert client.request("ping", url=url).response["result"] == {}
                assert client.request("logging/setLevel", {"level": "info"}, url=url).status == 200


# In process: a store that fails once the stream has started ---------------------------------------
async def call_work_with_progress(app) -> tuple:
    """A session's call of the tool ``work`` with a progress token, in process: the reply (200)
    and the messages its SSE body carried."""
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}})
    session_id = (await call_asgi(app, "POST", post_headers(), [init.encode()])
                  ).header(b"mcp-session-id").decode()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "work", "arguments": {}, "_meta": {"progressToken": "p"}}}
    check_client_message(call, "2025-11-25")
    reply = await call_asgi(app, "POST", post_headers(
        session_id, **{"mcp-protocol-version": "2025-11-25"}), [json.dumps(call).encode()])
    assert reply.start["status"] == 200
    sent = [json.loads(line[5:]) for line in reply.body.decode().splitlines()
            if line.startswith("data:") and line[5:].strip()]
    return reply, sent


class ResponsesNotStored(DatabaseEventStore):
    """Stores notifications, and fails as a Redis that stopped answering on responses."""

    async def append(self, session_id, stream, message, level=""):
        if "id" in message and "method" not in message:
            raise RedisUnavailable("the event store does not answer")
        return await super().append(session_id, stream, message, level)


@pytest.mark.parametrize("progress", [True, False], ids=["stream-started", "nothing-sent-yet"])
async def test_a_response_that_cannot_be_stored_still_reaches_the_listening_client(
        transactional_db, short_lived_connections, progress):
    server = Server("unstored")

    @server.tool
    async def work(server_context: ServerContext) -> str:
        if progress:
            await server_context.report_progress(1, 2)
        return "done"

    transport = StreamableHTTPTransport(server, event_store=ResponsesNotStored())
    app = transport.as_asgi()
    try:
        reply, sent = await call_work_with_progress(app)
        answer = {"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "done"}], "isError": False}}
        assert sent[-1] == answer
        assert len(sent) == (2 if progress else 1)
        for message in sent:
            check_server_message(message, "2025-11-25")
        assert reply.messages[-1]["more_body"] is False
    finally:
        await transport.close()


class NothingStored(DatabaseEventStore):
    """Fails as a Redis that stopped answering (a failover under way) on every event."""

    async def append(self, session_id, stream, message, level=""):
        raise RedisUnavailable("the event store does not answer")


async def test_progress_that_cannot_be_stored_still_reaches_the_listening_client(
        transactional_db, short_lived_connections):
    server = Server("unstored-progress")

    @server.tool
    async def work(server_context: ServerContext) -> str:
        for step in (1, 2):
            await server_context.report_progress(step, 2, f"step {step}")
        return "done"

    transport = StreamableHTTPTransport(server, event_store=NothingStored())
    app = transport.as_asgi()
    try:
        reply, sent = await call_work_with_progress(app)
        for message in sent:
            check_server_message(message, "2025-11-25")
        # Every step, unstored (so with no event id to resume from), then the response.
        assert [message["params"]["progress"] for message in sent[:-1]] == [1, 2]
        assert sent[-1]["result"]["content"][0]["text"] == "done"
        ids = [line for line in reply.body.decode().splitlines() if line.startswith("id:")]
        assert len(ids) == 1  # the priming event's alone
    finally:
        await transport.close()
