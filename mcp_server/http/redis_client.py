"""A small Redis client for the transport's hot path: one connection per event loop, every command
pipelined on it.

The endpoint sends two or three small commands per request (read a session, claim a request id,
store its response and release the id in one script). redis-py's asyncio client takes a
connection from its pool, writes, waits and hands the connection back for each one: about 75 µs
of CPU per command under load on the benchmark machine (bench/), more than the rest of a
stateless ``tools/call``. Here commands of every concurrent request share one connection and are
answered in order (Redis answers a connection's commands in the order they came), which costs
about 18 µs per command.

It speaks RESP2, decodes replies as UTF-8 text, and understands ``redis://``, ``rediss://`` and
``unix://`` URLs with a user name, password and database number, as redis-py does, and
``redis+sentinel://`` URLs through :mod:`.redis_sentinel_client`.

When Redis does not answer, nothing waits for long: every command has a deadline
(``command_timeout``); past it the connection is dropped (the replies still due on it could no
longer be matched to their commands) and every command waiting on it fails with
:class:`RedisUnavailable`. After a failure the next connection is tried only after a delay that
doubles with each failure in a row, with jitter, up to :data:`BACKOFF_CAP`; meanwhile commands fail
at once. The first reply on a new connection ends the backoff. TCP keepalive finds a peer that
vanished without closing the connection while nothing is asked of it.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import random
import socket
import ssl
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# Seconds a command (or a connection attempt) may take before Redis counts as not answering.
DEFAULT_COMMAND_TIMEOUT = 5.0
# Reconnection delays: the first after a failure, and the most they grow to.
BACKOFF_BASE = 0.05
BACKOFF_CAP = 5.0
# TCP keepalive: probe after this many idle seconds, then every KEEPALIVE_INTERVAL, and give up
# after KEEPALIVE_COUNT unanswered probes.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 30, 10, 3


class RedisError(Exception):
    """An error reply of the server (``-ERR ...``)."""


class RedisUnavailable(ConnectionError):
    """Redis did not answer in time, or cannot be reached (the endpoint answers 503)."""

    def __init__(self, message: str, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after


class Backoff:
    """Exponential delays with jitter between attempts at something that keeps failing."""

    def __init__(self, base: float | None = None, cap: float | None = None):
        self.base = BACKOFF_BASE if base is None else base
        self.cap = BACKOFF_CAP if cap is None else cap
        self.failures = 0

    def next_delay(self) -> float:
        """The delay before the next attempt, after one more failure: half of the exponential
        step plus a random part of the other half, so processes that lost Redis together do
        not all come back at the same instant."""
        step = min(self.cap, self.base * 2 ** min(self.failures, 32))
        self.failures += 1
        return step / 2 + random.uniform(0, step / 2)

    def reset(self) -> None:
        self.failures = 0


class ReconnectGate:
    """Whether a new connection to Redis may be tried now: not while backing off from failures."""

    def __init__(self) -> None:
        self.backoff = Backoff()
        self.retry_at = 0.0  # monotonic time before which no attempt is made
        self.last_error = ""

    def check(self) -> None:
        """Raise :class:`RedisUnavailable` at once while backing off."""
        wait = self.retry_at - time.monotonic()
        if wait > 0:
            raise RedisUnavailable(f"Redis is unavailable ({self.last_error}); next attempt in "
                                   f"{wait:.1f} s", retry_after=wait)

    def failed(self, reason: str) -> None:
        self.last_error = reason
        self.retry_at = time.monotonic() + self.backoff.next_delay()

    def recovered(self) -> None:
        """Redis answered: the next failure is retried at once."""
        self.backoff.reset()
        self.retry_at = 0.0


def set_keepalive(sock: socket.socket | None) -> None:
    """TCP keepalive with the probe timings the platform lets us set."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


