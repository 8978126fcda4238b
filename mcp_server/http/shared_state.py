"""Small keys with a time to live that every process of a deployment sees.

They say which process holds what: the stream of a session, an in-flight request, a request to
the client waiting for its answer. Redis in production; process memory on the embedded default
(one process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable
from typing import Any, Protocol

from .redis_client import RedisClients, Script


class SharedState(Protocol):
    async def add(self, key: str, value: str, ttl: float) -> bool:
        """Set ``key`` only if it is absent; True when it was set."""

    async def set(self, key: str, value: str, ttl: float) -> None: ...

    async def get(self, key: str) -> str | None: ...

    async def touch(self, key: str, ttl: float) -> str | None:
        """Get ``key`` and extend its life to ``ttl``; None when absent."""

    async def delete(self, key: str, expected: str | None = None) -> None:
        """Remove ``key`` (only while it still holds ``expected``, when given)."""

    async def add_counted(self, key: str, value: str, ttl: float, counter: str,
                          counter_ttl: float) -> bool:
        """:meth:`add`, and when ``key`` was set, add one to ``counter`` (which then lives
        ``counter_ttl`` more): the count of a session's claims, say."""

    async def delete_counted(self, key: str, counter: str, expected: str | None = None) -> None:
        """:meth:`delete`, and when ``key`` was removed, take one from ``counter``."""

    async def count(self, counter: str) -> int:
        """The value of ``counter`` (0 when absent)."""

    # Optional (the built-in states have them):
    # - ``async def take_count(self, counter: str) -> int``: :meth:`count` and the counter removed
    #   in one step (a DELETE's count of its session's claims);
    # - ``async def set_counting(self, key, value, ttl, counters: list[str]) -> list[int | None]``:
    #   :meth:`set`, and one added to each counter that exists: their new values (None: absent);
    # - ``async def delete_uncounting(self, keys: list[str], counters: list[str]) -> None``: the
    #   keys removed, and one taken from each counter that exists, once for each time it is named.
    # (The counts of sessions, session_counts.py: a state without them counts in the database.)
    # - ``async def touch_adding_counted(self, touched, touched_ttl, key, value, ttl, counter,
    #   counter_ttl) -> tuple[str | None, bool]``: :meth:`touch` of ``touched`` and, when it is
    #   there, :meth:`add_counted` of ``key`` in the same step: its value (None: absent, nothing
    #   added), and whether ``key`` was added (a session read and its request's id claimed).


