"""A Redis Sentinel failover under a running deployment: two daphne processes and a Celery worker
whose event store, shared state, channel layer and broker all name the primary through three
sentinels (``redis+sentinel://``), on PostgreSQL.

The primary is killed with SIGKILL while clients call a tool with progress, hold a GET stream and
wait for a background call on the worker. Once the sentinels promote the replica, calls succeed
again within the bound docs/production.md gives ("Redis Sentinel"); every call in flight ended
with its result or a JSON-RPC error (none hung), the sessions are the same, the GET stream gets
broadcasts again, and the background call completes. The gap from the kill to the first call
served again is printed (run with ``-s``) and recorded as the test's ``failover_gap`` property.

Then a replica that lags (its link to the primary paused): the claims it never received are made
again on it once promoted, and the session they belong to works as before.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest

from mcp_server.http.redis_client import BACKOFF_CAP
from mcp_server.http.runtime import GROUP_REJOIN_INTERVAL
from mcp_server.models import ToolCall

from .celery_support import celery_worker
from .http_cluster import cluster, listening, new_session, open_stream, require_services, twin
from .http_harness import HTTPClient, Listener
from .redis_faults import sentinel_group
from .waiting import PATIENCE, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

LIST_CHANGED = "notifications/tools/list_changed"
DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS = 1000, 5000
LAGGING_FAILOVER_TIMEOUT_MS = 120_000
# The documented bound, from the promotion of the replica to calls served again: the reconnection
# backoff's cap (each process asks the sentinels again at its next attempt).
SERVED_AGAIN_AFTER_PROMOTION = BACKOFF_CAP
SLACK = 30  # room on top of each bound for a loaded machine
LOADERS = 3
UNAVAILABLE = "Service Unavailable: the shared state does not answer; try again later"


@dataclass
class Outcomes:
    """What each call of one load thread ended with: (kind, detail, started, ended)."""

    calls: list[tuple[str, str, float, float]] = field(default_factory=list)

    def successes_after(self, moment: float) -> int:
        return sum(1 for kind, _, started, _ in self.calls if kind == "result" and started > moment)


def call_with_progress(client: HTTPClient, url: str, token: str) -> tuple[str, str]:
    """One slow_count call with a progress token: ("result", "") with all its progress,
    ("error", message) for a JSON-RPC error, ("unavailable", message) for a 503."""
    progress: list[dict] = []

    def seen(event) -> None:
        if event.message and event.message.get("method") == "notifications/progress":
            progress.append(event.message["params"])

    exchange = client.request("tools/call", {"name": "slow_count", "arguments": {"count": 3, "delay": 0.2},
                                             "_meta": {"progressToken": token}}, url=url, on_event=seen)
    answer = exchange.response
    if exchange.status == 503:
        assert answer["error"]["message"] == UNAVAILABLE, answer
        assert int(exchange.headers["retry-after"]) >= 1
        return "unavailable", answer["error"]["message"]
    assert exchange.status == 200, (exchange.status, answer)
    assert answer is not None, f"the call's stream ended with no response: {exchange.events}"
    if "error" in answer:
        assert answer["error"]["message"], answer
        return "error", answer["error"]["message"]
    assert answer["result"]["content"][0]["text"] == "Counted to 3", answer
    # Every step, in order: those sent while Redis had no primary went out unstored.
    assert [each["progress"] for each in progress] == [1, 2, 3], progress
    return "result", ""


def load(client: HTTPClient, url: str, name: str, stop: threading.Event, outcomes: Outcomes) -> None:
    """Calls one after another until ``stop`` (bounded in number and time)."""
    deadline = time.monotonic() + 10 * PATIENCE
    for number in range(2000):
        if stop.is_set() or time.monotonic() > deadline:
            return
        started = time.monotonic()
        try:
            kind, detail = call_with_progress(client, url, f"{name}-{number}")
        except httpx.TransportError as exc:  # the harness client waits PATIENCE at most
            kind, detail = "transport", repr(exc)
        outcomes.calls.append((kind, detail, started, time.monotonic()))
        if kind == "unavailable":
            stop.wait(0.2)  # a client backs off (less than Retry-After, to see the recovery sooner)


def served(client: HTTPClient, url: str) -> bool:
    exchange = client.request("tools/call", {"name": "echo", "arguments": {"message": "again"}}, url=url)
    return exchange.status == 200 and exchange.response.get("result", {}).get("content", [{}])[0].get(
        "text") == "again"


def broadcast_reaches(stream: Listener, client: HTTPClient, url: str, last_id: str | None,
                      trigger: HTTPClient, trigger_url: str) -> Listener:
    """A tools list change made on ``trigger_url`` reaches the session's GET stream: the stream
    open since before the failover, or (if the failover ended it) one resumed from ``last_id``."""
    exchange = trigger.request("tools/call", {"name": "define_extra_tool",
                                              "arguments": {"name": f"after_{time.monotonic_ns()}"}},
                               url=trigger_url)
    assert exchange.status == 200 and "result" in exchange.response, exchange
    deadline = time.monotonic() + GROUP_REJOIN_INTERVAL + SLACK
    for _ in range(20):
        try:
            event = stream.events.get(timeout=max(0.01, deadline - time.monotonic()))
        except Exception as exc:
            raise AssertionError("the list change never reached the GET stream") from exc
        if event is None:  # ended by the failover: resume where it was
            stream = open_stream(client, url, last_event_id=last_id, timeout=SLACK)
            continue
        if event.id:
            last_id = event.id
        if event.message and event.message.get("method") == LIST_CHANGED:
            return stream
    raise AssertionError("the list change never reached the GET stream")


@pytest.mark.parametrize("client_settings", [{}, {"REDIS_OPTIONS": {}}], ids=["fast-client", "redis-py"])
def test_a_killed_primary_is_replaced_by_its_replica_and_calls_resume_within_the_bound(
        django_db_setup, tmp_path, client_settings, record_property):
    require_services()
    mcp_settings = {"PROCESS_HEARTBEAT_INTERVAL": 1, **client_settings}
    with sentinel_group(tmp_path, down_after_ms=DOWN_AFTER_MS, failover_timeout_ms=FAILOVER_TIMEOUT_MS) \
            as group:
        env = {"REDIS_URL": group.url(0), "CELERY_BROKER_URL": group.url(1)}
        with cluster(2, redis_db=0, redis_port=group.primary.port, mcp_settings=mcp_settings, env=env,
                     wait=False) as (a, b), \
                celery_worker(broker_url=group.url(1), redis_url=group.url(0),
                              mcp_settings_json=json.dumps(mcp_settings)) as worker:
            listening([a, b])
            clients = [new_session((a, b)[index % 2].url) for index in range(LOADERS)]
            watcher, probe = new_session(a.url), new_session(b.url)
            stream = open_stream(watcher, b.url)

            # A background call on the worker, held by its gate across the failover.
            gate = tmp_path / "gate"
            background = twin(watcher, a.url)
            stop = threading.Event()
            outcomes = [Outcomes() for _ in clients]
            with ThreadPoolExecutor(LOADERS + 1) as pool:
                pending = pool.submit(background.request, "tools/call", {
                    "name": "background_job", "arguments": {"steps": 2, "gate": str(gate), "limit": 120},
                    "_meta": {"progressToken": "background"}}, url=a.url)
                loaders = [pool.submit(load, twin(client, (a, b)[index % 2].url), (a, b)[index % 2].url,
                                       f"load{index}", stop, outcomes[index])
                           for index, client in enumerate(clients)]
                try:
                    wait_until(lambda: all(each.successes_after(0) for each in outcomes), SLACK,
                               "every load thread to have a call served")
                    wait_until(lambda: ToolCall.objects.filter(tool="background_job",
                                                               state=ToolCall.State.RUNNING).exists(),
                               SLACK, "the worker to take the background call")

                    killed = time.monotonic()
                    group.primary.process.send_signal(signal.SIGKILL)
                    group.primary.process.wait(PATIENCE)
                    wait_until(lambda: group.primary_port() == group.replica.port,
                               (DOWN_AFTER_MS + FAILOVER_TIMEOUT_MS) / 1000 + SLACK,
                               "the sentinels to promote the replica")
                    promoted = time.monotonic()
                    wait_until(lambda: served(probe, a.url) and served(probe, b.url),
                               SERVED_AGAIN_AFTER_PROMOTION + SLACK, "both processes to serve calls again")
                    back = time.monotonic()
                    gap, after_promotion = back - killed, back - promoted
                    print(f"\n[{request_name(client_settings)}] failover: promoted {promoted - killed:.2f} s "
                          f"after the kill; calls served again {gap:.2f} s after the kill "
                          f"({after_promotion:.2f} s after the promotion)")
                    record_property("failover_gap", round(gap, 3))
                    record_property("served_after_promotion", round(after_promotion, 3))

                    # Every load thread gets calls served again, with all their progress.
                    wait_until(lambda: all(each.successes_after(back) for each in outcomes), SLACK,
                               "every load thread to have a call served after the failover")
                finally:
                    stop.set()
                    for loader in loaders:
                        loader.result(timeout=2 * PATIENCE)
                gate.touch()
                finished = pending.result(timeout=PATIENCE + SLACK)

            # The background call held across the failover ends with its result from the worker.
            assert finished.status == 200 and "result" in finished.response, finished
            assert json.loads(finished.response["result"]["content"][0]["text"])["pid"] == worker.process.pid
            # No call hung or ended otherwise than with its result or a JSON-RPC error.
            kinds = {kind for each in outcomes for kind, *_ in each.calls}
            across = sum(1 for each in outcomes for kind, _, started, ended in each.calls
                         if kind == "result" and started < killed < ended)
            assert kinds <= {"result", "error", "unavailable"}, [
                call for each in outcomes for call in each.calls if call[0] not in ("result", "error",
                                                                                   "unavailable")]
            # The sessions are the same ones: each answers on both processes (with ids of their
            # own: the load threads' twins used the clients' next ids).
            for client in (*clients, watcher, probe):
                for server in (a, b):
                    pong = client.request("ping", request_id=f"ping-{server.port}", url=server.url)
                    assert pong.status == 200 and pong.response.get("result") == {}, pong
            # Broadcasts reach the GET stream again.
            broadcast_reaches(stream, watcher, b.url, None, probe, a.url).close()
            # A new background call goes through the broker on the promoted replica.
            again = probe.request("tools/call", {"name": "background_job", "arguments": {"steps": 1}},
                                  url=b.url)
            assert "result" in again.response, again
            assert json.loads(again.response["result"]["content"][0]["text"])["pid"] == worker.process.pid
            summary = {kind: sum(1 for each in outcomes for call in each.calls if call[0] == kind)
                       for kind in sorted(kinds)}
            errors = sorted({call[1] for each in outcomes for call in each.calls if call[0] == "error"})
            print(f"calls by outcome: {summary} ({across} results of calls in flight at the kill); "
                  f"errors: {errors}")


def request_name(client_settings: dict) -> str:
    return "redis-py" if client_settings else "fast client"


def test_what_the_replica_had_not_received_is_recovered_after_the_failover(django_db_setup, tmp_path):
    """The replica stops receiving (its link paused), then a session opens a GET stream and runs a
    call: their claims are on the primary alone when it is killed. On the promoted replica they
    are made again within GROUP_REJOIN_INTERVAL, the session is read again from its row, a
    broadcast reaches its stream, and its DELETE stops the call in the other process."""
    require_services()
    # A sentinel puts a replica that follows another address than the primary's (the proxy) back
    # on the primary, but only failover-timeout after it saw it so: long enough here.
    with sentinel_group(tmp_path, down_after_ms=DOWN_AFTER_MS,
                        failover_timeout_ms=LAGGING_FAILOVER_TIMEOUT_MS, lagging=True) as group, \
            cluster(2, redis_db=0, redis_port=group.primary.port, env={"REDIS_URL": group.url(0)},
                    mcp_settings={"PROCESS_HEARTBEAT_INTERVAL": 1, "KEEPALIVE_INTERVAL": 1}) as (a, b):
        group.link.pause()
        late = new_session(a.url)  # known to the primary alone
        stream = open_stream(late, b.url)
        with group.primary.client() as primary:
            wait_until(lambda: int(primary.get(f"mcp:held:{late.session_id}") or 0) == 1, SLACK,
                       "the stream's claim on the primary")
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(twin(late, b.url).request, "tools/call", {
                "name": "wait_for_cancel", "arguments": {"limit": 120}}, request_id="late", url=b.url)
            with group.primary.client() as primary:
                wait_until(lambda: int(primary.get(f"mcp:held:{late.session_id}") or 0) == 2, SLACK,
                           "the call's claim on the primary")
            with group.replica.client() as replica:
                assert replica.get(f"mcp:held:{late.session_id}") is None  # it never got them

            group.primary.process.send_signal(signal.SIGKILL)
            group.primary.process.wait(PATIENCE)
            wait_until(lambda: group.primary_port() == group.replica.port, DOWN_AFTER_MS / 1000 + SLACK,
                       "the sentinels to promote the replica")
            with group.replica.client() as promoted:
                wait_until(lambda: int(promoted.get(f"mcp:held:{late.session_id}") or 0) == 2,
                           GROUP_REJOIN_INTERVAL + SERVED_AGAIN_AFTER_PROMOTION + SLACK,
                           "the claims of the stream and the call to be made again")
            assert late.request("ping", request_id="after", url=a.url).response["result"] == {}
            stream = broadcast_reaches(stream, late, b.url, None, late, a.url)
            # DELETE on A ends the stream B holds and stops the call there: no response.
            assert late.delete(url=a.url).status_code == 200
            assert call.result(timeout=SLACK).response is None
        stream.close()
