"""Rolling restarts lose no call: a web process told to stop (SIGTERM) drains (mcp_server.http.drain).

Two processes on PostgreSQL and Redis, under daphne and under uvicorn, restarted one after the
other while a client runs a 6-second call with progress on the one stopped and holds the session's
GET stream there: the call ends with its result, the GET stream ends with a retry hint and resumes
on the other process with Last-Event-ID (with what was sent meanwhile), and the process exits. A
call longer than a short DRAIN_TIMEOUT ends as a process death ends it. In process: the health
check, the refusal of requests while draining, the SIGTERM chain, and the checks of the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from mcp_server.http import drain as drain_module
from mcp_server.http.daphne import cancel_applications
from mcp_server.http.drain import EXIT_STUCK, RETRY_MS, Drain, Draining, chain_sigterm
from mcp_server.http.liveness import request_stopped

from .harness import REPO
from .http_cluster import (
    REDIS_HOST,
    REDIS_PORT,
    CallInBackground,
    call_tool,
    cluster,
    ends,
    new_session,
    next_event,
    open_stream,
    require_services,
    stop_all,
)
from .http_harness import DaphneServer, Event, HTTPClient, Listener
from .http_support import call_asgi
from .listen_support import ListenStream
from .waiting import PATIENCE, wait_until

REDIS_DB = 6
# Heartbeats every second (a stopped process is known dead soon); keepalives rare, so that nothing
# here is let go because a claim lapsed. The drain waits for any call here.
SETTINGS = {"PROCESS_HEARTBEAT_INTERVAL": 1.0, "KEEPALIVE_INTERVAL": 60, "DRAIN_TIMEOUT": 120}
COUNT = 12  # slow_count: 12 steps of 0.5 s, a progress notification at each
PROGRESS = "notifications/progress"


def is_progress(event: Event) -> bool:
    return (event.message or {}).get("method") == PROGRESS


def health(url: str) -> str:
    return url.removesuffix("/mcp") + "/healthz"


def refuses_connections(url: str) -> bool:
    try:
        answer = httpx.get(url, timeout=PATIENCE)
    except httpx.ConnectError:
        return True
    assert (answer.status_code, answer.json()) == (503, {"status": "draining"}), answer.text
    return False


def drain_one(client: HTTPClient, victim: DaphneServer, survivor: DaphneServer, listener: Listener,
              request_id: int, checker: httpx.Client) -> Listener:
    """SIGTERM ``victim`` while a call runs there and the session's GET stream (``listener``) is
    held there; the GET stream resumed on ``survivor`` is returned."""
    assert checker.get(health(victim.url)).json() == {"status": "serving"}
    subscription = ListenStream(victim.url, f"listen-{request_id}", {"toolsListChanged": True})
    assert subscription.next()["method"] == "notifications/subscriptions/acknowledged"
    call = CallInBackground(client, victim.url, request_id, "slow_count", {"count": COUNT, "delay": 0.5},
                            meta={"progressToken": f"p{request_id}"})
    wait_until(lambda: call.event(is_progress) or call.exchange, PATIENCE, "the call's first progress")
    victim.process.send_signal(signal.SIGTERM)

    # The GET stream ends at once, its last event a retry hint naming the id to resume from.
    hint = ends(listener)[-1]
    assert (hint.retry, hint.message) == (RETRY_MS, None), hint
    assert hint.id is not None and hint.id.startswith("get/"), hint
    # So does a subscriptions/listen stream: its response, with the hint (its client opens it
    # again, on another process).
    completion = subscription.next()
    assert completion["id"] == f"listen-{request_id}" and completion["result"]["resultType"] == "complete"
    assert subscription.messages.get(timeout=PATIENCE) is None and subscription.retry == RETRY_MS
    # The process takes no new connection (the load balancer sends them to the other one); until
    # its server closed its socket, its health check says it drains.
    wait_until(lambda: refuses_connections(health(victim.url)), PATIENCE, "the socket closed")
    # A notification to every session while the stream is nowhere: stored, replayed where it resumes.
    call_tool(client, survivor.url, "define_extra_tool", {"name": f"extra_{request_id}"})
    resumed = open_stream(client, survivor.url, hint.id)
    assert next_event(resumed).message["method"] == "notifications/tools/list_changed"

    # The call ends with its result on its own stream, every progress notification before it.
    wait_until(lambda: call.exchange or call.error, PATIENCE, "the end of the call")
    assert call.error is None, call.error
    assert call.exchange.response["result"]["content"][0]["text"] == f"Counted to {COUNT}"
    assert [e.message["params"]["progress"] for e in call.events if is_progress(e)] == \
        list(range(1, COUNT + 1))
    # Then the process exits.
    victim.process.wait(PATIENCE)
    return resumed


@pytest.mark.parametrize("server", ["daphne", "uvicorn", "granian"])
def test_a_rolling_restart_loses_no_call_and_every_stream_resumes(server, django_db_setup, transactional_db):
    require_services()
    env = {"REDIS_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"}
    restarted: list[DaphneServer] = []
    with cluster(2, redis_db=REDIS_DB, mcp_settings=SETTINGS, server=server) as (a, b), \
            httpx.Client(timeout=PATIENCE) as checker:
        try:
            client = new_session(a.url)
            listener = open_stream(client, a.url)
            # A first, then A again; B then, with the GET stream where A's resumed.
            on_b = drain_one(client, a, b, listener, 101, checker)
            a_again = DaphneServer(mcp_settings=SETTINGS, env=env, server=server)
            restarted.append(a_again)
            on_a = drain_one(client, b, a_again, on_b, 102, checker)
            # The session goes on on the restarted process.
            assert call_tool(client, a_again.url, "echo", {"message": "still here"}) == "still here"
            on_a.close()
        finally:
            stop_all(restarted)


@pytest.mark.parametrize("server", ["daphne", "uvicorn", "granian"])
def test_a_call_longer_than_the_drain_timeout_ends_as_a_process_death_ends_it(
        server, django_db_setup, transactional_db):
    require_services()
    settings = {**SETTINGS, "DRAIN_TIMEOUT": 1}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings, server=server) as (doomed, survivor):
        client = new_session(doomed.url)
        call = CallInBackground(client, doomed.url, 201, "slow_count", {"count": 600, "delay": 0.1},
                                meta={"progressToken": "long"})
        seen = wait_until(lambda: call.event(is_progress), PATIENCE, "the call's first progress")
        doomed.process.send_signal(signal.SIGTERM)
        wait_until(lambda: call.exchange or call.error, PATIENCE, "the end of the call's stream")
        assert call.exchange is None or call.exchange.response is None, call.exchange
        doomed.process.wait(PATIENCE)
        # Resumed on the other process, the call gets the error of a stopped process; its id is free.
        last = [event for event in call.events if event.id is not None][-1]
        assert last.id >= seen.id
        resumed = client.listen(last.id, url=survivor.url)
        assert resumed.status == 200, resumed.status
        assert next_event(resumed).message == request_stopped(201)
        assert ends(resumed) == []
        assert client.request("ping", request_id=201, url=survivor.url).response["result"] == {}


# In process ----------------------------------------------------------------------------------------

async def _ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


async def test_the_health_check_says_draining_and_requests_are_refused_while_draining():
    process = Drain()
    app = Draining(_ok, process)

    async def get(path: str):
        scope_path = {"path": path}
        reply = await call_asgi(lambda scope, receive, send: app({**scope, **scope_path}, receive, send),
                                "GET", {"host": "127.0.0.1"})
        return reply.start["status"], dict(reply.start["headers"]), b"".join(
            message.get("body", b"") for message in reply.messages[1:])

    assert (await get("/healthz"))[::2] == (200, b'{"status": "serving"}')
    assert (await get("/mcp"))[::2] == (200, b"served")
    await process.wait(timeout=5)
    status, headers, body = await get("/healthz")
    assert (status, json.loads(body)) == (503, {"status": "draining"})
    assert headers[b"retry-after"] == b"1" and headers[b"connection"] == b"close"
    status, headers, _body = await get("/mcp")
    assert status == 503 and headers[b"connection"] == b"close"
    with override_settings(MCP_SERVER={"HEALTH_CHECK_PATH": None}):
        assert (await get("/healthz"))[0] == 503  # no health check: a request refused as any other


async def test_the_drain_waits_for_requests_in_flight_and_cancels_them_past_its_timeout():
    process = Drain()
    finished = asyncio.Event()

    async def request(seconds: float) -> None:
        with process.serving():
            await asyncio.sleep(seconds)
        finished.set()

    short = asyncio.ensure_future(request(0.2))
    await asyncio.sleep(0)
    await process.wait(timeout=60)
    assert short.done() and not short.cancelled() and finished.is_set()

    process = Drain()
    endless = asyncio.ensure_future(request(3600))
    await asyncio.sleep(0)
    await process.wait(timeout=0.1)
    assert endless.cancelled()


async def test_a_request_counted_though_it_ended_does_not_hold_the_drain():
    process = Drain()
    ended = asyncio.ensure_future(asyncio.sleep(0))
    await ended
    process._requests.add(ended)  # a count gone wrong
    await asyncio.wait_for(process.wait(timeout=3600), PATIENCE)
    assert not process._requests


class _StuckRuntime:
    """A runtime whose steps past the drain timeout never end (a store that hangs, say)."""

    def __init__(self) -> None:
        self.streams_ended = 0

    def end_streams(self, retry_ms: int) -> None:
        self.streams_ended += 1

    async def stop_requests(self) -> None:
        await asyncio.Event().wait()

    async def close(self) -> None:
        await asyncio.Event().wait()


async def test_the_drain_ends_though_a_request_ignores_its_cancellation_and_its_steps_hang(monkeypatch):
    monkeypatch.setattr(drain_module, "CANCEL_GRACE", 0.2)
    process = Drain()
    runtime = _StuckRuntime()
    process.add_runtime(runtime)
    cancelled, released = asyncio.Event(), asyncio.Event()

    async def stubborn() -> None:
        with process.serving():
            while not released.is_set():
                try:
                    await released.wait()
                except asyncio.CancelledError:
                    cancelled.set()  # and it goes on

    request = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)
    # Each step past the timeout is bounded: the drain ends, and counts the request no more.
    await asyncio.wait_for(process.wait(timeout=0.1), PATIENCE)
    assert cancelled.is_set() and not request.done() and runtime.streams_ended >= 1
    assert not process._requests
    released.set()
    await request


async def test_daphnes_application_instances_left_are_cancelled_within_a_bound(monkeypatch):
    monkeypatch.setattr(drain_module, "CANCEL_GRACE", 0.2)

    released = asyncio.Event()

    async def stubborn() -> None:
        while not released.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await released.wait()

    running, stubborn_one = asyncio.ensure_future(asyncio.Event().wait()), asyncio.ensure_future(stubborn())
    done = asyncio.ensure_future(asyncio.sleep(0))
    await asyncio.sleep(0.01)
    # A kept-alive connection between requests has no instance (daphne reaped it): no KeyError.
    connections = {"idle": {"connected": 1.0}, "done": {"application_instance": done},
                   "running": {"application_instance": running},
                   "stubborn": {"application_instance": stubborn_one}}
    assert await asyncio.wait_for(cancel_applications(connections), PATIENCE) == 2
    assert running.cancelled() and not stubborn_one.done()
    released.set()
    await stubborn_one


def test_a_process_whose_drain_outlives_its_bound_exits_anyway():
    # The event loop blocked past the drain timeout: nothing asynchronous can end the process.
    script = """
