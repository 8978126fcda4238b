"""A web process told to stop (SIGTERM) drains before it exits, so a rolling deploy loses no call.

On :meth:`Drain.start` the process:

1. stops taking requests: its server stops accepting connections (daphne: the hook in
   ``daphne.py``; uvicorn does it itself), and a request that still arrives on an open connection
   gets 503 with ``Retry-After`` and ``Connection: close`` (the health check, 503 "draining");
2. ends its listening streams (GET streams, resumed POST streams, ``subscriptions/listen``
   streams) with an SSE ``retry`` hint and the id to resume from: their clients resume on another
   process with ``Last-Event-ID``, and what is sent meanwhile is stored and replayed there;
3. lets the requests in flight finish (a call's POST stream with it), up to
   ``MCP_SERVER["DRAIN_TIMEOUT"]`` seconds;
4. past that, ends what still runs as a process death does: each request's stream gets the
   "server process stopped" error (stored, so a client resuming anywhere gets it) and its id is
   freed; then its runtime stops (its heartbeat and claims go) and the server exits.

Every step past the timeout is bounded (``CANCEL_GRACE`` each), and a drain that fails is logged
and ends as one that timed out. Behind that, the process's drain (:data:`drain`, not a
``Drain()`` of a test) arms an exit deadline as it starts: a process that has still not exited
``EXIT_MARGIN`` seconds after the drain timeout and those steps (a request that ignores its
cancellation, a server's shutdown that hangs, an event loop blocked) says so on stderr and exits
with status 1, so that a deploy never waits on it forever.

Which server asked: daphne calls :meth:`Drain.wait` from its shutdown (``daphne.py``); under
uvicorn or granian (any server with an ASGI lifespan and a Python SIGTERM handler; granian's is
its worker's event loop's), the lifespan startup
calls :func:`chain_sigterm`, which starts the drain and then runs the server's own handler (which
stops accepting and waits for the connections to close: the drain closes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from asgiref.sync import markcoroutinefunction

from ..settings import mcp_settings

logger = logging.getLogger("mcp_server.http")

# The SSE retry hint (milliseconds) on a stream a draining process ends: the client resumes it on
# another process after this long (the load balancer sends it elsewhere: this one stopped
# accepting connections).
RETRY_MS = 1000
STREAM_SWEEP = 0.5
# Seconds each step past the drain timeout may take: answering the requests left, their clean-up
# once cancelled (they release their ids), stopping the runtimes.
CANCEL_GRACE = 5.0
# Seconds past the drain timeout and those steps after which a server process that has not exited
# exits anyway (exit_after).
EXIT_MARGIN = 10.0
EXIT_STUCK = 1  # its exit status then

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class Drainable(Protocol):
    """What a transport's per-process runtime does for a drain (``runtime.Runtime``)."""

    def end_streams(self, retry_ms: int) -> None:
        """End every listening stream with an SSE retry hint."""

    async def stop_requests(self) -> None:
        """Give each request still in flight the error of a stopped process, as its death would."""

    async def close(self) -> None:
        """Stop this runtime (its heartbeat, its channel)."""


