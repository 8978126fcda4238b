"""``round_robin``: one client's requests spread over two daphne processes of one deployment
(PostgreSQL and Redis shared), in turn, through ``HTTPTransport``'s ``http_client_factory``.
Every message is checked against the schema of its revision (CheckedHTTPTransport)."""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_client import AsyncClient, Client
from mcp_client.transports.round_robin import RoundRobinTransport, round_robin

from .client_support import CheckedHTTPTransport, every_message_checked
from .http_cluster import cluster_fixture

REDIS_DB = 13

pytestmark = pytest.mark.django_db(transaction=True)
pair = cluster_fixture(REDIS_DB)


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


def pid_of(text: str) -> int:
    return json.loads(text)["pid"]


async def test_one_sessions_requests_take_turns_on_two_processes(pair):
    a, b = pair
    factory = round_robin([a.url, b.url])
    client = AsyncClient(CheckedHTTPTransport(a.url, http_client_factory=factory), mode="legacy")
    async with client:  # initialize on a, notifications/initialized on b
        # background_touch runs in the process that got the call (no broker): it says which.
        first = await client.call_tool("background_touch", {"uri": "demo://readme"})
        second = await client.call_tool("background_touch", {"uri": "demo://readme"})
    assert [pid_of(first.text), pid_of(second.text)] == [a.process.pid, b.process.pid]
    [transport] = factory.transports
    assert transport.sent == {a.url: 3, b.url: 2}  # and the DELETE that ends the session, on a


async def test_modern_requests_take_turns_too(pair):
    a, b = pair
    factory = round_robin([a.url, b.url])
    async with AsyncClient(CheckedHTTPTransport(a.url, http_client_factory=factory), mode="modern") as client:
        for n in range(4):
            assert (await client.call_tool("add", {"a": n, "b": 1})).structured_content == {"sum": n + 1}
    [transport] = factory.transports
    assert transport.sent == {a.url: 3, b.url: 2}  # server/discover, then the four calls


def test_the_blocking_client_too_and_each_connection_starts_its_own_turns(pair):
    a, b = pair
    factory = round_robin([a.url, b.url], timeout=20)
    with Client(CheckedHTTPTransport(a.url, http_client_factory=factory), mode="legacy") as client:
        pids = {pid_of(client.call_tool("background_touch", {"uri": "demo://x"}).text) for _ in range(2)}
        assert pids == {a.process.pid, b.process.pid}
        client.close()
        client.connect()  # a new connection: a new httpx client from the factory
        assert client.ping() == {}
    assert len(factory.transports) == 2


def test_bad_endpoints_are_refused_at_once():
    for urls in ([], "http://127.0.0.1:1/mcp", ["ftp://127.0.0.1/mcp"], ["/mcp"]):
        with pytest.raises(ValueError):
            round_robin(urls)
    with pytest.raises(TypeError, match="RoundRobinTransport"):
        round_robin(["http://127.0.0.1:1/mcp"], transport=httpx.AsyncHTTPTransport())
    assert RoundRobinTransport(["http://127.0.0.1:1/mcp"]).sent == {}
