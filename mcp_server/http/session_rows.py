"""A session's INSERT and DELETE, run by a thread of their own: on PostgreSQL with Django's
connection pool as plain psycopg statements, the thread keeping its connection of the pool while
sessions come and go; on SQLite through the ORM, in the order they came.

Around each statement, ``run_in_thread`` hands the work to the executor and Django opens its
connection (the pool's check, a round trip, then Django's setup) and closes it again: together
about twice a session's two statements themselves, and the ORM's query building as much again.
Here the thread keeps the connection until it has been idle for :data:`RELEASE_AFTER` seconds, and
gives it back to the pool then, so an idle process holds none (or at once, when requests wait for
a connection of the pool; a pool of one connection shares it with the thread, so that a request
may wait up to that second for it).

A kept connection is not checked before each use: one that a restart of the server ended fails
its statement, goes back to the pool (which drops it) and the statement runs once more on a new,
checked one. While the database is down, a statement fails after at most one wait for a
connection: those queued while an attempt to connect failed fail with it, not one after another.

The statements that wait for the thread together run together: those of one kind (the INSERTs,
the DELETEs) as one statement for all their sessions, one round trip and one commit, so a burst
of sessions costs the database and this process about as much as a few. When that statement
fails on one session's row (a constraint), each runs alone again, so that only its caller gets
the error. A statement that waits in the database (a row's lock) holds up those behind it: once
:data:`MAX_WAITING` wait, the caller takes the executor's path instead (:func:`route` says so),
whose threads run side by side.

On SQLite the thread runs each session's statement through Django's ORM path, one after another
(:data:`DJANGO`): its one writer takes them in turn anyway, and threads of the executor queued
for it, the first to get it not the first come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from django.core.signals import setting_changed
from django.db import DatabaseError, InterfaceError, OperationalError, connections

logger = logging.getLogger("mcp_server.http")
# Seconds without a statement after which the thread gives its connection back to the pool.
RELEASE_AFTER = 1.0
# Statements waiting for the thread beyond which new ones go to the executor's threads instead.
MAX_WAITING = 32
# At most this many statements of one kind run as one.
MAX_BATCH = 64


# How the thread runs statements on a database (route()): with plain psycopg statements, or
# with Django's connection (the ORM's path, each item alone).
PSYCOPG = "psycopg"
DJANGO = "django"


def route(using: str) -> str:
    """How a session's statement on the database ``using`` runs: :data:`PSYCOPG` on the thread
    for PostgreSQL with Django's pool (the settings' ``pool`` option; without a pool, a
    connection is opened per use, as asked, and the executor's path is kept); :data:`DJANGO` on
    the thread for SQLite, whose one writer takes them in turn anyway (threads of the executor
    would queue for it, and the first free one is not the first come); "" (the executor's
    threads) otherwise, and whenever :data:`MAX_WAITING` statements wait."""
    worker = _current
    if worker is not None and worker.jobs.qsize() >= MAX_WAITING:
        return ""
    try:
        return _routes[using]
    except KeyError:
        pass
    # Known once per database: on the event loop, each request's context would get a connection
    # object of its own (Django keeps them per context there), built anew for this question.
    connection = connections[using]
    if connection.vendor == "postgresql":
        found = PSYCOPG if connection.settings_dict["OPTIONS"].get("pool") else ""
    else:
        found = DJANGO if connection.vendor == "sqlite" else ""
    _routes[using] = found
    return found


_routes: dict[str, str] = {}


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "DATABASES":
        _routes.clear()


setting_changed.connect(_on_setting_changed)


def each(function: Callable[[Any], Any]) -> Statement:
    """A statement for the :data:`DJANGO` route: ``function(item)`` for each item in turn, on
    the thread's connection of Django, each answered (or failed) alone."""

    def statement(_connection: Any, _retried: bool, items: list) -> list:
        results: list = []
        for item in items:
            try:
                results.append(function(item))
            except DatabaseError as exc:
                results.append(Failed(exc))
        return results

    return statement


class Failed(NamedTuple):
    """An item's error among the results of a statement that answers each item alone."""
    error: BaseException


# ``statement(connection, retried, items)``: one result (or :class:`Failed`) per item, in order;
# ``connection`` is the thread's DB-API connection (psycopg's on the PSYCOPG route).
Statement = Callable[[Any, bool, list], list]