class LocalState:
    """Process memory; right for one process only."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _live(self, key: str) -> str | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] < time.monotonic():
            del self._values[key]
            return None
        return entry[0]

    async def add(self, key: str, value: str, ttl: float) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            self._values[key] = (value, time.monotonic() + ttl)
            return True

    async def set(self, key: str, value: str, ttl: float) -> None:
        with self._lock:
            self._values[key] = (value, time.monotonic() + ttl)

    async def get(self, key: str) -> str | None:
        with self._lock:
            return self._live(key)

    async def touch(self, key: str, ttl: float) -> str | None:
        with self._lock:
            value = self._live(key)
            if value is not None:
                self._values[key] = (value, time.monotonic() + ttl)
            return value

    async def delete(self, key: str, expected: str | None = None) -> None:
        with self._lock:
            if expected is None or self._live(key) == expected:
                self._values.pop(key, None)

    async def add_counted(self, key: str, value: str, ttl: float, counter: str,
                          counter_ttl: float) -> bool:
        with self._lock:
            if self._live(key) is not None:
                return False
            now = time.monotonic()
            self._values[key] = (value, now + ttl)
            counted = self._live(counter)
            self._values[counter] = (str(int(counted or 0) + 1), now + counter_ttl)
            return True

    async def touch_adding_counted(self, touched: str, touched_ttl: float, key: str, value: str,
                                   ttl: float, counter: str, counter_ttl: float) -> tuple[str | None, bool]:
        found = await self.touch(touched, touched_ttl)
        if found is None:
            return None, False
        return found, await self.add_counted(key, value, ttl, counter, counter_ttl)

    async def delete_counted(self, key: str, counter: str, expected: str | None = None) -> None:
        with self._lock:
            value = self._live(key)
            if value is None or (expected is not None and value != expected):
                return
            del self._values[key]
            entry = self._values.get(counter)
            if entry is not None:
                self._values[counter] = (str(int(entry[0]) - 1), entry[1])

    async def count(self, counter: str) -> int:
        with self._lock:
            value = self._live(counter)
            return int(value) if value is not None else 0

    async def take_count(self, counter: str) -> int:
        with self._lock:
            value = self._live(counter)
            self._values.pop(counter, None)
            return int(value) if value is not None else 0

    async def set_counting(self, key: str, value: str, ttl: float,
                           counters: list[str]) -> list[int | None]:
        with self._lock:
            self._values[key] = (value, time.monotonic() + ttl)
            counted: list[int | None] = []
            for counter in counters:
                if self._live(counter) is None:
                    counted.append(None)
                    continue
                number, expires = self._values[counter]
                self._values[counter] = (str(int(number) + 1), expires)
                counted.append(int(number) + 1)
            return counted

    async def delete_uncounting(self, keys: list[str], counters: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._values.pop(key, None)
            for counter in counters:
                if self._live(counter) is not None:
                    number, expires = self._values[counter]
                    self._values[counter] = (str(int(number) - 1), expires)


_DELETE_IF_EQUAL = Script("""
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
""")


# KEYS: the key, the counter. ARGV: value, its time to live (ms), the counter's (ms).
_ADD_COUNTED = Script("""
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return 0 end
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
""")

# KEYS: the key touched, the key added, its counter. ARGV: the touched key's time to live (ms),
# the value added, its time to live (ms), the counter's (ms). 0 when the touched key is absent.
_TOUCH_ADDING_COUNTED = Script("""
local found = redis.call('GET', KEYS[1])
if not found then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
if not redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3], 'NX') then return {found, 0} end
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return {found, 1}
""")

# KEYS: the key, the counter. ARGV: the expected value ("" for any).
_DELETE_COUNTED = Script("""
local value = redis.call('GET', KEYS[1])
if not value or (ARGV[1] ~= '' and value ~= ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DECR', KEYS[2]) end
return 1
""")


# KEYS: the key, then the counters. ARGV: value, its time to live (ms). A counter keeps its own
# time to live (INCR does not change it); an absent one reads -1 (not made: it is counted anew).
_SET_COUNTING = Script("""
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local counted = {}
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then counted[i - 1] = redis.call('INCR', KEYS[i])
  else counted[i - 1] = -1 end
end
return counted
""")

# KEYS: the keys to remove, then the counters. ARGV: how many keys.
_DELETE_UNCOUNTING = Script("""
local keys = tonumber(ARGV[1])
for i = 1, keys do redis.call('DEL', KEYS[i]) end
for i = keys + 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('DECR', KEYS[i]) end
end
return 0
""")


class RedisState:
    """Redis, shared by every process; one pipelined connection per event loop (see
    :mod:`.redis_client`: redis-py's pool costs more CPU than the rest of a request).

    ``clients`` gives the connections (``clients.get()``); by default those of
    :class:`.redis_client.RedisClients` on ``url`` (:mod:`.redispy_client` has redis-py's).
    """

    def __init__(self, url: str, prefix: str = "mcp:", clients: Any = None) -> None:
        self.url = url
        self.prefix = prefix
        self.clients = clients if clients is not None else RedisClients(url)

    async def add(self, key: str, value: str, ttl: float) -> bool:
        reply = await self.clients.get().execute("SET", self.prefix + key, value, "PX", _ms(ttl), "NX")
        return reply is not None

    async def set(self, key: str, value: str, ttl: float) -> None:
        await self.clients.get().execute("SET", self.prefix + key, value, "PX", _ms(ttl))

    # These two return the command's coroutine to await: one layer less (each session request
    # touches its session, and reads run often).
    def get(self, key: str) -> Awaitable[str | None]:
        return self.clients.get().execute("GET", self.prefix + key)

    def touch(self, key: str, ttl: float) -> Awaitable[str | None]:
        return self.clients.get().execute("GETEX", self.prefix + key, "PX", _ms(ttl))

    async def delete(self, key: str, expected: str | None = None) -> None:
        connection = self.clients.get()
        if expected is None:
            await connection.execute("DEL", self.prefix + key)
        else:
            await connection.run_script(_DELETE_IF_EQUAL, [self.prefix + key], [expected])


    async def add_counted(self, key: str, value: str, ttl: float, counter: str,
                          counter_ttl: float) -> bool:
        added = await self.clients.get().run_script(
            _ADD_COUNTED, [self.prefix + key, self.prefix + counter], [value, _ms(ttl), _ms(counter_ttl)])
        return bool(added)

    async def touch_adding_counted(self, touched: str, touched_ttl: float, key: str, value: str,
                                   ttl: float, counter: str, counter_ttl: float) -> tuple[str | None, bool]:
        reply = await self.clients.get().run_script(
            _TOUCH_ADDING_COUNTED, [self.prefix + touched, self.prefix + key, self.prefix + counter],
            [_ms(touched_ttl), value, _ms(ttl), _ms(counter_ttl)])
        return (None, False) if reply == 0 else (reply[0], bool(reply[1]))

    async def delete_counted(self, key: str, counter: str, expected: str | None = None) -> None:
        await self.clients.get().run_script(
            _DELETE_COUNTED, [self.prefix + key, self.prefix + counter], [expected or ""])

    async def count(self, counter: str) -> int:
        value = await self.clients.get().execute("GET", self.prefix + counter)
        return int(value) if value is not None else 0

    async def take_count(self, counter: str) -> int:
        value = await self.clients.get().execute("GETDEL", self.prefix + counter)
        return int(value) if value is not None else 0

    async def set_counting(self, key: str, value: str, ttl: float,
                           counters: list[str]) -> list[int | None]:
        counted = await self.clients.get().run_script(
            _SET_COUNTING, [self.prefix + key, *(self.prefix + counter for counter in counters)],
            [value, _ms(ttl)])
        return [None if number < 0 else number for number in counted]

    async def delete_uncounting(self, keys: list[str], counters: list[str]) -> None:
        await self.clients.get().run_script(
            _DELETE_UNCOUNTING, [self.prefix + key for key in [*keys, *counters]], [len(keys)])


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