class _Protocol(asyncio.Protocol):
    def __init__(self, command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
                 on_lost: Callable[[_Protocol], None] | None = None) -> None:
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.buffer = bytearray()
        self.lost: BaseException | None = None
        self.answered = False  # a reply came on this connection
        self.command_timeout = command_timeout
        # (deadline, last future) of each write still unanswered, oldest first, and the one timer
        # that watches the oldest (a timer per command would cost more than the command).
        self.batches: collections.deque[tuple[float, asyncio.Future]] = collections.deque()
        self._watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        set_keepalive(transport.get_extra_info("socket"))

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fail(RedisUnavailable(f"the Redis connection was lost: {exc or 'closed by Redis'}"))

    def _fail(self, error: RedisUnavailable) -> None:
        if self.lost is None:
            self.lost = error
            if self.on_lost is not None:
                self.on_lost(self)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self.batches.clear()
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)

    def _watch(self) -> None:
        """Fail the connection if its oldest unanswered write is past its deadline, else look
        again at that deadline."""
        self._watchdog = None
        if self.lost is not None or not self.batches:
            return
        loop = asyncio.get_running_loop()
        deadline = self.batches[0][0]
        if loop.time() < deadline:
            self._watchdog = loop.call_at(deadline, self._watch)
            return
        # Replies still due on this connection can no longer be matched: drop it.
        self._fail(RedisUnavailable(f"Redis did not answer within {self.command_timeout:g} s"))
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.answered = True
        while self.waiting:
            parsed = _parse(self.buffer, 0)
            if parsed is None:
                return  # a reply not complete yet
            value, end = parsed
            del self.buffer[:end]
            future = self.waiting.popleft()
            if self.batches and self.batches[0][1] is future:
                self.batches.popleft()  # the last reply of that write
            if future.done():
                continue  # its caller was cancelled
            if isinstance(value, RedisError):
                future.set_exception(value)
            else:
                future.set_result(value)

    def send(self, payload: bytes, count: int) -> list[asyncio.Future]:
        if self.lost is not None:
            raise RedisUnavailable(str(self.lost))
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(count)]
        self.waiting.extend(futures)
        self.transport.write(payload)
        # Replies come in order: when the last one of this write is in, so are the others.
        self.batches.append((loop.time() + self.command_timeout, futures[-1]))
        if self._watchdog is None:
            self._watchdog = loop.call_at(self.batches[0][0], self._watch)
        return futures

    def send_one(self, payload: bytes) -> asyncio.Future:
        """:meth:`send` of one command (the usual case, without the lists)."""
        if self.lost is not None:
            raise RedisUnavailable(str(self.lost))
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.waiting.append(future)
        self.transport.write(payload)
        deadline = loop.time() + self.command_timeout
        self.batches.append((deadline, future))
        if self._watchdog is None:
            self._watchdog = loop.call_at(deadline, self._watch)
        return future


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
    # The usual command (ASCII text and numbers: keys, ids, JSON escaped to ASCII) is framed as
    # text and encoded once; anything else (other text, bytes) goes through the general path.
    parts = [f"*{len(args)}\r\n"]
    for arg in args:
        kind = arg.__class__
        if kind is int or kind is float:
            arg = str(arg)
        elif kind is not str or not arg.isascii():
            return _encode_bytes(args)
        parts.append(f"${len(arg)}\r\n{arg}\r\n")
    return "".join(parts).encode()


