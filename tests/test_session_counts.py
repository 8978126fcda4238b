"""The counts of sessions behind ``MAX_SESSIONS`` and ``MAX_SESSIONS_PER_PRINCIPAL``: counters in
the shared state (``mcp_server/http/session_counts.py``), moved as sessions are stored and deleted
(by a DELETE, the reaper, or found expired), and counted anew from the database when absent or
made again at a limit."""

from __future__ import annotations

import datetime
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from mcp_server.http.session_counts import COUNT_TTL, principal_counter, server_counter
from mcp_server.http.session_store import SessionRecord, SessionStore
from mcp_server.http.shared_state import LocalState, RedisState
from mcp_server.models import Session

from .http_cluster import REDIS_HOST, REDIS_PORT
from .services import reachable, require

SERVER = "counted"


def state_of(kind: str):
    if kind == "local":
        return LocalState()
    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    return RedisState(f"redis://{REDIS_HOST}:{REDIS_PORT}/10", prefix=f"mcp-test-{uuid.uuid4().hex}:")


async def new(store: SessionStore, principal: str) -> tuple[str, tuple]:
    record = SessionRecord.new(protocol_version="2025-11-25", principal=principal)
    counts = await store.create(record, count_principal=True, count_sessions=True)
    return record.id, counts


async def counter(state, key: str) -> int | None:
    value = await state.get(key)
    return None if value is None else int(value)


@pytest.fixture(params=["local", "redis"])
def state(request, transactional_db):
    return state_of(request.param)


async def test_counts_move_with_creates_and_deletes_and_start_from_the_database(state):
    # A session stored before the counters exist (another process, before Redis lost its data).
    await sync_to_async(Session.objects.create)(id=uuid.uuid4().hex, protocol_version="2025-11-25",
                                                principal="address:a", server=SERVER,
                                                last_activity=timezone.now())
    store = SessionStore(state, 60, SERVER)
    first, counts = await new(store, "address:a")
    assert counts == (2, 2)  # counted anew from the database, this one included
    _second, counts = await new(store, "address:a")
    assert counts == (3, 3)
    assert (await new(store, "address:b"))[1] == (1, 4)
    assert await store.delete(first)
    assert await counter(state, server_counter(SERVER)) == 3
    assert await counter(state, principal_counter(SERVER, "address:a")) == 2
    assert not await store.delete(first)  # already gone: nothing taken twice
    assert await counter(state, server_counter(SERVER)) == 3
    assert (await new(store, "address:a"))[1] == (3, 4)


async def test_a_fair_share_is_counted_as_one(state):
    store = SessionStore(state, 60, SERVER)
    assert (await new(store, "share:group1/token:one"))[1] == (1, 1)
    assert (await new(store, "share:group1/token:two"))[1] == (2, 2)
    assert (await new(store, "token:alone"))[1] == (1, 3)


async def test_a_counter_gone_or_wrong_is_counted_again_from_the_database(state):
    store = SessionStore(state, 60, SERVER)
    for _ in range(3):
        await new(store, "address:a")
    # Its time to live ended (or Redis lost its data): the next session counts the rows again.
    await state.delete(server_counter(SERVER))
    assert (await new(store, "address:a"))[1] == (4, 4)
    # Left wrong (a process killed between its row and its counter): a count made at the limit
    # keeps the database's answer.
    await state.set(server_counter(SERVER), "1000", COUNT_TTL)
    await state.set(principal_counter(SERVER, "address:a"), "1000", COUNT_TTL)
    assert await store.count() == 4
    assert await store.count_principal("address:a") == 4
    assert (await new(store, "address:a"))[1] == (5, 5)


async def test_sessions_that_expire_are_taken_from_the_counts(state):
    store = SessionStore(state, 30, SERVER)
    reaped, _ = await new(store, "address:a")
    found, _ = await new(store, "address:a")
    kept, counts = await new(store, "address:a")
    assert counts == (3, 3)
    long_ago = timezone.now() - datetime.timedelta(seconds=60)
    await sync_to_async(Session.objects.filter(pk__in=[reaped, found]).update)(last_activity=long_ago)
    for session_id in (reaped, found):  # their shared-state entries expired
        await state.delete(SessionStore._key(session_id))
    # Found expired when it is used: deleted, and taken from the counts.
    assert await store.load(found) is None
    assert await counter(state, server_counter(SERVER)) == 2
    # Deleted by the reaper: taken from the counts too.
    assert await store.reap() == [reaped]
    assert await counter(state, server_counter(SERVER)) == 1
    assert await counter(state, principal_counter(SERVER, "address:a")) == 1
    assert (await store.load(kept)).id == kept


class PlainState:
    """A project's own shared state, written before the counters: the protocol's methods only."""

    def __init__(self) -> None:
        self._inner = LocalState()

    def __getattr__(self, name: str):
        if name in ("set_counting", "delete_uncounting"):
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_a_state_without_counters_counts_in_the_database(transactional_db):
    store = SessionStore(PlainState(), 60, SERVER)
    first, counts = await new(store, "address:a")
    assert counts == (1, 1)
    assert (await new(store, "address:a"))[1] == (2, 2)
    assert await store.delete(first)
    assert (await new(store, "address:a"))[1] == (2, 2)