class Drain:
    """This process's drain: its state, the requests in flight, and the runtimes to drain."""

    def __init__(self, exits: bool = False) -> None:
        """``exits``: the process's own drain, which ends the process if it outlives its bound."""
        self.exits = exits
        self.draining = False
        self._requests: set[asyncio.Task] = set()
        self._runtimes: weakref.WeakSet[Any] = weakref.WeakSet()
        self._task: asyncio.Task | None = None
        self._stop_accepting: list[Callable[[], None]] = []

    # What the pieces of the process tell it ----------------------------------------------------
    def add_runtime(self, runtime: Drainable) -> None:
        self._runtimes.add(runtime)

    def discard_runtime(self, runtime: Drainable) -> None:
        self._runtimes.discard(runtime)

    def on_start(self, stop_accepting: Callable[[], None]) -> None:
        """Call ``stop_accepting`` when the drain starts (a server's listening sockets close)."""
        self._stop_accepting.append(stop_accepting)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Count the current task as a request in flight while within."""
        task = asyncio.current_task()
        if task is None:
            yield
            return
        self._requests.add(task)
        try:
            yield
        finally:
            self._requests.discard(task)

    # The drain ------------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self, timeout: float | None = None) -> asyncio.Task:
        """Begin draining (once; later calls return the same task) on the running loop."""
        if self._task is None:
            self.draining = True
            timeout = mcp_settings.DRAIN_TIMEOUT if timeout is None else timeout
            if self.exits:
                self._exit_after(timeout)
            self._task = asyncio.get_running_loop().create_task(self._run(timeout), name="mcp-drain")
        return self._task

    async def wait(self, timeout: float | None = None) -> None:
        """Drain (starting it if need be) and return once done."""
        await asyncio.shield(self.start(timeout))

    def _exit_after(self, timeout: float) -> threading.Timer:
        """Exit the process (status ``EXIT_STUCK``) if it still runs once the drain's ``timeout``,
        each step past it and ``EXIT_MARGIN`` are over: a thread of its own, so that a blocked
        event loop cannot hold it off."""
        bound = timeout + 3 * CANCEL_GRACE + EXIT_MARGIN

        def stuck() -> None:
            # Straight to stderr: a logging handler's lock may be held by what hangs.
            os.write(2, (f"mcp_server: this process did not exit within {bound:g} s of the start "
                         f"of its drain ({len(self._requests)} requests still counted in flight): "
                         "exiting now\n").encode())
            os._exit(EXIT_STUCK)

        timer = threading.Timer(bound, stuck)
        timer.daemon = True
        timer.name = "mcp-drain-exit"
        timer.start()
        return timer

    async def _run(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        logger.info("draining: %d requests in flight, up to %g s", len(self._requests), timeout)
        runtimes = list(self._runtimes)
        try:
            await self._wait_for_requests(runtimes, deadline)
        except Exception:  # a bug here must not keep the process from ending: on to the timeout's path
            logger.exception("draining failed: ending what is left as past the drain timeout")
        left = set(self._requests)
        if left:
            logger.warning("drain timeout (%g s) passed with %d requests in flight: they end as "
                           "a process death ends them", timeout, len(left))
            for runtime in runtimes:
                await _bounded(runtime.stop_requests(), "answering the requests left")
            for task in left:
                task.cancel()
            await asyncio.wait(left, timeout=CANCEL_GRACE)
            # A request whose task ended (or ignored its cancellation) counts no more, whatever
            # its clean-up did.
            self._requests.difference_update(left)
        for runtime in runtimes:
            await _bounded(runtime.close(), "stopping the runtime")
        logger.info("drained")

    async def _wait_for_requests(self, runtimes: list[Any], deadline: float) -> None:
        loop = asyncio.get_running_loop()
        for stop_accepting in self._stop_accepting:
            try:
                stop_accepting()
            except Exception:
                logger.exception("stopping accepting connections failed")
        # Requests in flight finish; the streams ended leave as soon as their hint is out. Streams
        # are ended again every STREAM_SWEEP seconds: a GET that was being opened as the drain
        # began registers its stream only afterwards. The deadline alone ends the wait.
        while True:
            for runtime in runtimes:
                try:
                    runtime.end_streams(RETRY_MS)
                except Exception:
                    logger.exception("ending the streams failed")
            # A task that ended is in flight no more, whatever its count says.
            self._requests.difference_update([task for task in self._requests if task.done()])
            remaining = deadline - loop.time()
            if not self._requests or remaining <= 0:
                return
            await asyncio.wait(set(self._requests), timeout=min(STREAM_SWEEP, remaining))


async def _bounded(step: Awaitable[None], what: str) -> None:
    """One step past the drain timeout, for up to CANCEL_GRACE seconds; its failure logged."""
    try:
        await asyncio.wait_for(step, CANCEL_GRACE)
    except TimeoutError:
        logger.error("%s took more than %g s: given up", what, CANCEL_GRACE)
    except Exception:  # a store that failed: the streams learn of it as of a death
        logger.exception("%s failed", what)


drain = Drain(exits=True)


# Under a server with an ASGI lifespan (uvicorn, granian) -----------------------------------------

def chain_sigterm(process_drain: Drain | None = None) -> bool:
    """Start the drain on SIGTERM, before the server's own handler (called from the lifespan
    startup, once the server installed it). False where that cannot be done: not the main thread,
    or no Python handler to chain (the default action, or SIGTERM ignored)."""
    process_drain = process_drain or drain
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except ValueError:
        return False
    if not callable(previous) or getattr(previous, "_mcp_drains", False):
        return bool(getattr(previous, "_mcp_drains", False))
    loop = asyncio.get_running_loop()

    def on_sigterm(signum: int, frame: Any) -> None:
        loop.call_soon_threadsafe(process_drain.start)
        previous(signum, frame)

    on_sigterm._mcp_drains = True  # type: ignore[attr-defined]
    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        return False
    return True


# The ASGI side: the health check, and requests refused while draining -------------------------

COUNTED = "mcp_server.drain"  # the scope key of a request a Draining counts


class Draining:
    """``app`` with this process's drain: requests counted while in flight, a request refused
    (503) once draining, and the health check at ``MCP_SERVER["HEALTH_CHECK_PATH"]``: 200
    ``{"status": "serving"}``, or 503 ``{"status": "draining"}`` for the load balancer."""

    def __init__(self, app: Any, process_drain: Drain | None = None):
        self.app = app
        self.drain = process_drain or drain

    @markcoroutinefunction
    def __call__(self, scope: dict, receive: Receive, send: Send) -> Awaitable[None]:
        # Once a request: the endpoint's own (mcp_urlpatterns) within the project's
        # (get_asgi_application) passes it on. Passed on without a coroutine of its own, which an
        # open stream would keep for as long as it is open: the application's is awaited instead.
        if scope["type"] != "http" or COUNTED in scope:
            return self.app(scope, receive, send)
        return self._serve(scope, receive, send)

    async def _serve(self, scope: dict, receive: Receive, send: Send) -> None:
        scope[COUNTED] = True
        health = mcp_settings.HEALTH_CHECK_PATH
        if health is not None and scope.get("path") == health:
            await self._answer(send, 503 if self.drain.draining else 200,
                               {"status": "draining" if self.drain.draining else "serving"})
            return
        if self.drain.draining:
            await self._answer(send, 503, {"error": "this server process is shutting down; retry"})
            return
        # What serving() does, inline: this runs for every request.
        requests, task = self.drain._requests, asyncio.current_task()
        if task is None:  # not run by a task (no ASGI server does that): nothing to count
            await self.app(scope, receive, send)
            return
        requests.add(task)
        try:
            await self.app(scope, receive, send)
        finally:
            requests.discard(task)

    @staticmethod
    async def _answer(send: Send, status: int, body: dict) -> None:
        content = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                   (b"content-length", str(len(content)).encode())]
        if status == 503:
            headers += [(b"retry-after", b"1"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
