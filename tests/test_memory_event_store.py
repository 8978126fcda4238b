"""The event store of a single-process deployment: events in memory, with the limits and the
refusals of the other stores, and a restart that never lets a client skip events silently.

Where it is the default (``site.build_stores``): only where one process serves every session.
"""

from __future__ import annotations

import datetime
import json
import uuid

import pytest
from django.test import override_settings

from mcp_server.http.event_store import GET_STREAM, DatabaseEventStore, EventsDropped, RedisEventStore
from mcp_server.http.memory_event_store import MemoryEventStore
from mcp_server.http.shared_state import LocalState
from mcp_server.models import Session

MESSAGE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 50}}
SIZE = len(json.dumps(MESSAGE, separators=(",", ":")))


async def new_session() -> str:
    """A session row begun now (the store reads when a session began), committed for the worker
    thread: made after the store, as a session of the running process is."""
    from django.utils import timezone

    session = await Session.objects.acreate(id=uuid.uuid4().hex, protocol_version="2025-11-25",
                                            last_activity=timezone.now())
    return session.pk


def sequences(events: list) -> list[int]:
    return [sequence for sequence, _message, _level in events]


async def test_events_replay_in_order_per_stream_with_their_messages_and_levels(transactional_db):
    store = MemoryEventStore()
    session_id = await new_session()
    first = await store.append(session_id, "post:i1", MESSAGE, "info")
    second = await store.append(session_id, "post:i2", {**MESSAGE, "params": {"data": "ü"}})
    third = await store.append(session_id, "post:i1", MESSAGE)
    assert first < second < third
    assert await store.replay(session_id, "post:i1", 0) == [(first, MESSAGE, "info"), (third, MESSAGE, "")]
    assert await store.replay(session_id, "post:i1", first) == [(third, MESSAGE, "")]
    assert await store.replay(session_id, "post:i2", second) == []
    assert await store.last_sequence() == third
    # What is replayed is what was stored, whatever the caller did with its dict since.
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "before"}}
    kept = await store.append(session_id, "get", message)
    message["params"]["data"] = "after"
    assert (await store.replay(session_id, "get", third))[0][1]["params"]["data"] == "before"
    assert kept > third


async def test_the_oldest_events_are_dropped_by_count_and_a_resume_before_them_is_refused(transactional_db):
    store = MemoryEventStore(max_events=10, max_bytes=None)
    session_id = await new_session()
    appended = [await store.append(session_id, f"post:i{n % 2}", MESSAGE) for n in range(25)]
    kept = appended[-10:]
    assert sequences(await store.replay(session_id, "post:i0", kept[0] - 1)) == \
        [sequence for n, sequence in enumerate(appended) if n % 2 == 0 and sequence in kept]
    lost_of_0 = max(sequence for n, sequence in enumerate(appended) if n % 2 == 0 and sequence < kept[0])
    # From the last lost event of the stream on: the rest; from before it: refused, saying so.
    assert sequences(await store.replay(session_id, "post:i0", lost_of_0)) == \
        [sequence for n, sequence in enumerate(appended) if n % 2 == 0 and sequence > lost_of_0]
    with pytest.raises(EventsDropped) as dropped:
        await store.replay(session_id, "post:i0", lost_of_0 - 2)
    assert (dropped.value.stream, dropped.value.dropped_through) == ("post:i0", lost_of_0)
    # A stream that lost nothing resumes from anywhere of this process.
    fresh = await store.append(session_id, "post:i9", MESSAGE)
    assert sequences(await store.replay(session_id, "post:i9", appended[0])) == [fresh]


async def test_the_oldest_events_are_dropped_by_bytes(transactional_db):
    store = MemoryEventStore(max_events=None, max_bytes=5 * SIZE)
    session_id = await new_session()
    appended = [await store.append(session_id, "get", MESSAGE) for _ in range(7)]
    assert sequences(await store.replay(session_id, "get", appended[1])) == appended[2:]
    big = await store.append(session_id, "post:i1", {**MESSAGE, "params": {"data": "y" * (3 * SIZE)}})
    # The large event pushed all but the newest small one out.
    assert sequences(await store.replay(session_id, "get", appended[5])) == [appended[6]]
    with pytest.raises(EventsDropped):
        await store.replay(session_id, "get", appended[4])
    assert sequences(await store.replay(session_id, "post:i1", appended[6])) == [big]
    # One event larger than the limit is not kept at all, and its stream says so.
    huge = await store.append(session_id, "post:i2", {**MESSAGE, "params": {"data": "z" * (6 * SIZE)}})
    with pytest.raises(EventsDropped) as dropped:
        await store.replay(session_id, "post:i2", huge - 1)
    assert dropped.value.dropped_through == huge