async def run(using: str, statement: Statement, item: Any) -> Any:
    """``statement``'s result for ``item``, run on the thread with its connection of ``using``
    together with the items of the same statement waiting then:
    ``statement(connection, retried, items)`` returns one result per item, in order;
    ``retried`` is True when it runs again after its connection broke (it may have taken effect
    the first time). Errors are Django's (``django.db.OperationalError``...)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    _worker().jobs.put(_Job(loop, future, using, statement, item, time.monotonic()))
    return await future


class _Job(NamedTuple):
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    using: str
    statement: Statement
    item: Any
    queued_at: float


_current: _Worker | None = None
_starting = threading.Lock()


def _worker() -> _Worker:
    global _current
    worker = _current
    if worker is None:
        with _starting:
            worker = _current
            if worker is None:
                worker = _current = _Worker()
    return worker


def _forget_in_child() -> None:
    # A forked child has the parent's objects but not its thread: it starts a worker of its own.
    global _current, _starting
    _current, _starting = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


class _Worker:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        # When an attempt to connect last failed (time.monotonic()), and why.
        self.down_since: float | None = None
        self.down_reason = ""
        threading.Thread(target=self._run, name="mcp-session-rows", daemon=True).start()

    def _run(self) -> None:
        kept: set[str] = set()  # the databases whose connection the thread holds
        while True:
            try:
                job = self.jobs.get(timeout=RELEASE_AFTER) if kept else self.jobs.get()
            except queue.Empty:
                for using in kept:
                    _give_back(using)
                kept.clear()
                continue
            for (using, statement), jobs in _together([job, *self._waiting()]).items():
                kept.add(using)
                _hand_back(jobs, self._outcomes(using, statement, jobs))
                try:
                    if self.jobs.empty() and _wanted(using):
                        _give_back(using)  # requests wait for a connection of the pool: not for this one
                        kept.discard(using)
                except Exception:  # the thread must go on: every session's row waits for it
                    logger.exception("the session rows' thread could not look at the pool")

    def _waiting(self) -> list[_Job]:
        """The jobs queued now, up to a batch's worth."""
        jobs: list[_Job] = []
        while len(jobs) < MAX_BATCH - 1:
            try:
                jobs.append(self.jobs.get_nowait())
            except queue.Empty:
                break
        return jobs

    def _outcomes(self, using: str, statement: Statement,
                  jobs: list[_Job]) -> list[tuple[Any, BaseException | None]]:
        """Each job's result or error, of one statement for them all."""
        try:
            results = self._execute(using, statement, [job.item for job in jobs],
                                    max(job.queued_at for job in jobs))
        except (OperationalError, InterfaceError) as exc:  # the database's, not a row's
            return [(None, exc)] * len(jobs)
        except DatabaseError as exc:
            if len(jobs) == 1:
                return [(None, exc)]
            # One row failed it (nothing was written): each alone, for each its own answer.
            return [self._outcomes(using, statement, [job])[0] for job in jobs]
        except BaseException as exc:  # handed to the waiting tasks, whatever it is
            return [(None, exc)] * len(jobs)
        return [(None, result.error) if isinstance(result, Failed) else (result, None) for result in results]

    def _execute(self, using: str, statement: Statement, items: list, queued_at: float) -> list:
        connection = connections[using]
        for retried in (False, True):
            if connection.connection is None:
                if self.down_since is not None and queued_at <= self.down_since:
                    # Queued while the last attempt waited for the database and failed.
                    raise OperationalError(self.down_reason)
                try:
                    connection.ensure_connection()  # from the pool, checked
                except DatabaseError as exc:
                    self.down_since, self.down_reason = time.monotonic(), str(exc)
                    raise
                self.down_since = None
            try:
                with connection.wrap_database_errors:
                    return statement(connection.connection, retried, items)
            except (OperationalError, InterfaceError):
                raw = connection.connection  # (SQLite's never breaks: its errors are raised)
                broken = raw is None or getattr(raw, "closed", False) or getattr(raw, "broken", False)
                _give_back(using)
                if retried or not broken:
                    raise
            except DatabaseError:
                _give_back(using)  # its transaction, if any, ends there
                raise
        raise AssertionError("unreachable")


def _wanted(using: str) -> bool:
    """Whether requests wait for a connection of the pool (all of them in use)."""
    pool = getattr(connections[using], "pool", None)
    return pool is not None and pool.get_stats().get("requests_waiting", 0) > 0


def _give_back(using: str) -> None:
    """The thread's connection back to the pool (which drops a broken one)."""
    try:
        connections[using].close()
    except DatabaseError:
        pass
    except Exception:  # the thread must go on
        logger.exception("the session rows' thread could not give its connection back")


def _together(jobs: list[_Job]) -> dict[tuple[str, Statement], list[_Job]]:
    """The jobs by database and statement, in the order they came."""
    groups: dict[tuple[str, Statement], list[_Job]] = {}
    for job in jobs:
        groups.setdefault((job.using, job.statement), []).append(job)
    return groups


def _hand_back(jobs: list[_Job], outcomes: list[tuple[Any, BaseException | None]]) -> None:
    """Each outcome to its waiting task: one wake-up of each event loop for them all."""
    settled: dict[asyncio.AbstractEventLoop, list] = {}
    for job, (result, error) in zip(jobs, outcomes, strict=True):
        settled.setdefault(job.loop, []).append((job.future, result, error))
    for loop, outcomes_of_loop in settled.items():
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, outcomes_of_loop)


def _settle(outcomes: list[tuple[asyncio.Future, Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
