"""Session lifetimes across processes: idle expiry, the reaper, the session cap, a process that dies.

Daphne processes on PostgreSQL and Redis, as in test_http_multiprocess.py. Processes of different
settings never run at the same time (each group has its own class- or test-scoped processes):
they share the database, and a reaper with a short idle timeout would reap the others' sessions.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.utils import timezone

from mcp_server.models import Session

from .harness import REPO
from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    call_tool,
    cluster,
    ends,
    new_session,
    next_event,
    open_session,
    open_stream,
    post_checked,
    redis_client,
    require_services,
    twin,
    wait_until,
)
from .http_harness import HTTPClient, database_env
from .waiting import PATIENCE, SLOW_STEPS
from .wire import check_server_message

REDIS_DB = 14
IDLE = 4  # seconds, for the reaper test: it reaps every 2 seconds


def is_gone(client: HTTPClient, url: str) -> bool:
    response = post_checked(client, {"jsonrpc": "2.0", "id": 99, "method": "ping"}, url)
    assert response.status_code in (200, 404), response.text
    return response.status_code == 404


def forget_in_redis(session_id: str) -> None:
    """The session's shared-state entry expires (its time to live is the idle timeout)."""
    with redis_client(REDIS_DB) as redis:
        assert redis.delete(f"mcp:session:{session_id}") == 1


@pytest.fixture
def background():
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def slow_call(pool: ThreadPoolExecutor, client: HTTPClient, url: str):
    """A long slow_count on ``url``, run on a thread; returns (future, progress seen so far)."""
    progress: list = []
    runner = twin(client, url)
    future = pool.submit(
        runner.request, "tools/call", {"name": "slow_count", "arguments": {"count": SLOW_STEPS, "delay": 0.1},
                                       "_meta": {"progressToken": "slow"}},
        url=url, on_event=lambda e: progress.append(e) if e.message else None)
    wait_until(lambda: progress, what="the slow call to report progress")
    return future, progress


class TestIdleExpiry:
    @pytest.fixture(scope="class")
    @classmethod
    def pair(cls, django_db_setup, django_db_blocker):
        require_services()
        with cluster(2, redis_db=REDIS_DB, mcp_settings={"SESSION_IDLE_TIMEOUT": IDLE}) as servers:
            yield servers

    @pytest.mark.feature("HTTP-23", "HTTP-11")
    def test_idle_sessions_are_reaped_in_the_background_and_their_streams_end_in_both_processes(
            self, pair, transactional_db, background):
        a, b = pair[0].url, pair[1].url
        idle = new_session(a)
        stream = open_stream(idle, b)  # its GET stream on b, a request running on a
        before_last_use = time.monotonic()  # the slow call's POST is the session's last use
        call, _ = slow_call(background, idle, a)
        used_by_posts, used_by_gets = new_session(b), new_session(a)

        # Requests (POST or GET, on either process) keep the other two alive meanwhile.
        urls = [a, b]

        def reaped_while_the_others_are_used() -> bool:
            urls.reverse()
            assert used_by_posts.request("ping", url=urls[0]).response["result"] == {}
            open_stream(used_by_gets, urls[1]).close()
            return not Session.objects.filter(pk=idle.session_id).exists()

        wait_until(reaped_while_the_others_are_used, what="the idle session to be reaped", interval=0.2)
        assert time.monotonic() - before_last_use >= IDLE - 0.2  # not before its time

        ends(stream)
        exchange = call.result(timeout=PATIENCE)  # the request on a stopped, unanswered
        assert exchange.response is None
        assert len(exchange.notifications) < SLOW_STEPS
        assert is_gone(idle, a) and is_gone(idle, b)
        for client in (used_by_posts, used_by_gets):
            assert client.request("ping", url=b).response["result"] == {}