async def test_a_resume_across_a_restart_is_refused_never_silently_short(transactional_db):
    before = MemoryEventStore()
    session_id = await new_session()
    stored = await before.append(session_id, "post:i1", MESSAGE)
    get_id = await before.append(session_id, "get", MESSAGE)
    # The process restarts: a new store, nothing of the old one's events.
    after = MemoryEventStore()
    assert after.first_sequence > get_id  # sequences never repeat across a restart
    for stream, last_seen in (("post:i1", stored), ("get", get_id), ("post:i1", 0), ("get", 0)):
        with pytest.raises(EventsDropped) as lost:
            await after.replay(session_id, stream, last_seen)
        assert "which has restarted" in str(lost.value)  # the client's 410 says why
    # Its own events resume as usual, even for a session older than it.
    new = await after.append(session_id, "post:i1", MESSAGE)
    assert new == after.first_sequence
    assert sequences(await after.replay(session_id, "post:i1", new)) == []
    newer = await after.append(session_id, "post:i1", MESSAGE)
    assert sequences(await after.replay(session_id, "post:i1", new)) == [newer]
    # An id this process never handed out (a later one's, or made up) is refused too.
    with pytest.raises(EventsDropped):
        await after.replay(session_id, "post:i1", newer + 1000)


async def test_a_session_begun_after_the_store_replays_from_its_priming_id(transactional_db):
    from django.utils import timezone

    store = MemoryEventStore()
    session = await Session.objects.acreate(id=uuid.uuid4().hex, protocol_version="2025-11-25",
                                            last_activity=timezone.now())
    assert await store.replay(session.pk, "post:i1", 0) == []
    first = await store.append(session.pk, "post:i1", MESSAGE)
    assert sequences(await store.replay(session.pk, "post:i1", 0)) == [first]
    # A session that is gone replays nothing.
    assert await store.replay(uuid.uuid4().hex, "post:i1", 0) == []


async def test_broadcasts_join_the_get_stream_of_sessions_begun_before_them(transactional_db):
    store = MemoryEventStore()
    session_id = await new_session()
    mine = await store.append(session_id, GET_STREAM, MESSAGE)
    notice = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    shared = await store.append(None, "broadcast:shop", notice)
    other = await store.append(None, "broadcast:blog", notice)
    last = await store.append(session_id, GET_STREAM, MESSAGE)
    assert sequences(await store.replay(session_id, GET_STREAM, 0, broadcasts="broadcast:shop")) == \
        [mine, shared, last]
    assert sequences(await store.replay(session_id, GET_STREAM, mine, broadcasts="broadcast:blog")) == \
        [other, last]
    # Only the GET stream carries them.
    assert await store.replay(session_id, "post:i1", mine, broadcasts="broadcast:shop") == []
    # A session begun after a broadcast does not get it.
    await Session.objects.filter(pk=session_id).aupdate(
        created_at=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1))
    assert sequences(await store.replay(session_id, GET_STREAM, mine, broadcasts="broadcast:shop")) == [last]


async def test_a_forgotten_session_keeps_nothing_and_stores_nothing_more(transactional_db):
    store = MemoryEventStore()
    session_id = await new_session()
    first = await store.append(session_id, "post:i1", MESSAGE)
    await store.forget(session_id)
    assert await store.replay(session_id, "post:i1", first) == []
    # A request of the ended session that still runs: its events are not stored (None, as the
    # other stores answer for a deleted session).
    assert await store.append(session_id, "post:i1", MESSAGE) is None
    assert session_id not in store._sessions


async def test_purge_removes_old_events_and_a_stream_that_lost_some_says_so(transactional_db, monkeypatch):
    from mcp_server.http import memory_event_store

    clock = Clock()
    monkeypatch.setattr(memory_event_store, "time", clock)
    store = MemoryEventStore()
    session_id = await new_session()
    await store.append(session_id, "post:i1", MESSAGE)
    await store.append(None, "broadcast:shop", MESSAGE)
    await store.forget("ended")
    lost = await store.append(session_id, "post:i2", MESSAGE)
    clock.now += 100
    kept = await store.append(session_id, "post:i2", MESSAGE)
    # Older than a minute: the first three events, and what was known of the ended session.
    assert await store.purge(datetime.timedelta(seconds=60)) == 3
    assert list(store._sessions[session_id].streams) == ["post:i1", "post:i2"]
    assert store._broadcasts == {} and store._gone == {}
    # The stream that keeps a newer event remembers the one it lost.
    assert sequences(await store.replay(session_id, "post:i2", lost)) == [kept]
    with pytest.raises(EventsDropped):
        await store.replay(session_id, "post:i2", lost - 1)
    # Once nothing of a session is left, nothing of it is kept.
    clock.now += 100
    assert await store.purge(datetime.timedelta(seconds=60)) == 1
    assert store._sessions == {}


class Clock:
    """Stands for the time module in the store's module: a clock the test moves."""

    def __init__(self) -> None:
        import time

        self.now = time.time()

    def time(self) -> float:
        return self.now


def test_limits_are_checked_as_the_other_stores_check_them():
    with pytest.raises(ValueError, match="max_events must be a positive integer or None, not 0"):
        MemoryEventStore(max_events=0)
    store = MemoryEventStore(max_events=5, max_bytes=None)
    assert (store.max_events, store.max_bytes) == (5, None)


