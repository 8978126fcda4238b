"""The stores' Redis clients when Redis stops answering, refuses connections, or comes back.

Each test starts a Redis of its own (never the shared one) behind a loopback proxy it can pause.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from mcp_server.http import redis_client
from mcp_server.http.redis_client import Backoff, RedisClients, RedisError, RedisUnavailable, Script
from mcp_server.http.redispy_client import RedisPyClients

from .redis_faults import pausable_proxy, redis_server

# Long enough that a command sent right after a failure is certainly still inside the backoff.
BACKOFF = 4.0
DEADLINE = 0.5
CLIENTS = {"fast": RedisClients, "redis-py": RedisPyClients}


@pytest.fixture
def long_backoff(monkeypatch):
    monkeypatch.setattr(redis_client, "BACKOFF_BASE", BACKOFF)
    monkeypatch.setattr(redis_client, "BACKOFF_CAP", BACKOFF)


async def answers_again(connection, timeout: float = 60.0) -> None:
    """Wait until ``PING`` succeeds (the client reconnects by itself), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            assert await connection.execute("PING") == "PONG"
            return
        except RedisUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def test_backoff_doubles_with_jitter_up_to_its_cap():
    backoff = Backoff(base=0.1, cap=1.0)
    steps = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    for step in steps:
        delay = backoff.next_delay()
        assert step / 2 <= delay <= step
    backoff.reset()
    assert backoff.next_delay() <= 0.1
    # Jitter: many processes failing together do not all retry at the same instant.
    assert len({round(Backoff(base=1.0, cap=1.0).next_delay(), 6) for _ in range(20)}) > 1


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_redis_that_stops_answering_fails_commands_at_their_deadline_then_recovers(
        tmp_path, long_backoff, kind):
    with redis_server(tmp_path) as redis, pausable_proxy(redis.port) as proxy:
        clients = CLIENTS[kind](proxy.url, DEADLINE)
        connection = clients.get()
        assert await connection.execute("PING") == "PONG"
        assert proxy.connections == 1
        proxy.pause()
        # Every command waiting on the connection fails at the deadline, none hangs.
        results = await asyncio.gather(*(connection.execute("PING") for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(result, RedisUnavailable) for result in results), results
        assert any("did not answer within 0.5 s" in str(result) for result in results), results
        # The fast client tries one new connection at once (the old one worked): it fails at the
        # deadline too. Then the client backs off: a command fails at once, and no new connection
        # is attempted, rather than one per command against a Redis that does not answer.
        for _ in range(2):
            attempts = proxy.connections
            with pytest.raises(RedisUnavailable) as failure:
                await connection.execute("PING")
            if "next attempt in" in str(failure.value):
                assert proxy.connections == attempts
                break
            assert "did not answer within 0.5 s" in str(failure.value)
        else:
            pytest.fail("the client never backed off")
        proxy.resume()
        await answers_again(connection)
        assert await connection.execute("SET", "key", "value") == "OK"
        assert await connection.execute("GET", "key") == "value"


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_redis_that_is_down_fails_fast_and_is_found_again_when_it_is_back(tmp_path, long_backoff,
                                                                                   kind):
    with redis_server(tmp_path) as redis:
        port = redis.port
        connection = CLIENTS[kind](redis.url(), DEADLINE).get()
        assert await connection.execute("PING") == "PONG"
        redis.stop()
        with pytest.raises(RedisUnavailable):
            await connection.execute("PING")
        with pytest.raises(RedisUnavailable):
            await connection.execute("PING")  # reconnecting, refused, or backing off: never a hang
    # A Redis on the same port again (a restart): the client finds it by itself.
    with redis_server(tmp_path, port):
        await answers_again(connection)


async def test_the_fast_client_sets_tcp_keepalive(tmp_path):
    with redis_server(tmp_path) as redis:
        connection = RedisClients(redis.url(), DEADLINE).get()
        assert await connection.execute("PING") == "PONG"
        sock = connection._protocol.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            for option, value in ((socket.TCP_KEEPIDLE, redis_client.KEEPALIVE_IDLE),
                                  (socket.TCP_KEEPINTVL, redis_client.KEEPALIVE_INTERVAL),
                                  (socket.TCP_KEEPCNT, redis_client.KEEPALIVE_COUNT)):
                assert sock.getsockopt(socket.IPPROTO_TCP, option) == value
        connection.close()


@pytest.mark.parametrize("kind", CLIENTS)
async def test_both_clients_answer_alike(tmp_path, kind):
    """Scripts (sent in full when Redis does not know them), pipelines, error replies, nil."""
    with redis_server(tmp_path) as redis:
        connection = CLIENTS[kind](redis.url(3), DEADLINE).get()
        script = Script("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")
        assert await connection.run_script(script, ["counter"], ["x"]) == ["counter", "x", 1]
        assert await connection.run_script(script, ["counter"], ["y"]) == ["counter", "y", 2]
        assert await connection.pipeline(("INCR", "counter"), ("GET", "missing")) == [3, None]
        assert await connection.execute("ZADD", "set", 1, "one") == 1
        assert await connection.execute("ZRANGEBYSCORE", "set", "-inf", "+inf") == ["one"]
        with pytest.raises(RedisError, match="unknown command"):
            await connection.execute("NO-SUCH-COMMAND")
        with redis.client(3) as direct:
            assert direct.get("counter") == "3"  # the database of the URL


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_connection_busy_for_longer_than_the_deadline_is_not_dropped(tmp_path, kind):
    """The deadline is per command: a connection answering steadily for many deadlines in a row
    (each command in time) keeps serving, with no failure and no reconnection."""
    with redis_server(tmp_path) as redis, pausable_proxy(redis.port) as proxy:
        connection = CLIENTS[kind](proxy.url, DEADLINE).get()
        loop = asyncio.get_running_loop()
        until = loop.time() + 4 * DEADLINE

        async def steadily(worker: int) -> int:
            done = 0
            while loop.time() < until:
                assert await connection.execute("INCR", f"worker:{worker}") == done + 1
                done += 1
            return done

        counts = await asyncio.gather(*(steadily(worker) for worker in range(8)))
        assert all(count > 0 for count in counts)
        # One pipelined connection; redis-py's pool opens one per concurrent command at most.
        assert proxy.connections == 1 if kind == "fast" else proxy.connections <= 8


async def test_a_refused_password_is_an_error_reply_not_an_outage(tmp_path):
    with redis_server(tmp_path) as redis:
        connection = RedisClients(f"redis://:wrong@127.0.0.1:{redis.port}/0", DEADLINE).get()
        with pytest.raises(RedisError, match="AUTH"):
            await connection.execute("PING")
