"""How the audit writer's thread shares the interpreter lock with the event loop's thread.

The writer's Python work (making rows, formatting them for the database) holds the interpreter
lock. Held long, it keeps a request that arrives meanwhile waiting: the latency tail at
concurrency 1. Let go of often, it starves: a thread that lets go of the lock while the event
loop is busy gets it back only once the loop has held it for the interpreter's switch interval
(5 ms), so a pause every few rows capped the writer, under load, at a few hundred rows a second,
fewer than the calls it records (docs/performance.md). The writer therefore pauses by the time
it has held the lock: a request waits for it at most ``HOLD_SECONDS``, and under load the writer
keeps about ``HOLD_SECONDS / (HOLD_SECONDS + 5 ms)`` of the interpreter, several times what its
rows cost.
"""

from __future__ import annotations

import time

# The longest the writer's thread runs Python between two pauses.
HOLD_SECONDS = 0.001
# Long enough for a thread woken by the lock's release to take it: with no wait at all, the
# writer's thread takes the lock back first, and the other waits out the switch interval.
PAUSE_SECONDS = 0.00005


class Pacer:
    """Called between rows by the writer's thread: pauses (``time.sleep``, which lets go of the
    interpreter lock) once the thread has run ``HOLD_SECONDS`` since its last pause."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.perf_counter()

    def __call__(self) -> None:
        if time.perf_counter() - self._since >= HOLD_SECONDS:
            self.pause()

    def pause(self) -> None:
        """Let requests run now."""
        time.sleep(PAUSE_SECONDS)
        self.restart()

    def restart(self) -> None:
        """The thread has just had the lock back (a database call let go of it): count from now."""
        self._since = time.perf_counter()
