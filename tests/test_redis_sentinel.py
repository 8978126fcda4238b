"""Redis Sentinel: the ``redis+sentinel://`` URL, what each Redis user of a deployment makes of it,
and the stores' two clients following the primary through failovers (a primary demoted while its
connections stay open, and one killed), on a primary, a replica and three sentinels of the test's
own. The whole deployment through a failover: test_redis_sentinel_failover.py.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_server import site
from mcp_server.http.redis_client import RedisClients, RedisUnavailable
from mcp_server.http.redis_sentinel_client import SentinelRedisClients
from mcp_server.http.redispy_client import RedisPyClients
from mcp_server.redis_sentinel import (
    SentinelURL,
    cache_backend,
    celery_broker,
    channel_layer_host,
    parse,
)

from .redis_faults import SERVICE_NAME, pausable_proxy, sentinel_group
from .waiting import PATIENCE, wait_until

URL = "redis+sentinel://s1:26380,s2,[::1]:26381/mymaster/3"
CLIENTS = {"fast": SentinelRedisClients, "redis-py": RedisPyClients}


def test_a_sentinel_url_names_its_sentinels_service_database_and_credentials():
    assert parse(URL) == SentinelURL(sentinels=[("s1", 26380), ("s2", 26379), ("::1", 26381)],
                                     service_name="mymaster", db=3)
    full = parse("redis+sentinel://app:p%40ss@s1:26379/cache?sentinel_password=s3cret&sentinel_username=watch")
    assert (full.db, full.username, full.password) == (0, "app", "p@ss")
    assert full.sentinel_credentials() == {"username": "watch", "password": "s3cret"}
    assert full.data_credentials() == {"username": "app", "password": "p@ss"}
    # A password alone, as redis:// URLs write it.
    assert parse("redis+sentinel://:secret@s1/m").data_credentials() == {"password": "secret"}
    assert parse("redis+sentinel://secret@s1/m").data_credentials() == {"password": "secret"}


@pytest.mark.parametrize(("url", "message"), [
    ("redis://h:6379/0", "not a redis+sentinel:// URL"),
    ("redis+sentinel:///mymaster", "names no sentinel"),
    ("redis+sentinel://s1:26379", "needs the service name"),
    ("redis+sentinel://s1:26379/m/0/extra", "needs the service name"),
    ("redis+sentinel://s1:26379/m/zero", "is a number, not 'zero'"),
    ("redis+sentinel://s1:port/m", "not a sentinel host:port: 's1:port'"),
    ("redis+sentinel://s1/m?ssl=true", "unknown redis+sentinel:// URL options: ssl"),
    ("rediss+sentinel://s1/m", "rediss+sentinel:// is not supported: for TLS .*REDIS_CLIENT_FACTORY"),
])
def test_a_wrong_sentinel_url_is_refused_saying_what_is_wrong(url, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        parse(url)


def test_a_wrong_url_in_an_error_message_hides_its_password():
    with pytest.raises(ValueError) as caught:
        parse("redis+sentinel://user:hunter2@s1:26379")
    assert "hunter2" not in str(caught.value)


def test_the_channel_layer_cache_and_broker_settings_a_url_makes():
    plain = "redis://127.0.0.1:6379/2"
    assert channel_layer_host(plain, socket_timeout=15) == {"address": plain, "socket_timeout": 15}
    assert cache_backend(plain) == {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                    "LOCATION": plain}
    assert celery_broker(plain) == (plain, {})

    url = "redis+sentinel://:pw@s1:26380,s2/mymaster/1?sentinel_password=sp"
    assert channel_layer_host(url, socket_timeout=15) == {
        "sentinels": [("s1", 26380), ("s2", 26379)], "master_name": "mymaster", "db": 1,
        "password": "pw", "socket_timeout": 15, "sentinel_kwargs": {"password": "sp"}}
    # A list: Django would split a string at its commas.
    assert cache_backend(url) == {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": [url],
                                  "OPTIONS": {"pool_class": "mcp_server.redis_sentinel.SentinelCachePool"}}
    # kombu's Sentinel transport: one sentinel:// URL per sentinel, each with the database.
    assert celery_broker(url) == ("sentinel://:pw@s1:26380/1;sentinel://:pw@s2:26379/1",
                                  {"master_name": "mymaster", "sentinel_kwargs": {"password": "sp"}})


def test_the_stores_take_a_sentinel_url_with_either_client():
    with override_settings(MCP_SERVER={"REDIS_URL": URL}):
        clients = site.build_redis_clients()
        assert type(clients) is SentinelRedisClients and clients.url == URL
    with override_settings(MCP_SERVER={"REDIS_URL": URL, "REDIS_OPTIONS": {"health_check_interval": 30}}):
        assert type(site.build_redis_clients()) is RedisPyClients
    with override_settings(MCP_SERVER={"REDIS_URL": "redis://127.0.0.1:6379/0"}):
        assert type(site.build_redis_clients()) is RedisClients
    with override_settings(MCP_SERVER={"REDIS_URL": "redis+sentinel://s1:26379"}), \
            pytest.raises(ImproperlyConfigured, match=r"REDIS_URL.*needs the service name"):
        site.build_stores()
    with override_settings(MCP_SERVER={"REDIS_URL": "rediss+sentinel://s1/m", "REDIS_OPTIONS": {}}), \
            pytest.raises(ImproperlyConfigured, match=r"REDIS_URL.*rediss\+sentinel:// is not supported"):
        site.build_stores()


async def write_read(connection, key: str, value: str, timeout: float = PATIENCE) -> None:
    """Write ``key`` until it succeeds (the client finds the primary by itself, through the
    sentinels), then read it back; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await connection.execute("SET", key, value)
            break
        except RedisUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    assert await connection.execute("GET", key) == value