# Where it is the default --------------------------------------------------------------------------
MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REDIS_LAYER = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}


def built_event_store(mcp: dict, **django: object) -> object:
    from django.conf import settings

    from mcp_server.site import build_stores

    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "REDIS_URL": None,
                                       "SHARED_STATE_CLASS": None, "EVENT_STORE_CLASS": None,
                                       "BACKGROUND_CALLS": "auto", **mcp}, **django):
        return build_stores()[1]


def test_only_a_single_process_deployment_keeps_its_events_in_memory():
    one_process = {"CHANNEL_LAYERS": MEMORY_LAYER, "CELERY_BROKER_URL": None}
    assert type(built_event_store({}, **one_process)) is MemoryEventStore
    assert type(built_event_store({}, CHANNEL_LAYERS={}, CELERY_BROKER_URL=None)) is MemoryEventStore
    # A channel layer that reaches other processes: they may serve the sessions too.
    assert type(built_event_store({}, CHANNEL_LAYERS=REDIS_LAYER,
                                  CELERY_BROKER_URL=None)) is DatabaseEventStore
    # Background calls on Celery workers: they store their calls' events from other processes.
    assert type(built_event_store({}, CHANNEL_LAYERS=MEMORY_LAYER,
                                  CELERY_BROKER_URL="redis://127.0.0.1:1/0")) is DatabaseEventStore
    assert type(built_event_store({"BACKGROUND_CALLS": "celery"}, **one_process)) is DatabaseEventStore
    assert type(built_event_store({"BACKGROUND_CALLS": "local"}, CHANNEL_LAYERS=MEMORY_LAYER,
                                  CELERY_BROKER_URL="redis://127.0.0.1:1/0")) is MemoryEventStore
    # A shared state of another kind: processes share it, so they share the sessions.
    assert type(built_event_store({"SHARED_STATE_CLASS": f"{__name__}.SharedElsewhere"},
                                  **one_process)) is DatabaseEventStore
    assert type(built_event_store({"SHARED_STATE_CLASS": f"{__name__}.LocalToo"},
                                  **one_process)) is MemoryEventStore
    # Redis: its own store.
    store = built_event_store({"REDIS_URL": "redis://127.0.0.1:1/0"}, **one_process)
    assert type(store) is RedisEventStore
    # Named, a class is used as it is, with the limits.
    named = built_event_store({"EVENT_STORE_CLASS": "mcp_server.http.event_store.DatabaseEventStore",
                               "MAX_STORED_EVENTS_PER_SESSION": 7}, **one_process)
    assert type(named) is DatabaseEventStore and named.max_events == 7
    named = built_event_store({"EVENT_STORE_CLASS": "mcp_server.http.memory_event_store.MemoryEventStore",
                               "REDIS_URL": "redis://127.0.0.1:1/0", "MAX_STORED_EVENTS_PER_SESSION": 7},
                              **one_process)
    assert type(named) is MemoryEventStore and named.max_events == 7


class SharedElsewhere:
    """A shared state that is not this process's memory (its methods are never called here)."""


class LocalToo(LocalState):
    pass


# Over HTTP, on the embedded default's one process --------------------------------------------------
ONE_PROCESS = {"SERVER_CLASS": "tests.limits_server.LimitsServer", "MAX_STORED_EVENTS_PER_SESSION": 6}


def test_over_http_the_limits_hold_and_a_resume_after_a_restart_is_refused(django_db_blocker,
                                                                            transactional_db):
    from .http_support import Client, error_of, running, stream_ended

    with running(django_db_blocker, mcp_settings=ONE_PROCESS) as server:
        client = Client(server.url)
        client.initialize()
        assert client.request("logging/setLevel", {"level": "debug"}).response["result"] == {}
        exchange = client.tool("flood", {"count": 10, "size": 10})
        ids = [event.id for event in exchange.events if event.message is not None]
        assert len(ids) == 11  # ten log messages and the response
        # The newest six of the session's events are kept: the last six of this stream.
        replayed = stream_ended(client.listen(last_event_id=ids[-7]))
        assert [event.id for event in replayed if event.message is not None] == ids[-6:]
        gone = client.get({"last-event-id": ids[-8]})
        assert gone.status_code == 410, gone.text
        assert "stored-event limits" in error_of(gone)["message"]
        session_id = client.session_id
    # The process restarts: the session is a row and lives on; what its memory held does not.
    with running(django_db_blocker, mcp_settings=ONE_PROCESS) as server:
        client = Client(server.url)
        client.session_id = session_id
        for last_seen in (ids[-1], ids[-1].rpartition("/")[0] + "/0"):
            gone = client.get({"last-event-id": last_seen})
            assert gone.status_code == 410, gone.text
            assert "which has restarted" in error_of(gone)["message"]
        # The session goes on: a new call is answered and its stream resumes as usual.
        again = client.tool("flood", {"count": 2, "size": 10})
        ids = [event.id for event in again.events if event.message is not None]
        replayed = stream_ended(client.listen(last_event_id=ids[0]))
        assert [event.id for event in replayed if event.message is not None] == ids[1:]