import asyncio, time
import mcp_server.http.drain as drain_module

drain_module.CANCEL_GRACE = drain_module.EXIT_MARGIN = 0.1

async def main():
    drain_module.Drain(exits=True).start(timeout=0.1)
    time.sleep(3600)

asyncio.run(main())
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=PATIENCE)
    assert result.returncode == EXIT_STUCK, result
    assert "did not exit within 0.5 s of the start of its drain" in result.stderr, result.stderr


async def test_sigterm_starts_the_drain_then_runs_the_servers_own_handler():
    process = Drain()
    received: list[int] = []
    original = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        assert chain_sigterm(process)
        assert chain_sigterm(process)  # once: a second call leaves the chain as it is
        signal.raise_signal(signal.SIGTERM)
        assert received == [signal.SIGTERM]
        while not process.started:
            await asyncio.sleep(0.01)
        assert process.draining
        await process.wait()
    finally:
        signal.signal(signal.SIGTERM, original)
    # No Python handler to chain (the default action): nothing is chained.
    original = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert not chain_sigterm(Drain())
    finally:
        signal.signal(signal.SIGTERM, original)


@pytest.mark.parametrize(("settings", "error"), [
    ({"DRAIN_TIMEOUT": -1}, "mcp_server.E080"),
    ({"DRAIN_TIMEOUT": "30"}, "mcp_server.E080"),
    ({"DRAIN_TIMEOUT": True}, "mcp_server.E080"),
    ({"HEALTH_CHECK_PATH": "healthz"}, "mcp_server.E081"),
    ({"HEALTH_CHECK_PATH": "/mcp"}, "mcp_server.E081"),
    ({"HEALTH_CHECK_PATH": "/health?x"}, "mcp_server.E081"),
])
def test_a_wrong_drain_setting_stops_start_up(settings, error):
    with override_settings(MCP_SERVER=settings), pytest.raises(SystemCheckError, match=error):
        call_command("check")


def test_the_drain_settings_pass_the_checks():
    with override_settings(MCP_SERVER={"DRAIN_TIMEOUT": 0, "HEALTH_CHECK_PATH": None}):
        call_command("check")
    with override_settings(MCP_SERVER={"DRAIN_TIMEOUT": 2.5, "HEALTH_CHECK_PATH": "/ready"}):
        call_command("check")