@pytest.mark.parametrize("kind", CLIENTS)
async def test_each_client_follows_the_primary_through_a_demotion_and_a_kill(tmp_path, kind):
    with sentinel_group(tmp_path, down_after_ms=1000, failover_timeout_ms=2000) as group:
        # The first sentinel is gone: the others are asked.
        group.sentinels[0].kill()
        group.sentinels[0].wait(PATIENCE)
        clients = CLIENTS[kind](group.url(2), 1.0)
        connection = clients.get()
        await write_read(connection, "k", "on the primary")
        with group.primary.client(2) as primary:
            assert primary.get("k") == "on the primary"

        # A failover the sentinels are told to make: the primary becomes a replica (once they
        # reconfigure it) while the client's connection to it stays open; its next write is
        # refused with READONLY, and the client asks the sentinels again.
        with group.sentinel_client(1) as sentinel:
            sentinel.sentinel_failover(SERVICE_NAME)
        await asyncio.to_thread(wait_until, lambda: group.primary_port() == group.replica.port, PATIENCE,
                                "the replica to be promoted")
        await asyncio.to_thread(wait_until, lambda: role(group.primary) == "slave", PATIENCE,
                                "the old primary to be made a replica")
        await write_read(connection, "k", "on the promoted replica")
        with group.replica.client(2) as promoted:
            assert promoted.get("k") == "on the promoted replica"

        # The new primary is killed: the old one, its replica now, is promoted back.
        group.replica.process.send_signal(signal.SIGKILL)
        group.replica.process.wait(PATIENCE)
        await asyncio.to_thread(wait_until, lambda: group.primary_port() == group.primary.port, PATIENCE,
                                "the first primary to be promoted back")
        await write_read(connection, "k", "back on the first")
        with group.primary.client(2) as primary:
            assert primary.get("k") == "back on the first"
        assert connection is clients.get()  # the same connection object throughout


async def test_a_sentinel_that_hangs_is_passed_over_and_the_one_that_answered_is_asked_first(tmp_path):
    with sentinel_group(tmp_path) as group, pausable_proxy(group.sentinel_ports[0]) as hung:
        hung.pause()
        # The hung sentinel first: past its share of the command deadline, the next is asked.
        others = ",".join(f"127.0.0.1:{port}" for port in group.sentinel_ports[1:])
        url = f"redis+sentinel://127.0.0.1:{hung.port},{others}/{SERVICE_NAME}/0"
        connection = SentinelRedisClients(url, 1.0).get()
        assert await connection.execute("PING") == "PONG"
        assert hung.connections == 1
        # The sentinel that answered is asked first from now on.
        assert connection.sentinels[0] == ("127.0.0.1", group.sentinel_ports[1])


def role(server) -> str:
    with server.client() as client:
        return client.execute_command("ROLE")[0]


def test_django_s_redis_cache_reaches_the_primary_through_the_sentinels(tmp_path):
    with sentinel_group(tmp_path) as group:
        backend = cache_backend(group.url(4))
        cache = RedisCache(backend["LOCATION"], backend)
        cache.set("greeting", "hello", 60)
        assert cache.get("greeting") == "hello"
        with group.primary.client(4) as primary:
            assert primary.exists(":1:greeting")
