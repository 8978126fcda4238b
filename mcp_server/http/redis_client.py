"""A small Redis client for the transport's hot path: one connection per event loop, every command
pipelined on it.

The endpoint sends two or three small commands per request (read a session, claim and release a
request id, store an event). redis-py's asyncio client takes a connection from its pool, writes,
waits and hands the connection back for each one: about 75 µs of CPU per command under load on
the benchmark machine (bench/), more than the rest of a stateless ``tools/call``. Here commands of
every concurrent request share one connection and are answered in order (Redis answers a
connection's commands in the order they came), which costs about 18 µs per command.

It speaks RESP2, decodes replies as UTF-8 text, and understands ``redis://``, ``rediss://`` and
``unix://`` URLs with a user name, password and database number, as redis-py does. Commands in
flight when the connection drops fail with :class:`ConnectionError`; the next command reconnects.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import ssl
import weakref
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONNECT_TIMEOUT = 10.0


class RedisError(Exception):
    """An error reply of the server (``-ERR ...``)."""


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.buffer = bytearray()
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionError("the Redis connection was closed")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError(f"the Redis connection was lost: {self.lost}"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.waiting:
            parsed = _parse(self.buffer, 0)
            if parsed is None:
                return  # a reply not complete yet
            value, end = parsed
            del self.buffer[:end]
            future = self.waiting.popleft()
            if future.done():
                continue  # its caller was cancelled
            if isinstance(value, RedisError):
                future.set_exception(value)
            else:
                future.set_result(value)

    def send(self, payload: bytes, count: int) -> list[asyncio.Future]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(count)]
        self.waiting.extend(futures)
        self.transport.write(payload)
        return futures


def _parse(buffer: bytearray, start: int) -> tuple[Any, int] | None:
    """One reply from ``buffer`` at ``start``: ``(value, end)``, or None when incomplete."""
    end = buffer.find(b"\r\n", start)
    if end < 0:
        return None
    kind = buffer[start]
    line = buffer[start + 1:end]
    position = end + 2
    if kind == 43:  # + simple string
        return line.decode(), position
    if kind == 45:  # - error
        return RedisError(line.decode()), position
    if kind == 58:  # : integer
        return int(line), position
    if kind == 36:  # $ bulk string
        size = int(line)
        if size < 0:
            return None, position
        if len(buffer) < position + size + 2:
            return None
        return buffer[position:position + size].decode(), position + size + 2
    if kind == 42:  # * array
        size = int(line)
        if size < 0:
            return None, position
        items = []
        for _ in range(size):
            parsed = _parse(buffer, position)
            if parsed is None:
                return None
            items.append(parsed[0])
            position = parsed[1]
        return items, position
    raise RedisError(f"unexpected reply from Redis: {bytes(buffer[start:end])!r}")


def _encode(args: tuple[Any, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int | float):
            arg = str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class RedisConnection:
    """One connection to the Redis of ``url``; bound to the event loop that first uses it."""

    def __init__(self, url: str):
        self.url = url
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and protocol.lost is None:
            return protocol
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._protocol is None or self._protocol.lost is not None:
                self._protocol = await asyncio.wait_for(self._connect(), CONNECT_TIMEOUT)
            return self._protocol

    async def _connect(self) -> _Protocol:
        parts = urlsplit(self.url)
        loop = asyncio.get_running_loop()
        query = parse_qs(parts.query)
        if parts.scheme == "unix":
            _, protocol = await loop.create_unix_connection(_Protocol, unquote(parts.path))
            db = query.get("db", ["0"])[0]
        elif parts.scheme in ("redis", "rediss"):
            context = ssl.create_default_context() if parts.scheme == "rediss" else None
            _, protocol = await loop.create_connection(
                _Protocol, parts.hostname or "localhost", parts.port or 6379, ssl=context)
            db = (parts.path or "/").lstrip("/") or query.get("db", ["0"])[0]
        else:
            raise ValueError(f"unsupported Redis URL scheme {parts.scheme!r} in {self.url!r}")
        setup: list[tuple[Any, ...]] = []
        if parts.password is not None:
            setup.append(("AUTH", unquote(parts.username), unquote(parts.password)) if parts.username
                         else ("AUTH", unquote(parts.password)))
        if db and db != "0":
            setup.append(("SELECT", int(db)))
        if setup:
            futures = protocol.send(b"".join(_encode(command) for command in setup), len(setup))
            for future in futures:
                await future
        return protocol

    async def execute(self, *args: Any) -> Any:
        protocol = await self._connected()
        (future,) = protocol.send(_encode(args), 1)
        return await future

    async def pipeline(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Several commands in one write; their replies in order (the first error is raised)."""
        protocol = await self._connected()
        futures = protocol.send(b"".join(_encode(command) for command in commands), len(commands))
        results = []
        for future in futures:
            results.append(await future)
        return results

    async def run_script(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.execute("EVAL", script.source, len(keys), *keys, *args)

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


class Script:
    """A Lua script run by its SHA1 (sent in full once per server, when Redis does not know it)."""

    def __init__(self, source: str):
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class RedisClients:
    """One :class:`RedisConnection` per event loop (a connection belongs to one loop)."""

    def __init__(self, url: str):
        self.url = url
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisConnection] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> RedisConnection:
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None:
            connection = self._connections[loop] = RedisConnection(self.url)
        return connection
