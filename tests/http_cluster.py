"""Several daphne processes sharing PostgreSQL and Redis, as in production, for the HTTP tests
that spread one session over many processes (test_http_multiprocess.py, test_http_sessions.py).

Each test module uses its own Redis database index, flushed when its processes start. A cluster
holds that database for its whole life (:class:`RedisLease`): a second test run on the same Redis
(another checkout's suite on the default port, say) waits for it instead of flushing it under a
running test, whose claims and stored events would vanish.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

from .harness import CLIENT_INFO
from .http_harness import DaphneServer, Event, HTTPClient, Listener
from .services import reachable, require
from .waiting import PATIENCE, wait_until
from .wire import check_client_message, check_server_message

# MCP_TEST_REDIS_PORT lets two checkouts run their suites side by side, each on its own Redis.
REDIS_HOST, REDIS_PORT = "127.0.0.1", int(os.environ.get("MCP_TEST_REDIS_PORT", "6379"))


def require_services() -> None:
    """PostgreSQL under the tests (every process must share the database) and a reachable Redis."""
    from django.db import connection

    require(connection.vendor == "postgresql",
            "needs PostgreSQL shared by several daphne processes: set "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres")
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")


def redis_client(db: int, port: int | None = None) -> Any:
    import redis

    return redis.Redis(host=REDIS_HOST, port=port or REDIS_PORT, db=db, decode_responses=True)


# The key holding a Redis database for the cluster of one test run; outside every key prefix the
# processes use (``mcp:``), so their own keys are the same with or without it.
LEASE_KEY = "tests:cluster-lease"
LEASE_TTL = 30.0  # seconds a lease outlives its last renewal (a test run killed mid-test)
LEASE_RENEWAL = 5.0
# How long a cluster waits for another run's: that run's whole test module, at worst.
LEASE_PATIENCE = 30 * 60.0

# (port, db) -> the lease this process holds on it.
_HELD: dict[tuple[int, int], RedisLease] = {}

# Set the lease's expiry, or delete it, only while it is still the given holder's.
_RENEW = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
          "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0")
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_HAND_BACK = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
              "return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return 0")


class RedisLease:
    """One test run's hold on a Redis database: taken (and the database flushed, in the same
    transaction) once no other run holds it, renewed while held, given back at the end.

    A run whose tests flush without a lease (older tests, a broker database emptied by
    ``celery_support.redis_broker``) still wipes it: :meth:`check` then says so, so that a test
    failing for it fails with the reason rather than with the vanished state's symptom.
    """

    def __init__(self, db: int, port: int | None = None):
        self.db, self.port = db, port or REDIS_PORT
        self.token = f"pid {os.getpid()} {uuid.uuid4().hex}"
        self.waiting_for: str | None = None  # the other run's lease while this one waits
        self._stop = threading.Event()
        self._renewal: threading.Thread | None = None
        self._outer: RedisLease | None = None  # this process's lease it took over, if nested

    def __str__(self) -> str:
        return f"Redis database {self.db} on {REDIS_HOST}:{self.port}"

    def acquire(self, patience: float = LEASE_PATIENCE) -> None:
        """Wait until no other run holds the database, then hold it and flush it.

        A cluster nested in another of this process on the same database (a test beside its
        module's cluster) flushes it at once, as it always did, and hands it back when it ends."""
        self._outer = _HELD.get((self.port, self.db))
        with redis_client(self.db, self.port) as client:
            try:
                wait_until(lambda: self._take(client), patience, interval=0.2)
            except AssertionError:
                raise AssertionError(f"{self} stayed held by another test run ({self.waiting_for}) "
                                     f"for {patience:g} s: give each run its own Redis "
                                     "(MCP_TEST_REDIS_PORT)") from None
        _HELD[(self.port, self.db)] = self
        self._renewal = threading.Thread(target=self._renew_forever, daemon=True,
                                         name=f"lease-redis-{self.db}")
        self._renewal.start()

    def _take(self, client: Any) -> bool:
        import redis

        with client.pipeline() as pipeline:
            try:
                pipeline.watch(LEASE_KEY)
                holder = pipeline.get(LEASE_KEY)
                if holder is not None and (self._outer is None or holder != self._outer.token):
                    self.waiting_for = holder
                    return False
                pipeline.multi()
                pipeline.flushdb()
                pipeline.set(LEASE_KEY, self.token, px=int(LEASE_TTL * 1000))
                pipeline.execute()
                return True
            except redis.WatchError:  # another run took it meanwhile
                return False

    def _renew_forever(self) -> None:
        with redis_client(self.db, self.port) as client:
            renew = client.register_script(_RENEW)
            while not self._stop.wait(LEASE_RENEWAL):
                with contextlib.suppress(Exception):  # a Redis a test stopped: check() tells
                    renew(keys=[LEASE_KEY], args=[self.token, int(LEASE_TTL * 1000)])

    def check(self) -> str | None:
        """Why the database is no longer this run's alone (None while it is)."""
        with redis_client(self.db, self.port) as client:
            holder = client.get(LEASE_KEY)
        if holder == self.token:
            return None
        return (f"{self} was flushed or taken by another process while this cluster held it (its "
                f"lease is {'gone' if holder is None else 'held by ' + repr(holder)}): the processes' "
                "claims and stored events may have gone with it. Another test run on the same Redis? "
                "Give each run its own (MCP_TEST_REDIS_PORT).")

    def release(self) -> None:
        self._stop.set()
        if self._renewal is not None:
            self._renewal.join()
        if self._outer is not None:
            _HELD[(self.port, self.db)] = self._outer
        else:
            _HELD.pop((self.port, self.db), None)
        # A lease Redis did not take back lapses LEASE_TTL seconds later.
        with contextlib.suppress(Exception), redis_client(self.db, self.port) as client:
            if self._outer is None:
                client.eval(_RELEASE, 1, LEASE_KEY, self.token)
            else:
                client.eval(_HAND_BACK, 1, LEASE_KEY, self.token, self._outer.token,
                            int(LEASE_TTL * 1000))


@contextlib.contextmanager
def cluster(count: int, *, redis_db: int, mcp_settings: dict | None = None,
            redis_port: int | None = None, env: dict | None = None,
            wait: bool = True, server: str = "daphne") -> Iterator[list[DaphneServer]]:
    """``count`` daphne processes on one database and one (freshly flushed) Redis database (of
    the Redis on ``redis_port``: one a test started, say); ``env`` adds to their environment.

    The Redis database of the shared test Redis is held for this run meanwhile (see
    :class:`RedisLease`); one a test started is its own, and may be flushed on purpose.

    ``wait=False``: given as soon as they are started, so that another process (a Celery worker)
    starts meanwhile; the caller then waits with :func:`listening`. ``server``: the ASGI server
    they run (``"uvicorn"``, say; see :class:`DaphneServer`)."""
    lease = RedisLease(redis_db) if redis_port in (None, REDIS_PORT) else None
    if lease is not None:
        lease.acquire()
    else:
        with redis_client(redis_db, redis_port) as client:
            client.flushdb()
    env = {"REDIS_URL": f"redis://{REDIS_HOST}:{redis_port or REDIS_PORT}/{redis_db}", **(env or {})}
    servers: list[DaphneServer] = []
    try:
        # Started side by side: each spends its first seconds importing Django.
        for _ in range(count):
            servers.append(DaphneServer(mcp_settings=mcp_settings, env=env, wait=False, server=server))
        if wait:
            listening(servers)
        yield servers
    except BaseException as exc:
        if lease is not None:
            with contextlib.suppress(Exception):  # Redis gone: the failure says so already
                reason = lease.check()
                if reason is not None:
                    exc.add_note(reason)
        raise
    finally:
        try:
            stop_all(servers)
        finally:
            if lease is not None:
                lease.release()


def stop_all(servers: list[DaphneServer]) -> None:
    """Stop every one of ``servers``, even when stopping one fails; none outlives this call."""
    errors = []
    for server in servers:
        try:
            server.stop()
        except Exception as exc:
            errors.append(exc)
            with contextlib.suppress(Exception):
                server.process.kill()
                server.process.wait(PATIENCE)
    alive = [server.url for server in servers if server.process.poll() is None]
    if errors or alive:
        raise RuntimeError(f"stopping the cluster failed ({errors}); still running: {alive}")


def listening(servers: list[DaphneServer]) -> None:
    """Wait until each of ``servers`` (started with ``wait=False``) accepts connections."""
    for server in servers:
        server.wait_until_listening()


def new_session(url: str, revision: str = "2025-11-25", capabilities: dict | None = None) -> HTTPClient:
    """A client with a session initialized on ``url``."""
    client = HTTPClient(url, revision=revision)
    client.initialize(capabilities=capabilities, url=url)
    return client


def twin(client: HTTPClient, url: str) -> HTTPClient:
    """Another connection pool speaking for the same session (for a request run on a thread)."""
    other = HTTPClient(url, revision=client.revision)
    other.session_id = client.session_id
    return other


def next_event(listener: Listener, timeout: float = PATIENCE) -> Event:
    """The next event carrying a message (priming events skipped); fails at the stream's end."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            event = listener.next(max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no event on the stream within {timeout}s") from None
        assert event is not None, "the stream ended"
        if event.message is not None:
            return event


def events_until(listener: Listener, method: str, timeout: float = PATIENCE) -> list[Event]:
    """Every event up to and including the first notification ``method``."""
    events = []
    while True:
        events.append(next_event(listener, timeout))
        if events[-1].message.get("method") == method:
            return events


def ends(listener: Listener, timeout: float = PATIENCE) -> list[Event]:
    """Read the stream to its end (which must come within ``timeout``); the events it still sent."""
    deadline = time.monotonic() + timeout
    events = []
    while True:
        try:
            event = listener.next(max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"the stream did not end within {timeout}s") from None
        if event is None:
            return events
        events.append(event)


def open_stream(client: HTTPClient, url: str, last_event_id: str | None = None,
                timeout: float = PATIENCE) -> Listener:
    """A GET stream on ``url``, retried while the session's previous stream is still held (409):
    a stream another process held ends there a moment after its client went away."""
    deadline = time.monotonic() + timeout
    while True:
        listener = client.listen(last_event_id, url=url)
        if listener.status != 409 or time.monotonic() > deadline:
            assert listener.status == 200, f"GET answered {listener.status}"
            return listener
        listener.close()
        time.sleep(0.1)


def call_tool(client: HTTPClient, url: str, name: str, arguments: dict | None = None, **kwargs: Any) -> str:
    """The text of a successful tool call's result."""
    exchange = client.request("tools/call", {"name": name, "arguments": arguments or {}}, url=url, **kwargs)
    assert exchange.status == 200, exchange
    result = exchange.response["result"]
    assert not result.get("isError"), result
    return result["content"][0]["text"]


def post_checked(client: HTTPClient, message: dict, url: str) -> httpx.Response:
    """POST a client message; a JSON body that comes back is checked against the schema."""
    check_client_message(message, client.revision)
    response = client.post_raw(json.dumps(message), url=url)
    if response.content:
        check_server_message(response.json(), client.revision)
    return response


def open_session(url: str, revision: str = "2025-11-25") -> str:
    """``initialize`` alone (no ``notifications/initialized``, nothing after): a client that went
    away. Returns the session id."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}}
    check_client_message(message, revision)
    response = httpx.post(url, json=message, timeout=PATIENCE, headers={
        "accept": "application/json, text/event-stream"})
    assert response.status_code == 200, response.text
    check_server_message(response.json(), revision, "initialize")
    return response.headers["mcp-session-id"]


def cluster_fixture(redis_db: int, count: int = 2, **options: Any) -> Any:
    """A module-scoped fixture of ``count`` daphne processes (see :func:`cluster`), for a test
    module that shares them: ``pair = cluster_fixture(REDIS_DB)``."""
    import pytest

    @pytest.fixture(scope="module")
    def processes(django_db_setup: Any, django_db_blocker: Any) -> Iterator[list[DaphneServer]]:
        require_services()
        with django_db_blocker.unblock(), cluster(count, redis_db=redis_db, **options) as servers:
            yield servers

    return processes


class CallInBackground:
    """A ``tools/call`` POSTed on a thread; its events arrive on ``events`` as they come."""

    def __init__(self, client: HTTPClient, url: str, request_id: int, name: str, arguments: dict,
                 meta: dict | None = None):
        self.client = twin(client, url)
        self.client.answers = {}
        self.request_id = request_id
        self.events: list[Event] = []
        self.exchange = None
        self.error: BaseException | None = None
        params = {"name": name, "arguments": arguments, **({"_meta": meta} if meta else {})}
        self._thread = threading.Thread(target=self._run, args=(url, params), daemon=True)
        self._thread.start()

    def _run(self, url: str, params: dict) -> None:
        try:
            self.exchange = self.client.request("tools/call", params, request_id=self.request_id, url=url,
                                                on_event=self.events.append)
        except httpx.HTTPError as exc:  # the process died under it
            self.error = exc

    def event(self, predicate) -> Event | None:
        return next((event for event in list(self.events) if predicate(event)), None)

    def join(self) -> None:
        self._thread.join(15)
        assert not self._thread.is_alive()
