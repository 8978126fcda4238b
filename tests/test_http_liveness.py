"""Nothing waits on a dead process: heartbeats, and the take-over of what a dead process held.

In process, several transports share one state (in memory, or Redis) as processes of a deployment
do; a claim naming a channel without a heartbeat is a dead process's. The fault tests at the end
kill -9 a daphne process of two on PostgreSQL and Redis mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid

import pytest

from mcp_server import Server
from mcp_server.http import StreamableHTTPTransport
from mcp_server.http.event_store import DatabaseEventStore, RedisEventStore
from mcp_server.http.liveness import (
    EPOCH_KEY,
    REQUEST_STOPPED,
    SETTLING_KEY,
    Liveness,
    request_lost,
    request_stopped,
)
from mcp_server.http.session_counts import principal_counter, server_counter
from mcp_server.http.session_store import SessionRecord
from mcp_server.http.shared_state import LocalState, RedisState

from .http_cluster import (
    LEASE_KEY,
    REDIS_HOST,
    REDIS_PORT,
    CallInBackground,
    RedisLease,
    cluster,
    ends,
    new_session,
    next_event,
    open_stream,
    redis_client,
    require_services,
    wait_until,
)
from .http_harness import Event, HTTPClient
from .http_support import call_asgi, post_headers
from .services import reachable, require
from .wire import check_server_message

REDIS_DB = 10
DEAD = "mcp.process.dead!gone"  # a channel whose process never beats


# In process --------------------------------------------------------------------------------------

def shared(kind: str) -> tuple:
    """A shared state and event store of ``kind`` (fresh keys for each test)."""
    if kind == "local":
        return LocalState(), DatabaseEventStore()
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    url, prefix = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}", f"mcp-test-{uuid.uuid4().hex}:"
    return RedisState(url, prefix=prefix), RedisEventStore(url, 600, prefix=prefix)


@pytest.fixture(params=["local", "redis"])
async def processes(request, transactional_db, short_lived_connections):
    """Six transports on one shared state, each with its runtime (its own channel), and a session.

    The state has known heartbeats for long (as in a running deployment), so a missing one is
    a death at once; heartbeats live 6 s, so a loaded machine does not make a live one lapse.
    """
    state, events = shared(request.param)
    assert await state.add(EPOCH_KEY, "1", 600)
    transports = [StreamableHTTPTransport(Server("liveness"), shared_state=state, event_store=events,
                                          process_heartbeat_interval=2) for _ in range(6)]
    for transport in transports:
        await transport.ensure_runtime()
    assert await state.get(SETTLING_KEY) is None
    record = SessionRecord.new(protocol_version="2025-11-25")
    await transports[0].sessions.create(record)
    try:
        yield transports, record.id
    finally:
        for transport in transports:
            await transport.close()


def test_the_heartbeat_interval_must_be_a_positive_number():
    for bad in (0, -1, True, "5", float("inf"), float("nan")):
        with pytest.raises(ValueError, match="process_heartbeat_interval must be a positive number"):
            StreamableHTTPTransport(Server("bad"), process_heartbeat_interval=bad)
    liveness = StreamableHTTPTransport(Server("ok"), process_heartbeat_interval=0.25).liveness
    assert (liveness.ttl, liveness.detection_bound) == (0.75, 1.0)


async def settled(state) -> None:
    """Wait until the shared state has known heartbeats for longer than their lifetime."""
    async def known() -> bool:
        return await state.get(SETTLING_KEY) is None

    await asyncio.wait_for(_until(known), 30)


@pytest.mark.parametrize("kind", ["local", "redis"])
async def test_exactly_one_caller_takes_over_a_dead_claim(kind):
    state, _events = shared(kind)
    liveness = Liveness(state, 0.5)
    await state.set("req:s:i1", DEAD, 600)
    # A state that knows no heartbeat yet (new, or after losing its data) cannot tell the dead:
    # neither before the first beat nor for one heartbeat lifetime after it.
    assert await liveness.dead_claim("req:s:i1", "mcp.process.me") is None
    await liveness.beat("mcp.process.first")
    assert await liveness.dead_claim("req:s:i1", "mcp.process.me") is None
    await settled(state)
    claim = await liveness.dead_claim("req:s:i1", "mcp.process.me")
    assert claim == DEAD
    won = await asyncio.gather(*(liveness.take_over("req:s:i1", claim) for _ in range(20)))
    assert won.count(True) == 1
    # A later holder of the same key that dies in turn is taken over afresh.
    assert await liveness.take_over("req:s:i1", "mcp.process.other") is True
    # A process that beats is alive; one that stopped is dead at once.
    await liveness.beat("mcp.process.alive")
    await state.set("req:s:i2", "mcp.process.alive", 600)
    assert await liveness.dead_claim("req:s:i2", "mcp.process.me") is None
    await liveness.stop("mcp.process.alive")
    assert await liveness.dead_claim("req:s:i2", "mcp.process.me") == "mcp.process.alive"
    # This process never reads as dead to itself, nor does an absent claim.
    assert await liveness.dead_claim("req:s:i2", "mcp.process.alive") is None
    assert await liveness.dead_claim("req:s:nothing", "mcp.process.me") is None


@pytest.mark.parametrize("kind", ["local", "redis"])
async def test_a_count_of_claims_is_taken_once_and_a_release_after_it_leaves_it_gone(kind):
    state, _events = shared(kind)
    for key in ("stream:s:get", "req:s:1"):
        assert await state.add_counted(key, "mcp.process.a", 600, "held:s", 600)
    assert await state.take_count("held:s") == 2
    assert await state.take_count("held:s") == 0  # removed with the read
    await state.delete_counted("req:s:1", "held:s")  # a claim released after the session ended
    assert await state.count("held:s") == 0 and await state.get("req:s:1") is None


@contextlib.asynccontextmanager
async def two_processes(kind: str):
    """Two transports, as two processes, on one shared state and event store of ``kind``
    ("redis-one-connection": the Redis stores on one connection, as site.build_stores makes them,
    which lets them do in one round trip what the others do in two)."""
    if kind == "redis-one-connection":
        state, _ = shared("redis")
        events = RedisEventStore(state.url, 600, prefix=state.prefix, clients=state.clients)
    else:
        state, events = shared(kind)
    transports = [StreamableHTTPTransport(Server("liveness"), shared_state=state, event_store=events)
                  for _ in range(2)]
    try:
        for transport in transports:
            await transport.ensure_runtime()
        yield transports
    finally:
        for transport in transports:
            await transport.close()


@pytest.mark.parametrize("kind", ["local", "redis"])
async def test_a_session_is_read_and_its_request_claimed_in_one_step(kind, transactional_db,
                                                                    short_lived_connections):
    async with two_processes(kind) as (here, other):
        state, events = here.state, here.events
        record = SessionRecord.new(protocol_version="2025-11-25")
        await here.sessions.create(record)
        loaded, claimed = await here.load_claiming(record.id, 5)
        assert loaded.id == record.id and claimed is True
        assert await here.request_in_flight(record.id, 5)
        assert await state.count(f"held:{record.id}") == 1
        # In flight: not claimed again, by this process or another (claim_request then looks
        # for a dead holder, as it always did).
        assert (await other.load_claiming(record.id, 5))[1] is False
        assert not await other.claim_request(record.id, 5)
        await here.release_request(record.id, 5)
        assert (await other.load_claiming(record.id, 5))[1] is True
        await other.release_request(record.id, 5)
        assert await state.count(f"held:{record.id}") == 0
        # An unknown session claims nothing; another server's session is not ours to hold.
        assert await here.load_claiming("unknown", 5) == (None, None)
        assert not await here.request_in_flight("unknown", 5)
        stranger = StreamableHTTPTransport(Server("another"), shared_state=state, event_store=events)
        await stranger.ensure_runtime()
        try:
            assert await stranger.load_claiming(record.id, 6) == (None, None)
            assert not await here.request_in_flight(record.id, 6)
            assert await state.count(f"held:{record.id}") == 0
        finally:
            await stranger.close()


@pytest.mark.parametrize("kind", ["local", "redis", "redis-one-connection"])
async def test_a_response_is_stored_and_its_id_let_go_of_in_one_step(kind, transactional_db,
                                                                     short_lived_connections):
    async with two_processes(kind) as (here, other):
        record = SessionRecord.new(protocol_version="2025-11-25")
        await here.sessions.create(record)
        await _respond_and_let_go(here, other, record.id, one_step=kind == "redis-one-connection")


async def _respond_and_let_go(here: StreamableHTTPTransport, other: StreamableHTTPTransport,
                              session_id: str, *, one_step: bool) -> None:
    response = {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert await here.claim_request(session_id, 7)
    sequence, holder, released = await here.store_response(session_id, 7, "post:i7", response)
    assert sequence is not None and holder is None and released is one_step
    assert await stored(here, session_id, "post:i7") == [response]
    if not released:
        await here.release_request(session_id, 7)
    assert not await here.request_in_flight(session_id, 7)
    assert await here.state.count(f"held:{session_id}") == 0
    assert await here.claim_request(session_id, 7)  # the id is free again
    await here.release_request(session_id, 7)
    # Another process's claim of the id is left as it is (a process taken for dead whose id was
    # claimed anew), as release_request leaves it.
    assert await other.claim_request(session_id, 8)
    await here.store_response(session_id, 8, "post:i8", {**response, "id": 8})
    assert await here.request_in_flight(session_id, 8)
    await other.release_request(session_id, 8)
    # A session gone meanwhile stores nothing and lets go of nothing: the caller releases the id.
    assert await here.claim_request(session_id, 9)
    await here.sessions.delete(session_id)
    assert await here.store_response(session_id, 9, "post:i9", {**response, "id": 9}) == (None, None, False)
    assert await here.request_in_flight(session_id, 9)
    await here.release_request(session_id, 9)
    assert not await here.request_in_flight(session_id, 9)


@pytest.mark.parametrize("kind", ["local", "redis", "redis-one-connection"])
async def test_ending_a_session_drops_its_entry_counts_and_events_and_tells_the_processes_holding_it(
        kind, transactional_db, short_lived_connections):
    """``end_session`` (a DELETE, the admin's, the API's): with the Redis stores on one connection
    the session's entry and counts go in the round trip that drops its events; the result is the
    same with every store."""
    async with two_processes(kind) as (here, other):
        state = here.state
        kept, ended = (SessionRecord.new(protocol_version="2025-11-25", principal="address:a")
                       for _ in range(2))
        for record in (kept, ended):
            await here.sessions.create(record, count_principal=True, count_sessions=True)
        server = here.sessions.server
        counters = (server_counter(server), principal_counter(server, "address:a"))
        assert [await state.get(key) for key in counters] == ["2", "2"]
        await here.store_event(ended.id, "post:i1", {"jsonrpc": "2.0", "method": "notifications/message"})
        assert await other.claim_request(ended.id, 3)  # a request of it in flight elsewhere
        told = []

        async def tell_every_process(message: dict) -> None:
            told.append(message)

        here.tell_every_process = tell_every_process
        assert await here.end_session(ended.id)
        assert told == [{"type": "mcp.close", "session_id": ended.id}]  # the other ends its request
        assert await here.sessions.peek(ended.id) is None and await here.sessions.load(ended.id) is None
        assert await stored(here, ended.id, "post:i1") == []
        assert await state.count(f"held:{ended.id}") == 0
        assert [await state.get(key) for key in counters] == ["1", "1"]
        assert await here.sessions.peek(kept.id) is not None
        assert not await here.end_session(ended.id)  # already gone: nothing taken twice
        assert [await state.get(key) for key in counters] == ["1", "1"]
        assert len(told) == 1  # and no claim left: no process is told


async def stored(transport: StreamableHTTPTransport, session_id: str, stream: str) -> list[dict]:
    return [message for _sequence, message, _level in await transport.events.replay(session_id, stream, 0)]


async def hold(transport: StreamableHTTPTransport, session_id: str, key: str, holder: str) -> None:
    """A claim as a process makes it (counted for the session)."""
    assert await transport.state.add_counted(key, holder, 600, f"held:{session_id}", 600)


async def test_a_dead_process_request_is_answered_once_and_its_id_claimed_by_one(processes):
    transports, session_id = processes
    await hold(transports[0], session_id, f"req:{session_id}:i7", DEAD)
    claimed = await asyncio.gather(*(transport.claim_request(session_id, 7) for transport in transports))
    assert claimed.count(True) == 1
    assert await stored(transports[0], session_id, "post:i7") == [request_stopped(7)]
    assert request_stopped(7)["error"] == {"code": -32603, "message": REQUEST_STOPPED}
    # The claim now is the winner's, and its release frees the id (a loser's release does not).
    winner = transports[claimed.index(True)]
    loser = transports[claimed.index(False)]
    await loser.release_request(session_id, 7)
    assert not await loser.claim_request(session_id, 7)
    await winner.release_request(session_id, 7)
    assert await loser.claim_request(session_id, 7)
    await loser.release_request(session_id, 7)
    # Every claim was counted down once (the dead one by its one taker), so nothing is held.
    assert await transports[0].state.count(f"held:{session_id}") == 0


async def test_a_live_process_keeps_its_request_until_it_stops(processes):
    transports, session_id = processes
    serving, other = transports[1], transports[2]
    assert await serving.claim_request(session_id, "live")
    assert not await other.claim_request(session_id, "live")
    assert not await other.settle_orphaned_request(session_id, "live")
    assert await stored(other, session_id, 'post:slive') == []
    # The process closes without releasing it (its heartbeat goes as it stops): dead at once.
    await serving.close()
    settled = await asyncio.gather(*(transport.settle_orphaned_request(session_id, "live")
                                     for transport in (transports[0], *transports[2:])))
    assert settled.count(True) == 1
    assert await stored(other, session_id, "post:slive") == [request_stopped("live")]
    assert await other.claim_request(session_id, "live")


async def test_a_dead_process_stream_is_taken_over_by_one(processes):
    transports, session_id = processes
    await hold(transports[0], session_id, f"stream:{session_id}:get", f"{DEAD}|token")
    claimed = await asyncio.gather(*(transport.claim_stream(session_id, "get", uuid.uuid4().hex)
                                     for transport in transports))
    assert claimed.count(True) == 1
    # A live holder keeps it.
    assert not await transports[0].claim_stream(session_id, "get", "another")


async def test_a_process_taken_for_dead_gives_up_its_stream_when_it_renews_it(processes):
    transports, session_id = processes
    holder, taker = transports[0], transports[1]
    assert await holder.claim_stream(session_id, "get", "mine")
    assert await holder.renew_stream(session_id, "get", "mine")
    # Its heartbeat lapsed (a long pause, say) and another process took the stream over.
    theirs = f"{taker.runtime.channel_key}|theirs"
    await taker.state.set(f"stream:{session_id}:get", theirs, 600)
    assert not await holder.renew_stream(session_id, "get", "mine")
    assert await taker.state.get(f"stream:{session_id}:get") == theirs


async def test_an_answer_to_a_dead_process_settles_the_request_that_asked(processes):
    transports, session_id = processes
    await hold(transports[0], session_id, f"req:{session_id}:i9", DEAD)
    await transports[0].state.set(f"s2c:{session_id}:question", f"{DEAD}|9", 600)
    answer = {"jsonrpc": "2.0", "id": "question", "result": {"action": "decline"}}
    await asyncio.gather(*(transport.route_response(session_id, answer) for transport in transports))
    assert await transports[0].state.get(f"s2c:{session_id}:question") is None
    assert await stored(transports[0], session_id, "post:i9") == [request_stopped(9)]
    assert await transports[0].state.get(f"req:{session_id}:i9") is None


async def test_a_resumed_stream_waits_while_another_process_takes_its_dead_request_over(processes):
    """Another process won the take-over of the request and has not stored its error yet: the
    request is in flight still, and the stream resumed meanwhile gets that error, never "lost"."""
    transports, session_id = processes
    taker, resuming = transports[1], transports[2]
    await hold(transports[0], session_id, f"req:{session_id}:i5", DEAD)
    in_take_over, finish = asyncio.Event(), asyncio.Event()
    answer_stopped = taker._answer_stopped

    async def paused(session_id: str, request_id) -> None:
        in_take_over.set()
        await finish.wait()
        await answer_stopped(session_id, request_id)

    taker._answer_stopped = paused
    taking_over = asyncio.ensure_future(taker.settle_orphaned_request(session_id, 5))
    await asyncio.wait_for(in_take_over.wait(), 10)
    # The stream's process looks at the request while the take-over is under way.
    looked = asyncio.Event()
    in_flight = resuming.request_in_flight

    async def looking(*args) -> bool:
        answer = await in_flight(*args)
        looked.set()
        return answer

    resuming.request_in_flight = looking
    get = {"host": "127.0.0.1", "accept": "text/event-stream", "mcp-session-id": session_id,
           "mcp-protocol-version": "2025-11-25", "last-event-id": "post:i5/0"}
    resumed = asyncio.ensure_future(call_asgi(resuming.as_asgi(), "GET", get))
    await asyncio.wait_for(looked.wait(), 10)
    assert not resumed.done()
    finish.set()
    assert await asyncio.wait_for(taking_over, 10) is True
    reply = await resumed
    assert sse_messages(reply.body) == [request_stopped(5)]
    assert await resuming.state.get(f"req:{session_id}:i5") is None


async def test_the_heartbeat_is_renewed_while_the_process_runs(processes):
    transports, _session_id = processes
    transport = transports[0]
    channel = transport.runtime.channel_key
    assert await transport.liveness.is_alive(channel)
    # Past several heartbeat lifetimes the key is still there: the runtime renews it.
    key = f"alive:{channel}"
    await transport.state.delete(key)
    await asyncio.wait_for(_until(lambda: transport.state.get(key)), 10)


async def test_a_resumed_stream_of_a_request_that_runs_nowhere_ends_with_an_error(
        transactional_db, short_lived_connections):
    server = Server("lost")

    @server.tool
    async def hello() -> str:
        return "hello"

    transport = StreamableHTTPTransport(server)
    app = transport.as_asgi()
    try:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}).encode()
        session_id = (await call_asgi(app, "POST", post_headers(), [init])).header(b"mcp-session-id").decode()
        get = {"host": "127.0.0.1", "accept": "text/event-stream", "mcp-session-id": session_id,
               "mcp-protocol-version": "2025-11-25"}
        # A call that ended: its stored response is replayed, and the stream ends with it.
        call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "hello", "arguments": {}}}).encode()
        answered = await call_asgi(app, "POST", post_headers(session_id), [call])
        assert b'"hello"' in answered.body
        replayed = await call_asgi(app, "GET", {**get, "last-event-id": "post:i2/0"})
        assert sse_messages(replayed.body) == [{"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "hello"}], "isError": False}}]
        # A request that runs nowhere and left nothing stored (its events expired, or it never
        # was): an error, not a stream that waits forever.
        for resumed in ("post:i77/0", "post:sgone/3"):
            lost = await call_asgi(app, "GET", {**get, "last-event-id": resumed})
            assert lost.start["status"] == 200
            request_id = 77 if resumed.startswith("post:i") else "gone"
            assert sse_messages(lost.body) == [request_lost(request_id)]
            check_server_message(request_lost(request_id), "2025-11-25")
            assert lost.messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    finally:
        await transport.close()


def sse_messages(body: bytes) -> list[dict]:
    return [json.loads(line[5:]) for line in body.decode().splitlines()
            if line.startswith("data:") and line[5:].strip()]


async def _until(probe) -> None:
    while not await probe():
        await asyncio.sleep(0.05)


# kill -9 of a daphne process mid-call ------------------------------------------------------------

HEARTBEAT = 1.0
# Longer than any wait below: what is let go here is let go by the liveness of its holder, not
# because a claim lapsed (a stream's claim lives 2 keepalives + 5 s, a request's 80 minutes).
KEEPALIVE = 60
GENEROUS = 45.0  # every wait for a death to be noticed (the bound is 4 heartbeats: 4 s)


def is_stopped_error(message: dict, request_id: int) -> bool:
    return message == request_stopped(request_id)


def test_a_killed_process_requests_get_an_error_on_any_process_and_their_ids_are_reusable(
        django_db_setup, transactional_db):
    require_services()
    settings = {"PROCESS_HEARTBEAT_INTERVAL": HEARTBEAT, "KEEPALIVE_INTERVAL": KEEPALIVE}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as (doomed, survivor):
        client = new_session(doomed.url, capabilities={"elicitation": {}})
        listening = open_stream(client, doomed.url)
        waiting = CallInBackground(client, doomed.url, 101, "sleepy", {"seconds": 3600})
        resent = CallInBackground(client, doomed.url, 102, "sleepy", {"seconds": 3600})
        asking = CallInBackground(client, doomed.url, 103, "ask_client", {"request": "elicit"})
        primed = {call.request_id: wait_until(lambda call=call: call.event(lambda e: e.id is not None),
                                              30, f"the priming event of {call.request_id}")
                  for call in (waiting, resent)}
        question = wait_until(lambda: asking.event(lambda e: (e.message or {}).get("method")
                                                   == "elicitation/create"), 30, "the elicitation")

        doomed.kill()
        for call in (waiting, resent, asking):
            call.join()
        ends(listening, timeout=10)

        # A stream resumed on the survivor while the dead process still looks alive waits, checks
        # it every heartbeat, and gets the error once its heartbeat lapses; the stream then ends.
        resumed = survivor_listen(client, survivor.url, primed[101].id)
        error = next_event(resumed, timeout=GENEROUS)
        assert is_stopped_error(error.message, 101), error.message
        assert ends(resumed) == []

        # The answer to the dead process's question settles the call that asked it at once.
        answer = {"jsonrpc": "2.0", "id": question.message["id"],
                  "result": {"action": "accept", "content": {"colour": "blue"}}}
        response = client.post_raw(json.dumps(answer), url=survivor.url)
        assert response.status_code == 202, response.text
        with redis_client(REDIS_DB) as redis:
            session = client.session_id
            assert not redis.exists(f"mcp:req:{session}:i103", f"mcp:s2c:{session}:{question.message['id']}")
        late = survivor_listen(client, survivor.url, question.id)
        assert is_stopped_error(next_event(late).message, 103)
        assert ends(late) == []

        # The same id sent again is accepted at once (its old call is answered, then it is free).
        # Its stream, resumed while it runs, carries its own answer, not the old call's error.
        again = CallInBackground(client, survivor.url, 102, "slow_count", {"count": 20, "delay": 0.5})
        fresh = wait_until(lambda: again.event(lambda e: e.id is not None) or again.exchange, 30,
                           "the priming event of the call sent again")
        assert isinstance(fresh, Event), f"the call sent again was refused: {again.exchange}"
        resumed_again = survivor_listen(client, survivor.url, fresh.id)
        answer = next_event(resumed_again, timeout=GENEROUS)
        assert answer.message["id"] == 102
        assert answer.message["result"]["content"][0]["text"] == "Counted to 20"
        assert ends(resumed_again) == []
        again.join()
        # Once resumed elsewhere, the stream's events go there alone: the first connection ends.
        assert again.exchange.status == 200 and again.exchange.response is None
        # So is the id whose error the resumed stream got.
        assert client.request("ping", request_id=101, url=survivor.url).response["result"] == {}

        # The session's listening stream, claimed by the dead process, reopens on the survivor
        # well before its claim would lapse (2 keepalives + 5 s = 125 s).
        reopened = open_stream(client, survivor.url, timeout=GENEROUS)
        reopened.close()


def survivor_listen(client: HTTPClient, url: str, last_event_id: str):
    listener = client.listen(last_event_id, url=url)
    assert listener.status == 200, listener.status
    return listener


def test_the_errors_of_a_dead_or_lost_request_are_valid_on_every_revision():
    """The errors a dead process's request, or a lost one, gets are valid in every revision."""
    for revision in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"):
        check_server_message(request_stopped(5), revision)
        check_server_message(request_stopped("five"), revision)
        check_server_message(request_lost(5), revision)


