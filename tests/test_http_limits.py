"""Fair share: one client cannot lock out the others, and what it sends is stored compactly.

Sessions per principal, listening streams and subscriptions per session, stored events per session
(count and bytes; a resume from before what was kept is refused), SSE backpressure under daphne,
compact stream names for long request ids, and Redis event sequences that survive a flush.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from mcp_server.http.event_store import (
    DatabaseEventStore,
    EventsDropped,
    RedisEventStore,
    post_stream,
)
from mcp_server.models import Session, StreamEvent

from .harness import CLIENT_INFO
from .http_cluster import REDIS_HOST, REDIS_PORT, cluster, redis_client, require_services
from .http_harness import free_port
from .http_support import Client, error_of, log_in, running, stream_ended, wait_until
from .services import reachable, require
from .wire import check_client_message

# The events as rows, which these tests read (the one process of these servers would keep them in
# memory otherwise: tests/test_memory_event_store.py runs the same limits over HTTP on that store).
LIMITS = {"SERVER_CLASS": "tests.limits_server.LimitsServer", "MAX_SESSIONS_PER_PRINCIPAL": 2,
          "MAX_STREAMS_PER_SESSION": 2, "MAX_SUBSCRIPTIONS_PER_SESSION": 2,
          "MAX_STORED_EVENTS_PER_SESSION": 6,
          "EVENT_STORE_CLASS": "mcp_server.http.event_store.DatabaseEventStore"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}}


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """Data the daphne process writes is committed: every test runs on a transactional database."""


@pytest.fixture(scope="module")
def limited(django_db_setup, django_db_blocker):
    with running(django_db_blocker, mcp_settings=LIMITS) as server:
        yield server


def logging_client(url: str) -> Client:
    """A new session that asked for every log message (the flood tool logs)."""
    client = Client(url)
    client.initialize()
    assert client.request("logging/setLevel", {"level": "debug"}).response["result"] == {}
    return client


def assert_too_many(response, what: str) -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1
    error = error_of(response)
    assert error["code"] == -32600 and what in error["message"], error


# Sessions per principal ------------------------------------------------------------------------
def test_sessions_per_principal_are_limited_and_one_ended_frees_a_place(limited):
    first, second = Client(limited.url), Client(limited.url)
    first.initialize()
    second.initialize()
    refused = Client(limited.url).post_json(INITIALIZE)
    assert_too_many(refused, "2 sessions are open for this client")
    assert refused.json()["id"] == INITIALIZE["id"]
    assert "mcp-session-id" not in refused.headers
    # Another principal (a logged-in user, from the same address) is counted apart.
    login = log_in("limits-user")
    user = Client(limited.url, headers=login["headers"])
    user.initialize()
    assert Session.objects.get(pk=user.session_id).principal == f"user:{login['user'].pk}"
    # Sessions already open go on; ending one lets the client open another.
    assert first.request("ping").response["result"] == {}
    assert first.delete().status_code == 200
    Client(limited.url).initialize()


def test_sessions_and_streams_are_counted_across_processes():
    require_services()
    settings = {"MAX_SESSIONS_PER_PRINCIPAL": 2, "MAX_STREAMS_PER_SESSION": 1}
    with cluster(2, redis_db=12, mcp_settings=settings) as (one, other):
        first = Client(one.url)
        first.initialize()
        Client(other.url).initialize()
        for server in (one, other):
            assert_too_many(Client(server.url).post_json(INITIALIZE), "sessions are open")
        # The session's one stream is open on one process: the other refuses a second.
        listening = first.listen(url=one.url)
        assert listening.status == 200
        twin = Client(other.url)
        twin.session_id = first.session_id
        assert_too_many(twin.get({"last-event-id": f"{post_stream(5)}/0"}), "1 streams open")


def test_the_stream_place_of_a_process_that_died_is_free_again():
    require_services()
    settings = {"MAX_STREAMS_PER_SESSION": 1, "KEEPALIVE_INTERVAL": 1}
    with cluster(2, redis_db=12, mcp_settings=settings) as (doomed, survivor):
        client = Client(survivor.url)
        client.initialize()
        assert client.listen(url=doomed.url).status == 200
        twin = Client(survivor.url)
        twin.session_id = client.session_id
        resume = {"last-event-id": f"{post_stream(5)}/0"}
        assert_too_many(twin.get(resume), "1 streams open")
        doomed.kill()
        # Its stream's place lapses with the claim (two keepalive intervals and 5 s), not later.
        wait_until(lambda: twin.listen(last_event_id=resume["last-event-id"]).status == 200,
                   timeout=60, interval=0.5)


def test_limits_must_be_positive_integers_or_none():
    from mcp_server import Server
    from mcp_server.http import StreamableHTTPTransport

    for name in ("max_sessions_per_principal", "max_streams_per_session",
                 "max_subscriptions_per_session", "max_sse_buffer_bytes"):
        for bad in (0, -1, 2.5, True, "10"):
            with pytest.raises(ValueError, match=f"{name} must be a positive integer or None"):
                StreamableHTTPTransport(Server("limits"), **{name: bad})
        assert getattr(StreamableHTTPTransport(Server("limits"), **{name: None}).options, name) is None


# Listening streams per session -----------------------------------------------------------------
def test_listening_streams_per_session_are_limited(limited):
    client = Client(limited.url)
    client.initialize()
    # A call that runs until cancelled, so that its POST stream, resumed, stays open.
    caller = Client(limited.url)
    caller.session_id = client.session_id
    started = threading.Event()
    call = {"name": "slow_count", "arguments": {"count": 600, "delay": 0.1}}
    running_call = threading.Thread(target=caller.request, args=("tools/call", call), daemon=True,
                                    kwargs={"request_id": 77, "on_event": lambda _event: started.set()})
    running_call.start()
    assert started.wait(60), "the call's stream did not start"
    listening = client.listen()
    resumed = client.listen(last_event_id=f"{post_stream(77)}/0")
    assert (listening.status, resumed.status) == (200, 200)
    assert_too_many(client.get({"last-event-id": f"{post_stream(78)}/0"}), "2 streams open")
    # Another session has streams of its own.
    other = Client(limited.url)
    other.initialize()
    assert other.listen().status == 200
    # A stream that ends frees its place.
    resumed.close()
    wait_until(lambda: client.listen(last_event_id=f"{post_stream(78)}/0").status == 200, timeout=20,
               interval=0.2)
    client.notify("notifications/cancelled", {"requestId": 77})
    running_call.join(60)


# Subscriptions per session ---------------------------------------------------------------------
def test_subscriptions_per_session_are_limited(limited):
    client = Client(limited.url)
    client.initialize()

    def subscribe(uri: str) -> dict:
        return client.request("resources/subscribe", {"uri": uri}).response

    assert subscribe("demo://a")["result"] == {}
    assert subscribe("demo://b")["result"] == {}
    refused = subscribe("demo://c")["error"]
    assert refused["code"] == -32600 and "Too many subscriptions" in refused["message"]
    assert subscribe("demo://a")["result"] == {}  # already subscribed: not one more
    assert client.request("resources/unsubscribe", {"uri": "demo://a"}).response["result"] == {}
    assert subscribe("demo://c")["result"] == {}


# Stored events per session ---------------------------------------------------------------------
def test_past_the_stored_event_limit_the_oldest_go_and_a_resume_before_them_is_gone(limited):
    client = logging_client(limited.url)
    exchange = client.tool("flood", {"count": 10, "size": 10})
    ids = [event.id for event in exchange.events if event.message is not None]
    assert len(ids) == 11  # ten log messages and the response
    assert StreamEvent.objects.filter(session_id=client.session_id, dropped=False).count() <= 6
    # What was kept (the newest) replays from the last event the client saw before it...
    kept = StreamEvent.objects.filter(session_id=client.session_id, dropped=False).order_by("pk")
    first_kept = ids.index(f"{post_stream(3)}/{kept.first().pk}")
    replayed = stream_ended(client.listen(last_event_id=ids[first_kept - 1]))
    assert [event.id for event in replayed if event.message is not None] == ids[first_kept:]
    # ...and a resume from before what was kept is refused, not answered with a gap.
    gone = client.get({"last-event-id": ids[0]})
    assert gone.status_code == 410, gone.text
    assert "were dropped" in error_of(gone)["message"]


async def test_the_database_store_drops_the_oldest_events_by_count_and_by_bytes(transactional_db):
    session = await Session.objects.acreate(id=uuid.uuid4().hex, protocol_version="2025-11-25",
                                            last_activity=_now())
    store = DatabaseEventStore(max_events=10, max_bytes=2000)
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 50}}
    size = len(json.dumps(message, separators=(",", ":")))
    sequences = [await store.append(session.pk, f"post:i{n % 2}", message) for n in range(25)]
    kept = [pk async for pk in StreamEvent.objects.filter(session=session, dropped=False)
            .order_by("pk").values_list("pk", flat=True)]
    assert 9 <= len(kept) <= 10 and kept == sequences[-len(kept):]
    await session.arefresh_from_db()
    assert (session.stored_events, session.stored_bytes) == (len(kept), len(kept) * size)
    # A stream resumed after its last lost event gets the rest; from before it, an error.
    lost_of_0 = max(pk for n, pk in enumerate(sequences) if n % 2 == 0 and pk < kept[0])
    assert [pk for pk, _m, _l in await store.replay(session.pk, "post:i0", lost_of_0)] == \
        [pk for n, pk in enumerate(sequences) if n % 2 == 0 and pk > lost_of_0]
    with pytest.raises(EventsDropped):
        await store.replay(session.pk, "post:i0", lost_of_0 - 2)
    # By bytes: one large event pushes the small ones out.
    await store.append(session.pk, "get", {**message, "params": {"data": "y" * 1800}})
    await session.arefresh_from_db()
    assert session.stored_bytes <= 2000 and session.stored_events <= 2


def _now():
    from django.utils import timezone

    return timezone.now()


# Compact storage: a long request id is not copied into every event -------------------------------
def test_a_long_request_id_is_stored_once_not_with_every_event(limited):
    client = logging_client(limited.url)
    long_id = "r" * 100_000
    exchange = client.request("tools/call", {"name": "flood", "arguments": {"count": 5, "size": 1}},
                              request_id=long_id)
    assert exchange.response["id"] == long_id
    assert all(len(event.id) < 64 for event in exchange.events if event.id)
    rows = list(StreamEvent.objects.filter(session_id=client.session_id).values_list("stream", "size"))
    assert rows and all(len(stream) < 64 for stream, _size in rows)
    # The response carries the id once; the other events are a few dozen bytes each.
    assert sum(size for _stream, size in rows) < len(long_id) + 2_000
    # Non-ASCII text is stored as it is, not as \\u escapes.
    text = "données ✓ 漢字"
    client.request("tools/call", {"name": "echo", "arguments": {"message": text}}, request_id="u")
    stored = StreamEvent.objects.filter(session_id=client.session_id, stream=post_stream("u")).get()
    assert stored.size == len(json.dumps(stored.message, ensure_ascii=False,
                                         separators=(",", ":")).encode())


def test_a_long_progress_token_is_refused_as_it_would_be_copied_into_every_progress(limited):
    client = Client(limited.url)
    client.initialize()
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "hi"}, "_meta": {"progressToken": "p" * 257}}}
    refused = client.post_json(call)
    assert refused.status_code == 400
    assert refused.json()["id"] == 7
    assert error_of(refused) == {"code": -32600, "message": "Invalid Request: _meta.progressToken is "
                                 "longer than 256 characters"}
    call["params"]["_meta"]["progressToken"] = "p" * 256
    assert client.request("tools/call", call["params"]).response["result"]["content"][0]["text"] == "hi"


def test_stream_names_are_short_and_keep_ids_apart():
    assert post_stream(5) != post_stream("5")
    assert post_stream("a" * 65) != post_stream("a" * 66)
    assert post_stream("a/b") != post_stream("a b")
    for request_id in ("x" * 1_000_000, "a/b", "a b", 10**30, "é"):
        assert len(post_stream(request_id)) <= 40 and " " not in post_stream(request_id)
        assert "/" not in post_stream(request_id)


# Redis: limits, a key per stream, sequences that survive a flush ----------------------------------
def _redis_store(**options) -> tuple[RedisEventStore, str]:
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    prefix = f"limits-{uuid.uuid4().hex[:8]}:"
    return RedisEventStore(f"redis://{REDIS_HOST}:{REDIS_PORT}/11", 3600, prefix, **options), prefix


@pytest.mark.parametrize("client", ["built-in", "redis-py"])
async def test_storing_an_event_reads_who_holds_its_stream_in_the_same_round_trip(client):
    from mcp_server import Server
    from mcp_server.http import StreamableHTTPTransport
    from mcp_server.http.redis_client import RedisClients
    from mcp_server.http.redispy_client import RedisPyClients
    from mcp_server.http.shared_state import RedisState

    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    url, prefix = f"redis://{REDIS_HOST}:{REDIS_PORT}/11", f"watch-{uuid.uuid4().hex[:8]}:"
    clients = RedisClients(url) if client == "built-in" else RedisPyClients(url)
    state = RedisState(url, prefix, clients=clients)
    store = RedisEventStore(url, 3600, prefix, clients=clients)
    transport = StreamableHTTPTransport(Server("watch"), shared_state=state, event_store=store)
    assert transport._events_read_the_state
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}
    await state.set("session:s1", "{}", 60)
    first, holder = await transport.store_event("s1", "post:i1", message)
    assert first is not None and holder is None
    await state.set("stream:s1:post:i1", "mcp.process.elsewhere|token", 60)
    second, holder = await transport.store_event("s1", "post:i1", message)
    assert second > first and holder == "mcp.process.elsewhere|token"
    assert [seq for seq, _m, _l in await store.replay("s1", "post:i1", 0)] == [first, second]
    # Stores that do not share one Redis and prefix read the holder with a command of its own.
    apart = StreamableHTTPTransport(Server("apart"), shared_state=RedisState(url, "other:", clients=clients),
                                    event_store=store)
    assert not apart._events_read_the_state


async def test_the_redis_store_drops_the_oldest_events_and_refuses_a_resume_before_them():
    store, prefix = _redis_store(max_events=4, max_bytes=10_000)
    with redis_client(11) as redis:
        redis.set(f"{prefix}session:s1", "{}")
        message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}
        sequences = [await store.append("s1", f"post:i{n % 2}", message) for n in range(10)]
        assert sequences == sorted(sequences)
        # The newest four are kept, each stream in a key of its own.
        assert [seq for seq, _m, _l in await store.replay("s1", "post:i0", sequences[5])] == \
            [sequences[6], sequences[8]]
        assert [seq for seq, _m, _l in await store.replay("s1", "post:i1", sequences[5])] == \
            [sequences[7], sequences[9]]
        with pytest.raises(EventsDropped) as dropped:
            await store.replay("s1", "post:i0", sequences[3])
        assert dropped.value.dropped_through == sequences[4]
        size = len(json.dumps(message, separators=(",", ":")))
        assert int(redis.get(f"{prefix}events:s1:bytes")) == 4 * size
        assert redis.zcard(f"{prefix}events:s1:stream:post:i1") == 3  # two events and the marker
        # By bytes: one large event pushes the others out.
        large = {**message, "params": {"data": "y" * 9900}}
        await store.append("s1", "get", large)
        assert int(redis.get(f"{prefix}events:s1:bytes")) == len(json.dumps(large, separators=(",", ":")))
        assert redis.zcard(f"{prefix}events:s1:index") == 1
        # Ending the session drops all its keys.
        await store.forget("s1")
        left = [key for key in redis.keys(f"{prefix}events:s1*")
                if redis.zrange(key, 0, -1) != ["dropped"]]
        assert left == []
        redis.delete(*redis.keys(f"{prefix}*"))


async def test_the_redis_store_counts_the_events_of_a_session_known_only_to_the_database():
    store, prefix = _redis_store(max_events=2)
    # No shared-state entry (it expired): the session's row says it exists.
    session = await Session.objects.acreate(id=uuid.uuid4().hex, protocol_version="2025-11-25",
                                            last_activity=_now())
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}}
    sequences = [await store.append(session.pk, "get", message) for _ in range(3)]
    assert [seq for seq, _m, _l in await store.replay(session.pk, "get", sequences[0])] == sequences[1:]
    with redis_client(11) as redis:
        assert redis.zcard(f"{prefix}events:{session.pk}:index") == 2
        redis.delete(*redis.keys(f"{prefix}*"))


@pytest.fixture
def own_redis(tmp_path: Path):
    """A Redis of this test alone, which it may flush."""
    require(bool(subprocess.run(["which", "redis-server"], capture_output=True).stdout),
            "needs redis-server installed")
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: reachable("127.0.0.1", port), timeout=20, interval=0.1)
        yield port
    finally:
        process.terminate()
        process.wait(10)


async def test_redis_sequences_keep_growing_after_redis_loses_its_data(own_redis):
    import redis as redis_py

    store = RedisEventStore(f"redis://127.0.0.1:{own_redis}/0", 3600)
    direct = redis_py.Redis(port=own_redis, decode_responses=True)
    direct.set("mcp:session:s1", "{}")
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": 1}}
    before = [await store.append("s1", "get", message) for _ in range(3)]
    direct.flushall()
    direct.set("mcp:session:s1", "{}")
    after = await store.append("s1", "get", message)
    assert after > before[-1]
    # A client resuming after the last id it saw before the flush gets the new event.
    assert [seq for seq, _m, _l in await store.replay("s1", "get", before[-1])] == [after]
    direct.close()


# SSE backpressure ------------------------------------------------------------------------------
@pytest.mark.parametrize("server_kind", ["daphne", "uvicorn", "hypercorn", "granian"])
def test_a_client_that_stops_reading_is_cut_off_and_resumes_the_rest(django_db_blocker, server_kind):
    buffer = 512 * 1024
    settings = {**LIMITS, "MAX_STORED_EVENTS_PER_SESSION": 1000,
                "MAX_STORED_EVENT_BYTES_PER_SESSION": 64 * 1024 * 1024, "MAX_SSE_BUFFER_BYTES": buffer}
    with running(django_db_blocker, mcp_settings=settings, server=server_kind) as server:
        client = logging_client(server.url)
        rss_before = _rss_kib(server.process.pid)
        count, size = 300, 100_000  # 30 MB of events, many times the buffer
        message = {"jsonrpc": "2.0", "id": "flood", "method": "tools/call",
                   "params": {"name": "flood", "arguments": {"count": count, "size": size}}}
        check_client_message(message, client.revision)
        body = json.dumps(message)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        request = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{server.port}", f"Content-Length: {len(body)}",
                   *[f"{name}: {value}" for name, value in client.headers().items()], "", body]
        sock.sendall("\r\n".join(request).encode())
        peak = [rss_before]

        def given_up() -> bool:  # the server ended the connection, which the client never read
            peak.append(_rss_kib(server.process.pid))
            poller = select.poll()
            poller.register(sock, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
            return any(mask & (select.POLLERR | select.POLLHUP | select.POLLRDHUP)
                       for _fd, mask in poller.poll(0))

        answered = StreamEvent.objects.filter(session_id=client.session_id, message__id="flood")
        if server_kind == "daphne":
            # Daphne aborts the connection; then the tool goes on, storing what was not sent.
            wait_until(given_up, timeout=120, interval=0.2)
            wait_until(answered.exists, timeout=120, interval=0.2)
            with pytest.raises(ConnectionResetError):
                while sock.recv(1 << 16):
                    pass
            # While connected, the process held about the buffer for the client that did not read,
            # far from the 30 MB it was sent (without the limit, its RSS grows by about 90 MB).
            assert max(peak) - rss_before < 20 * 1024, (rss_before, max(peak))
        else:
            # Uvicorn's and hypercorn's send() wait for the client (their buffers are bounded): the
            # stalled write is given up after SSE_STALL_TIMEOUT, and the tool finishes, storing the
            # rest. (They keep the socket until the client leaves: ASGI cannot abort a connection.)
            wait_until(answered.exists, timeout=120, interval=0.2)
        sock.close()
        # Everything the tool logged was stored and replays to a resuming client.
        resumed = client.listen(last_event_id=f"{post_stream('flood')}/0")
        assert resumed.status == 200
        events = stream_ended(resumed, timeout=120)
        logged = [event.message["params"]["data"]["index"] for event in events
                  if event.message and event.message.get("method") == "notifications/message"]
        assert logged == list(range(count))
        assert events[-1].message["result"]["content"][0]["text"] == f"flooded {count}"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_listening_stream_that_cannot_keep_up_ends_rather_than_skip_events():
    from types import SimpleNamespace

    from mcp_server.http.listen import ListenStream

    MAX_QUEUED_EVENTS = 25  # the transport's max_queued_stream_events
    transport = SimpleNamespace(options=SimpleNamespace(max_queued_stream_events=MAX_QUEUED_EVENTS))
    stream = ListenStream(transport, "s1", "get", sse=None, token="t")
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": 1}}
    for sequence in range(MAX_QUEUED_EVENTS):
        stream.push(sequence, message)
    assert not stream.overflowed
    stream.push(MAX_QUEUED_EVENTS, message)  # one too many: the stream ends here (None)...
    stream.push(MAX_QUEUED_EVENTS + 1, message)  # ...and takes nothing more
    assert stream.overflowed and stream._queue.qsize() == MAX_QUEUED_EVENTS + 1
    items = [stream._queue.get_nowait() for _ in range(MAX_QUEUED_EVENTS + 1)]
    assert items[-1] is None and [item[0] for item in items[:-1]] == list(range(MAX_QUEUED_EVENTS))


@pytest.mark.parametrize("honoured", [True, False], ids=["daphne", "send-waits"])
async def test_a_client_that_reads_nothing_is_cut_off_after_the_stall_timeout(honoured):
    from mcp_server.http.sse import SSEResponse

    never = asyncio.Event()
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not honoured:
            await never.wait()  # a server whose send() waits for a client that never reads

    sse = SSEResponse(send, max_buffered_bytes=1024, stall_timeout=0.2)
    if honoured:
        sse._window.attach(lambda: sent.append({"type": "cut"}))
        sse._window.close()  # daphne found more than the limit waiting for the client
    assert await sse.event("data") is False
    assert sse.closed
    if honoured:
        assert sent == [{"type": "cut"}]  # the connection was aborted, nothing more written
