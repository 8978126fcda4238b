"""The fast client (:mod:`.redis_client`) on a Sentinel-managed primary: a ``redis+sentinel://``
URL (:mod:`mcp_server.redis_sentinel`).

Each new connection asks the sentinels, in turn, where the primary is (``SENTINEL
GET-MASTER-ADDR-BY-NAME``), connects there and checks with ``ROLE`` that it is a primary (a
sentinel may still name one that a failover is demoting). So after a failover the next connection
finds the promoted replica:

- the primary died: its connection is lost, and the reconnection (with the client's backoff, up
  to :data:`.redis_client.BACKOFF_CAP`) asks the sentinels until they name the new one;
- the primary was demoted while the connection stayed open: its first write is refused with
  ``READONLY`` (or ``NOREPLICAS``, a primary with ``min-replicas-to-write`` cut off from its
  replicas); the connection is dropped then, and the next command reconnects the same way.

Meanwhile requests get :class:`.redis_client.RedisUnavailable` (503 with ``Retry-After``), as for
any Redis that does not answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..redis_sentinel import parse
from .redis_client import (
    DEFAULT_COMMAND_TIMEOUT,
    RedisClients,
    RedisConnection,
    RedisError,
    RedisUnavailable,
    _auth,
    _encode,
    _Protocol,
    _set_up,
)

# Error replies of a server that is no longer the primary to write to.
DEMOTED = ("READONLY", "NOREPLICAS")


class SentinelConnection(RedisConnection):
    """One connection to the primary the sentinels of ``url`` name; bound to one event loop."""

    def __init__(self, url: str, command_timeout: float = DEFAULT_COMMAND_TIMEOUT):
        super().__init__(url, command_timeout)
        self.sentinel = parse(url)
        # Asked in this order; the one that answered moves first (as redis-py does).
        self.sentinels = list(self.sentinel.sentinels)

    async def _connect(self) -> _Protocol:
        host, port = await self._ask_sentinels()
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(loop.create_connection(
                lambda: _Protocol(self.command_timeout, self._lost), host, port), self.command_timeout)
        except (OSError, TimeoutError) as exc:
            # The sentinels still name a primary that died, until they agree it did and promote.
            raise RedisUnavailable(f"{host}:{port}, the primary of {self.sentinel.service_name!r} as "
                                   f"the sentinels name it, does not answer: {exc or 'timed out'}") from exc
        role = await _set_up(protocol, _auth(self.sentinel.username, self.sentinel.password),
                             self.sentinel.db, ("ROLE",))
        if not role or role[0] != "master":
            protocol.on_lost = None  # refused, not a connection that worked: keep backing off
            protocol.transport.close()
            raise RedisUnavailable(f"the sentinels name {host}:{port} as the primary of "
                                   f"{self.sentinel.service_name!r}, but it is a "
                                   f"{role[0] if role else 'server of unknown role'} "
                                   "(a failover is under way)")
        return protocol

    async def _ask_sentinels(self) -> tuple[str, int]:
        """The primary's address, from the first sentinel that knows it. The sentinels share one
        command deadline: a sentinel that hangs leaves the others their part of it."""
        errors = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.command_timeout
        for index, (host, port) in enumerate(list(self.sentinels)):
            share = max(0.001, (deadline - loop.time()) / (len(self.sentinels) - index))
            try:
                address = await asyncio.wait_for(self._ask_sentinel(host, port), share)
            except (OSError, TimeoutError, RedisError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            if address:
                if index:
                    self.sentinels.insert(0, self.sentinels.pop(index))
                return address[0], int(address[1])
            errors.append(f"{host}:{port} does not know {self.sentinel.service_name!r}")
        raise RedisUnavailable(f"no sentinel named the primary of {self.sentinel.service_name!r} "
                               f"({'; '.join(errors)})")

    async def _ask_sentinel(self, host: str, port: int) -> Any:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(_Protocol, host, port)
        try:
            commands = [*_auth(self.sentinel.sentinel_username, self.sentinel.sentinel_password),
                        ("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.sentinel.service_name)]
            futures = protocol.send(b"".join(_encode(command) for command in commands), len(commands))
            replies = await asyncio.gather(*futures, return_exceptions=True)
        finally:
            transport.close()
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        return replies[-1]

    def _failed_reply(self, protocol: _Protocol, error: RedisError) -> Exception:
        """``READONLY`` (the server became a replica: a failover) or ``NOREPLICAS`` (a primary cut
        off from its replicas, with ``min-replicas-to-write``, perhaps replaced already): drop the
        connection, so that the next command asks the sentinels for the primary."""
        if not str(error).startswith(DEMOTED):
            return error
        if protocol is self._protocol:
            self._protocol = None
        if protocol.transport is not None:
            protocol.transport.close()
        return RedisUnavailable(f"the primary of {self.sentinel.service_name!r} refuses writes (a "
                                f"failover?): {error}")


class SentinelRedisClients(RedisClients):
    """One :class:`SentinelConnection` per event loop."""

    connection_class = SentinelConnection

    def __init__(self, url: str, command_timeout: float = DEFAULT_COMMAND_TIMEOUT):
        parse(url)  # a wrong URL is refused when the stores are built, not at the first request
        super().__init__(url, command_timeout)