async def test_an_answer_whose_route_was_lost_reaches_the_waiting_process(processes):
    """The shared state lost the record of who waits for an answer (Redis flushed, failed over):
    the answer POSTed to another process still reaches the request, not its timeout."""
    transports, session_id = processes
    waiting, receiving = transports[0], transports[3]
    runtime = waiting.runtime
    sent: list[dict] = []
    asked = asyncio.Event()

    async def send(message: dict, *, related_request_id=None) -> bool:
        sent.append(message)
        await waiting.expect_answer(session_id, message["id"])
        asked.set()
        return True

    asking = asyncio.ensure_future(runtime.pending.request(send, "roots/list", None, timeout=60,
                                                           owner=session_id))
    await asyncio.wait_for(asked.wait(), 10)
    request_id = sent[0]["id"]
    assert await waiting.state.get(f"s2c:{session_id}:{request_id}") is not None
    await waiting.state.delete(f"s2c:{session_id}:{request_id}")  # the record is lost
    # Another session's client answering that id is offered around too, and taken by nobody.
    await receiving.route_response("another-session", {"jsonrpc": "2.0", "id": request_id,
                                                       "result": {"roots": [{"uri": "file:///x"}]}})
    await receiving.route_response(session_id, {"jsonrpc": "2.0", "id": request_id,
                                                "result": {"roots": []}})
    assert await asyncio.wait_for(asking, 10) == {"roots": []}
    # An id of a form the server never sends is not asked of every process.
    await receiving.route_response(session_id, {"jsonrpc": "2.0", "id": "guess", "result": {}})


