"""The stores' Redis connections through redis-py, for what the fast client (:mod:`.redis_client`)
does not do: client certificates and other TLS options, any option of ``redis.asyncio.Redis``
(on a ``redis+sentinel://`` URL too).

It gives the same interface as :class:`.redis_client.RedisClients` (``get()`` returns a connection
with ``execute``, ``pipeline`` and ``run_script``), so :class:`.shared_state.RedisState` and
:class:`.event_store.RedisEventStore` take it as their ``clients`` unchanged. It keeps the fast
client's guarantees: every command has a deadline, failures raise
:class:`.redis_client.RedisUnavailable`, reconnection backs off with jitter. It costs more CPU per
command (redis-py takes a connection from its pool for each one).
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Callable
from typing import Any

from ..redis_sentinel import SentinelURL, is_sentinel_url
from ..redis_sentinel import parse as parse_sentinel_url
from .redis_client import (
    DEFAULT_COMMAND_TIMEOUT,
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE,
    KEEPALIVE_INTERVAL,
    ReconnectGate,
    RedisError,
    RedisUnavailable,
    ScriptRunner,
)


def default_options(command_timeout: float) -> dict[str, Any]:
    """What ``redis.asyncio.Redis.from_url`` gets unless ``REDIS_OPTIONS`` says otherwise."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    keepalive = {getattr(socket, name): value for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT)) if hasattr(socket, name)}
    return {
        "socket_timeout": command_timeout, "socket_connect_timeout": command_timeout,
        "socket_keepalive": True, "socket_keepalive_options": keepalive,
        # One immediate retry replaces a pooled connection that Redis closed; waiting between
        # attempts is the gate's work (ReconnectGate), shared by every command.
        "retry": Retry(NoBackoff(), 1),
    }


class RedisPyConnection(ScriptRunner):
    """A ``redis.asyncio.Redis`` client behind the stores' connection interface."""

    def __init__(self, client: Any, command_timeout: float = DEFAULT_COMMAND_TIMEOUT):
        # Replies as Redis sends them ("OK", "PONG", lists), as the fast client gives them, not
        # as redis-py's per-command callbacks reshape them (True, dicts): the stores read both.
        client.response_callbacks.clear()
        self.client = client
        self.command_timeout = command_timeout
        self._gate = ReconnectGate()

    async def execute(self, *args: Any) -> Any:
        return await self._bounded(self.client.execute_command(*args))

    async def pipeline(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Several commands in one round trip; their replies in order (the first error is raised)."""
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return await self._bounded(pipe.execute())

    async def _bounded(self, call: Any) -> Any:
        import redis.exceptions

        try:
            self._gate.check()
        except RedisUnavailable:
            call.close()  # never awaited
            raise
        try:
            async with asyncio.timeout(self.command_timeout):
                reply = await call
        except TimeoutError as exc:
            message = f"Redis did not answer within {self.command_timeout:g} s"
            self._gate.failed(message)
            raise RedisUnavailable(message) from exc
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            message = f"the Redis connection failed: {exc}"
            self._gate.failed(message)
            raise RedisUnavailable(message) from exc
        except redis.exceptions.NoScriptError as exc:
            raise RedisError(f"NOSCRIPT {exc}") from exc  # the prefix redis-py took off
        except redis.exceptions.ResponseError as exc:
            raise RedisError(str(exc)) from exc
        if self._gate.backoff.failures:
            self._gate.recovered()
        return _text(reply)

    async def close(self) -> None:
        await self.client.aclose()


def _text(reply: Any) -> Any:
    """Replies as the fast client gives them: text rather than bytes (a client made by a factory
    may not decode)."""
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, list):
        return [_text(item) for item in reply]
    return reply


def _sentinel_client(sentinel: SentinelURL, options: dict[str, Any], command_timeout: float) -> Any:
    """The primary's client through redis-py's Sentinel support, which asks the sentinels again
    whenever it connects, and drops a connection whose server answers READONLY (demoted)."""
    from redis.asyncio.sentinel import Sentinel

    sentinel_options = {"socket_timeout": command_timeout, "socket_connect_timeout": command_timeout,
                        **sentinel.sentinel_credentials()}
    manager = Sentinel(sentinel.sentinels, sentinel_kwargs=sentinel_options)
    return manager.master_for(sentinel.service_name, db=sentinel.db,
                              **{**sentinel.data_credentials(), **options})


class RedisPyClients:
    """One redis-py client per event loop (its connections belong to one loop).

    The client is ``factory(url)`` when a factory is given (``REDIS_CLIENT_FACTORY``), else
    ``redis.asyncio.Redis.from_url(url, **options)`` over :func:`default_options`, or for a
    ``redis+sentinel://`` URL the primary's client of redis-py's ``Sentinel`` with those options.
    """

    def __init__(self, url: str, command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
                 options: dict[str, Any] | None = None, factory: Callable[[str], Any] | None = None):
        self.url = url
        self.command_timeout = command_timeout
        self.options = dict(options or {})
        self.factory = factory
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisPyConnection] = (
            weakref.WeakKeyDictionary()
        )

    def make_client(self) -> Any:
        if self.factory is not None:
            return self.factory(self.url)
        import redis.asyncio

        # RESP2, whose replies the stores read (redis-py 8 speaks RESP3 by default, which shapes
        # some replies differently: ZRANGEBYSCORE ... WITHSCORES as pairs).
        options = {**default_options(self.command_timeout), **self.options, "decode_responses": True,
                   "protocol": 2}
        if is_sentinel_url(self.url):
            return _sentinel_client(parse_sentinel_url(self.url), options, self.command_timeout)
        return redis.asyncio.Redis.from_url(self.url, **options)

    def get(self) -> RedisPyConnection:
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None:
            connection = self._connections[loop] = RedisPyConnection(self.make_client(),
                                                                     self.command_timeout)
        return connection
