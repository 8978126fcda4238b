"""Both eras on one deployment at the same time: two daphne processes on PostgreSQL and Redis,
a handshake-era session spread over both while a modern (2026-07-28) client uses both too, and
modern requests that leave no row and no Redis key behind (MOD-14, HTTP-26)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcp_server.models import ResourceSubscription, Session, StreamEvent

from .http_cluster import call_tool, cluster, new_session, redis_client, require_services
from .modern_support import MODERN, envelope
from .modern_support import post_over_http as modern
from .waiting import PATIENCE

REDIS_DB = 9


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker):
    require_services()
    with django_db_blocker.unblock(), cluster(2, redis_db=REDIS_DB) as servers:
        yield servers


@pytest.fixture
def urls(pair, transactional_db):
    return [server.url for server in pair]


def echo(url: str, text: str, request_id: int = 1) -> str:
    status, messages = modern(url, "tools/call", request_id, name="echo", arguments={"message": text})
    assert status == 200, messages
    return messages[-1]["result"]["content"][0]["text"]


@pytest.mark.feature("MOD-14", "HTTP-26")
def test_a_handshake_session_and_a_modern_client_share_both_processes(urls):
    one, other = urls
    legacy = new_session(one)
    with ThreadPoolExecutor(4) as pool:
        # A long handshake-era call runs on one process while modern requests go to both.
        counting = pool.submit(call_tool, legacy, one, "slow_count", {"count": 3, "delay": 0.2})
        progress_meta = {**envelope(), "progressToken": "p"}
        modern_count = pool.submit(modern, other, "tools/call", 5, progress_meta, name="slow_count",
                                   arguments={"count": 2, "delay": 0.2})
        for number, url in enumerate([one, other] * 3):
            assert echo(url, f"modern {number}", number) == f"modern {number}"
            assert call_tool(legacy, url, "echo", {"message": f"legacy {number}"}) == f"legacy {number}"
        assert counting.result(PATIENCE) == "Counted to 3"
        status, messages = modern_count.result(PATIENCE)
    assert status == 200
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 2 + [None]
    assert messages[-1]["result"]["resultType"] == "complete"
    status, messages = modern(other, "server/discover", 9)
    assert status == 200 and messages[0]["result"]["supportedVersions"] == [MODERN]
    # The session saw none of it, and the modern client none of the session.
    assert call_tool(legacy, other, "echo", {"message": "still mine"}) == "still mine"


@pytest.mark.feature("MOD-14", "MOD-02")
def test_modern_requests_leave_no_row_and_no_redis_key(urls):
    one, other = urls
    # Both processes are up and serving (their own heartbeat keys exist) before the count starts.
    legacy = new_session(one)
    assert call_tool(legacy, other, "echo", {"message": "warm"}) == "warm"
    tables = (Session, ResourceSubscription, StreamEvent)
    rows_before = [model.objects.count() for model in tables]
    with redis_client(REDIS_DB) as redis:
        keys_before = set(redis.keys("*"))
        for number in range(10):
            url = urls[number % 2]
            assert echo(url, str(number), number) == str(number)
            assert modern(url, "tools/list", 100 + number)[0] == 200
            assert modern(url, "server/discover", 200 + number)[0] == 200
        status, messages = modern(one, "resources/read", 300, uri="demo://readme")
        assert status == 200
        keys_after = set(redis.keys("*"))
    assert keys_after == keys_before, (keys_after - keys_before, keys_before - keys_after)
    assert [model.objects.count() for model in tables] == rows_before
    assert json.dumps(messages).count("ttlMs") == 1


@pytest.mark.feature("MOD-11", "LOG-06")
def test_the_demo_logs_at_the_level_each_modern_request_asks_for(urls):
    one, other = urls
    levels = {}
    for url, level in ((one, "warning"), (other, "debug"), (one, None)):
        status, messages = modern(url, "tools/call", 1, envelope(log_level=level), name="diagnose",
                                  arguments={})
        assert status == 200
        assert messages[-1]["result"]["content"][0]["text"] == "4 checks run: 1 error, 1 warning"
        levels[level] = [m["params"]["level"] for m in messages if m.get("method") == "notifications/message"]
    assert levels == {"warning": ["warning", "error"], "debug": ["debug", "info", "warning", "error"],
                      None: []}
