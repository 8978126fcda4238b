"""A lean first-in first-out queue: what an open stream's events, and (under daphne) a request's
messages, wait in.

An ``asyncio.Queue`` costs about 3 KiB whether or not anything waits in it (three deques of 760
bytes, and an ``asyncio.Event`` with a deque of its own for ``join()``); an open GET stream held
two, a tenth of its memory. A :class:`Mailbox` is two slots: a list made when the first item
comes, and a future made only while a reader waits. It has no bound and no ``join()``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final


class _TimedOut:
    def __repr__(self) -> str:
        return "TIMED_OUT"


# What :meth:`Mailbox.get` returns when its timeout passed before an item came.
TIMED_OUT: Final[Any] = _TimedOut()


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(TIMED_OUT)


class Mailbox:
    """Items put without waiting, got in order; a reader waits (with a timeout, if it says so).

    Always true, as an ``asyncio.Queue`` is (daphne tests its queue so); ``qsize()`` says how many
    items wait."""

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: list[Any] | None = None
        # The futures of the readers waiting, first come first woken: one at most, usually.
        self._waiters: list[asyncio.Future] | None = None

    def qsize(self) -> int:
        return len(self._items) if self._items else 0

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: Any) -> None:
        if self._items is None:
            self._items = [item]
        else:
            self._items.append(item)
        self._wake_one()

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    async def get(self, timeout: float | None = None) -> Any:
        """The next item, waiting for it; :data:`TIMED_OUT` if ``timeout`` seconds pass first."""
        while not self._items:
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            if self._waiters is None:
                self._waiters = [waiter]
            else:
                self._waiters.append(waiter)
            timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
            try:
                result = await waiter
            except BaseException:
                waiter.cancel()
                self._forget(waiter)
                # Woken for an item, then cancelled before taking it: the next reader takes it.
                if self._items and not waiter.cancelled():
                    self._wake_one()
                raise
            finally:
                if timer is not None:
                    timer.cancel()
            if result is TIMED_OUT:
                self._forget(waiter)
                if not self._items:
                    return TIMED_OUT
        return self._items.pop(0)

    def _wake_one(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                break
        if not waiters:
            self._waiters = None

    def _forget(self, waiter: asyncio.Future) -> None:
        waiters = self._waiters
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                self._waiters = None