def _encode_bytes(args: tuple[Any, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, (int, float)):
            arg = str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class ScriptRunner:
    """``run_script`` over ``execute``, for every connection type that speaks to Redis."""

    async def execute(self, *args: Any) -> Any:
        raise NotImplementedError

    async def run_script(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.execute("EVAL", script.source, len(keys), *keys, *args)


class RedisConnection(ScriptRunner):
    """One connection to the Redis of ``url``; bound to the event loop that first uses it."""

    def __init__(self, url: str, command_timeout: float = DEFAULT_COMMAND_TIMEOUT):
        self.url = url
        self.command_timeout = command_timeout
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None
        self._gate = ReconnectGate()

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and protocol.lost is None:
            return protocol
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            protocol = self._protocol
            if protocol is not None and protocol.lost is None:
                return protocol
            self._protocol = None
            self._gate.check()
            try:
                self._protocol = await self._connect()
            except (OSError, TimeoutError) as exc:
                reason = f"cannot connect to Redis: {exc or 'timed out'}"
                self._gate.failed(reason)
                raise RedisUnavailable(reason) from exc
            return self._protocol

    def _lost(self, protocol: _Protocol) -> None:
        """A connection failed (once per connection): back off before the next one, unless it
        worked until now (Redis restarted, say), when the first new attempt comes at once."""
        if protocol.answered:
            self._gate.recovered()
        else:
            self._gate.failed(str(protocol.lost))

    async def _connect(self) -> _Protocol:
        parts = urlsplit(self.url)
        loop = asyncio.get_running_loop()
        query = parse_qs(parts.query)

        def factory() -> _Protocol:
            return _Protocol(self.command_timeout, self._lost)

        if parts.scheme == "unix":
            _, protocol = await asyncio.wait_for(
                loop.create_unix_connection(factory, unquote(parts.path)), self.command_timeout)
            db = query.get("db", ["0"])[0]
        elif parts.scheme in ("redis", "rediss"):
            context = ssl.create_default_context() if parts.scheme == "rediss" else None
            _, protocol = await asyncio.wait_for(loop.create_connection(
                factory, parts.hostname or "localhost", parts.port or 6379, ssl=context),
                self.command_timeout)
            db = (parts.path or "/").lstrip("/") or query.get("db", ["0"])[0]
        else:
            raise ValueError(f"unsupported Redis URL scheme {parts.scheme!r} in {self.url!r}")
        password = unquote(parts.password) if parts.password is not None else None
        await _set_up(protocol, _auth(unquote(parts.username or "") or None, password), db)
        return protocol

    async def execute(self, *args: Any) -> Any:
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            protocol = await self._connected()
        future = protocol.send_one(_encode(args))
        try:
            return await future
        except RedisError as exc:
            raise self._failed_reply(protocol, exc) from exc

    async def run_script(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        # As ScriptRunner's, on the connection itself: one coroutine less per script.
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            protocol = await self._connected()
        future = protocol.send_one(_encode(("EVALSHA", script.sha, len(keys), *keys, *args)))
        try:
            return await future
        except RedisError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise self._failed_reply(protocol, exc) from exc
        return await self.execute("EVAL", script.source, len(keys), *keys, *args)

    async def pipeline(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Several commands in one write; their replies in order (the first error is raised)."""
        protocol = await self._connected()
        futures = protocol.send(b"".join(_encode(command) for command in commands), len(commands))
        results = []
        try:
            for future in futures:
                results.append(await future)
        except RedisError as exc:
            raise self._failed_reply(protocol, exc) from exc
        return results

    def _failed_reply(self, protocol: _Protocol, error: RedisError) -> Exception:
        """What an error reply raises (a subclass may see a connection to drop in it)."""
        return error

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


def _auth(username: str | None, password: str | None) -> list[tuple[Any, ...]]:
    if password is None:
        return []
    return [("AUTH", username, password) if username else ("AUTH", password)]


async def _set_up(protocol: _Protocol, auth: list[tuple[Any, ...]], db: Any,
                  *more: tuple[Any, ...]) -> Any:
    """Send what a new connection needs first (credentials, the database, ``more``) in one
    write; the reply of the last command."""
    setup = [*auth]
    if db and str(db) != "0":
        setup.append(("SELECT", int(db)))
    setup.extend(more)
    if not setup:
        return None
    futures = protocol.send(b"".join(_encode(command) for command in setup), len(setup))
    try:
        return [await future for future in futures][-1]
    except RedisError:
        protocol.transport.close()  # a wrong password, say: not a connection to keep
        raise


class Script:
    """A Lua script run by its SHA1 (sent in full once per server, when Redis does not know it)."""

    def __init__(self, source: str):
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


class RedisClients:
    """One :class:`RedisConnection` per event loop (a connection belongs to one loop)."""

    connection_class: type[RedisConnection] = RedisConnection

    def __init__(self, url: str, command_timeout: float = DEFAULT_COMMAND_TIMEOUT):
        self.url = url
        self.command_timeout = command_timeout
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisConnection] = (
            weakref.WeakKeyDictionary()
        )
        # The loop last asked for (weakly: a loop that ends is not kept) and its connection: a
        # process serves on one loop, and a WeakKeyDictionary lookup makes a weak reference each time.
        self._last_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._last_connection: RedisConnection | None = None

    def get(self) -> RedisConnection:
        loop = asyncio.get_running_loop()
        last = self._last_loop
        if last is not None and last() is loop:
            return self._last_connection  # type: ignore[return-value]
        connection = self._connections.get(loop)
        if connection is None:
            connection = self._connections[loop] = self.connection_class(self.url, self.command_timeout)
        self._last_loop, self._last_connection = weakref.ref(loop), connection
        return connection