class TestReapingAndCap:
    """An idle timeout the processes do not reach during a test, and room for two sessions."""

    SETTINGS = {"SESSION_IDLE_TIMEOUT": 30, "MAX_SESSIONS": 2}

    @pytest.fixture(scope="class")
    @classmethod
    def pair(cls, django_db_setup, django_db_blocker):
        require_services()
        with cluster(2, redis_db=REDIS_DB, mcp_settings=cls.SETTINGS) as servers:
            yield servers

    @pytest.mark.feature("HTTP-23")
    def test_mcp_reap_sessions_removes_expired_sessions_and_ends_their_streams_everywhere(
            self, pair, transactional_db, background):
        a, b = pair[0].url, pair[1].url
        idle, live = new_session(a), new_session(b)
        stream = open_stream(idle, b)
        call, _ = slow_call(background, idle, a)
        forget_in_redis(idle.session_id)

        # Every process writes the activity it saw within a quarter of the idle timeout. Once
        # both rows are older than a 1 s timeout, only the live session's entry in the shared
        # state says it was used. A process may still write activity it saw before then (the
        # command then finds nothing to remove), so the command runs until a run removes one.
        def reaped() -> bool:
            recent = timezone.now() - datetime.timedelta(seconds=1.2)
            if Session.objects.filter(last_activity__gte=recent).exists():
                return False
            command = run_manage("mcp_reap_sessions", idle_timeout=1)
            assert command.returncode == 0, command.stderr
            outcome = command.stdout.strip()
            assert outcome in ("Removed 0 expired session(s).", "Removed 1 expired session(s)."), outcome
            return outcome == "Removed 1 expired session(s)."

        wait_until(reaped, what="mcp_reap_sessions to remove the idle session", interval=0.2)
        assert not Session.objects.filter(pk=idle.session_id).exists()
        ends(stream)  # on b
        assert call.result(timeout=PATIENCE).response is None  # on a
        assert is_gone(idle, a) and is_gone(idle, b)
        assert live.request("ping", url=a).response["result"] == {}

    @pytest.mark.feature("HTTP-23")
    def test_max_sessions_reclaims_expired_sessions_first_then_refuses_new_ones(self, pair, transactional_db):
        a, b = pair[0].url, pair[1].url
        abandoned = open_session(a)  # initialize, and never a request after it
        live, stranger = new_session(b), HTTPClient(a)
        for url in (a, b):
            refused = post_checked(stranger, initialize_message(), url)
            assert refused.status_code == 503 and "mcp-session-id" not in refused.headers
            assert "too many sessions" in refused.json()["error"]["message"]

        # The abandoned session expires: its row is old and its shared-state entry gone.
        Session.objects.filter(pk=abandoned).update(
            last_activity=timezone.now() - datetime.timedelta(hours=1))
        forget_in_redis(abandoned)
        newcomer = new_session(a)  # fits: the expired session went first
        assert not Session.objects.filter(pk=abandoned).exists()
        assert set(Session.objects.values_list("pk", flat=True)) == {live.session_id, newcomer.session_id}
        # No live session is evicted for a new one.
        assert post_checked(stranger, initialize_message(), b).status_code == 503
        for client in (live, newcomer):
            assert client.request("ping", url=a).response["result"] == {}


def sequence(event_id: str) -> int:
    return int(event_id.rsplit("/", 1)[1])


def initialize_message() -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}


def run_manage(command: str, *, idle_timeout: float) -> subprocess.CompletedProcess:
    """``manage.py <command>`` with the settings of the processes, on the same database and Redis."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(database_env(), DJANGO_SETTINGS_MODULE="tests.http_settings",
               REDIS_URL=f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}",
               MCP_TEST_HTTP_SETTINGS=json.dumps({"SESSION_IDLE_TIMEOUT": idle_timeout}))
    return subprocess.run([sys.executable, "manage.py", command], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.feature("HTTP-16")
def test_a_killed_process_loses_no_session_and_its_stream_can_be_reopened_elsewhere(
        django_db_setup, transactional_db):
    require_services()
    keepalive = 2.0  # the dead process's claim on its stream outlives it by 2 intervals + 5 s
    # Heartbeats that outlive the test: here the claim's own lapse frees the stream (the heartbeat
    # path, which frees it sooner, is test_http_liveness.py's).
    settings = {"KEEPALIVE_INTERVAL": keepalive, "PROCESS_HEARTBEAT_INTERVAL": 60}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as (doomed, survivor):
        client = new_session(doomed.url)
        stream = open_stream(client, doomed.url)
        call_tool(client, survivor.url, "define_extra_tool", {"name": "before_the_crash"})
        seen = next_event(stream)
        assert seen.message["method"] == "notifications/tools/list_changed"

        doomed.kill()
        ends(stream)
        assert client.request("ping", url=survivor.url).response["result"] == {}  # the session lives
        # Its stream is still claimed by the dead process, until the claim runs out
        # (2 keepalive intervals + 5 s without renewal).
        response = httpx.get(survivor.url, headers=client.headers(accept="text/event-stream"),
                             timeout=PATIENCE)
        assert response.status_code == 409
        check_server_message(response.json(), client.revision)
        call_tool(client, survivor.url, "define_extra_tool", {"name": "after_the_crash"})

        resumed = open_stream(client, survivor.url, last_event_id=seen.id)
        missed = next_event(resumed)
        assert missed.message["method"] == "notifications/tools/list_changed"
        assert sequence(missed.id) > sequence(seen.id)
        resumed.close()

        # The survivor keeps its streams alive with a keepalive comment every interval.
        other = new_session(survivor.url)
        with httpx.Client(timeout=PATIENCE) as http, http.stream(
                "GET", survivor.url, headers=other.headers(accept="text/event-stream")) as raw:
            assert raw.status_code == 200
            keepalives = 0
            for line in raw.iter_lines():  # a silent stream fails with a read timeout
                keepalives += line == ": keepalive"
                if keepalives == 2:
                    break


@pytest.mark.feature("HTTP-23")
def test_neither_limit_applies_in_stateless_mode(django_db_setup, transactional_db):
    require_services()
    settings = {"STATELESS": True, "MAX_SESSIONS": 1, "SESSION_IDLE_TIMEOUT": 1}
    with cluster(1, redis_db=REDIS_DB, mcp_settings=settings) as (server,):
        client = HTTPClient(server.url)
        for _ in range(3):
            response = post_checked(client, initialize_message(), server.url)
            assert response.status_code == 200 and "mcp-session-id" not in response.headers
        # The process itself waits past the idle timeout: there is no session to expire.
        assert call_tool(client, server.url, "sleepy", {"seconds": 1.2}) == "slept 1.2s"
        assert call_tool(client, server.url, "echo", {"message": "still here"}) == "still here"
        assert not Session.objects.exists()