# The Redis of the fault tests, which another test run may share ----------------------------------

def test_a_cluster_waits_for_a_redis_database_another_run_holds_and_leaves_its_keys_alone():
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    theirs = "pid 1 another test run"
    with redis_client(REDIS_DB) as redis:
        # Another run's cluster holds the database, and its processes' claims are in it.
        redis.set(LEASE_KEY, theirs, px=60_000)
        redis.set("mcp:req:their-session:i101", "their process")
        lease = RedisLease(REDIS_DB)
        taking = threading.Thread(target=lease.acquire, daemon=True)
        taking.start()
        wait_until(lambda: lease.waiting_for == theirs, 30, "the cluster waiting for the other run")
        assert redis.get("mcp:req:their-session:i101") == "their process"
        redis.delete(LEASE_KEY)  # that run's cluster ended
        taking.join(30)
        assert not taking.is_alive()
        try:
            # This run's now, flushed for it: nothing of the other run's is left.
            assert redis.get(LEASE_KEY) == lease.token
            assert redis.get("mcp:req:their-session:i101") is None
            assert lease.check() is None
            # A cluster nested in it by this process (a test beside its module's cluster) does
            # not wait for itself: it holds the database meanwhile, then hands it back.
            with cluster(0, redis_db=REDIS_DB):
                assert redis.get(LEASE_KEY) not in (None, lease.token)
            assert redis.get(LEASE_KEY) == lease.token
        finally:
            lease.release()
        assert redis.get(LEASE_KEY) is None


def test_a_cluster_whose_redis_database_another_run_flushed_says_so_when_its_test_fails():
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    with pytest.raises(AssertionError) as failed, cluster(0, redis_db=REDIS_DB):
        with redis_client(REDIS_DB) as redis:
            redis.flushdb()  # as a run of tests that flush without a lease does
        raise AssertionError("the request's claim is gone")
    assert str(failed.value) == "the request's claim is gone"
    assert f"Redis database {REDIS_DB} on {REDIS_HOST}:{REDIS_PORT} was flushed or taken by another " \
           "process" in "\n".join(failed.value.__notes__)
    # A failure with the database intact has no note.
    with pytest.raises(AssertionError) as failed, cluster(0, redis_db=REDIS_DB):
        raise AssertionError("a failure of its own")
    assert not getattr(failed.value, "__notes__", None)
    with redis_client(REDIS_DB) as redis:
        assert redis.get(LEASE_KEY) is None
