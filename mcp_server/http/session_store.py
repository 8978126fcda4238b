"""Sessions as database rows, read through the shared state so a known session costs no query.

Activity is recorded in memory and written in batches (``flush_activity``); the shared-state
entry's time to live is the idle timeout, renewed by every request, so an idle session expires
everywhere at once.
"""

from __future__ import annotations

import datetime
import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import router
from django.utils import timezone

from ..invoke import run_in_thread
from ..rows import insert_row, writing
from ..telemetry import metrics
from . import session_rows
from .limits import counted_with
from .session_counts import COUNT_TTL, count_rows, keeps_counts, principal_counter, server_counter
from .session_statements import delete_sql, delete_statement, insert_statement, json_text
from .shared_state import SharedState

# How long a session lives in the shared state when it never expires on its own.
NO_EXPIRY_CACHE_TTL = 24 * 3600.0


@dataclass
class SessionRecord:
    id: str
    protocol_version: str
    client_info: dict = field(default_factory=dict)
    client_capabilities: dict = field(default_factory=dict)
    log_level: str = ""
    owner_id: Any = None
    origin: str = ""
    principal: str = ""
    server: str = ""

    @classmethod
    def new(cls, **fields: Any) -> SessionRecord:
        return cls(id=uuid.uuid4().hex, **fields)

    def dumps(self) -> str:
        # Its fields by name: dataclasses.asdict deep-copies the JSON fields first, for nothing.
        return json.dumps({
            "id": self.id, "protocol_version": self.protocol_version, "client_info": self.client_info,
            "client_capabilities": self.client_capabilities, "log_level": self.log_level,
            "owner_id": self.owner_id, "origin": self.origin, "principal": self.principal,
            "server": self.server}, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> SessionRecord:
        return cls(**json.loads(text))


class SessionStore:
    """The sessions of one server (``server``: its transport's group); a session of another
    server sharing the database or the shared state is unknown here."""

    def __init__(self, state: SharedState, idle_timeout: float | None, server: str = ""):
        self.state = state
        self.idle_timeout = idle_timeout
        self.server = server
        self._touched: set[str] = set()

    @property
    def _ttl(self) -> float:
        return self.idle_timeout if self.idle_timeout is not None else NO_EXPIRY_CACHE_TTL

    @staticmethod
    def _key(session_id: str) -> str:
        return f"session:{session_id}"

    async def create(self, record: SessionRecord, *, count_principal: bool = False,
                     count_sessions: bool = False) -> tuple[int | None, int | None]:
        """Store a new session; returns how many sessions its principal has now (with
        ``count_principal``) and how many this server has now (with ``count_sessions``), this
        one included (None: not counted). The counts are the shared state's counters, moved in
        the round trip that stores the session's entry (session_counts.py); with a state that
        has none, they are counted in the database with the insert."""
        record.server = self.server
        if not keeps_counts(self.state):
            counts = await run_in_thread(self._insert, record, count_principal, count_sessions)
            await self.state.set(self._key(record.id), record.dumps(), self._ttl)
            return counts
        await self._insert_row(record)
        counters = [server_counter(self.server)] if count_sessions else []
        if count_principal:
            counters.append(principal_counter(self.server, record.principal))
        counted = await self.state.set_counting(self._key(record.id), record.dumps(), self._ttl,
                                                counters)
        for position, number in enumerate(counted):
            if number is None:  # absent: counted anew, this session included
                principal = record.principal if counters[position] != server_counter(self.server) else None
                counted[position] = await run_in_thread(count_rows, self.server, principal)
                await self.state.add(counters[position], str(counted[position]), COUNT_TTL)
        total = counted.pop(0) if count_sessions else None
        return (counted[0] if count_principal else None), total

    async def _insert_row(self, record: SessionRecord) -> None:
        using = router.db_for_write(_session_model())
        route = session_rows.route(using)
        if route == session_rows.PSYCOPG:
            await session_rows.run(using, insert_statement, (record, timezone.now()))
        elif route == session_rows.DJANGO:
            await session_rows.run(using, _insert_each, record)
        else:
            await run_in_thread(self._insert, record, False, False)

    @staticmethod
    def _insert(record: SessionRecord, count_principal: bool,
                count_sessions: bool) -> tuple[int | None, int | None]:
        from django.db import connections, router

        from ..models import Session

        now = timezone.now()
        using = router.db_for_write(Session)
        with writing(using):
            insert_row(using, Session, {
                "id": record.id, "protocol_version": record.protocol_version,
                "client_info": json_text(record.client_info),
                "client_capabilities": json_text(record.client_capabilities),
                "log_level": record.log_level, "owner": record.owner_id, "origin": record.origin,
                "principal": record.principal, "server": record.server, "created_at": now,
                "last_activity": now, "stored_events": 0, "stored_bytes": 0,
            })
            principal = Session.objects.filter(
                **counted_with(record.principal), server=record.server).count() if count_principal else None
            if not count_sessions:
                return principal, None
            connection = connections[using]
            quote = connection.ops.quote_name
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT COUNT(*) FROM {quote(Session._meta.db_table)} "
                               f"WHERE {quote('server')} = %s", [record.server])
                return principal, cursor.fetchone()[0]

    async def load(self, session_id: str) -> SessionRecord | None:
        """The live session with this id, or None when it is unknown or has expired."""
        if not session_id or len(session_id) > 64:
            return None
        cached = await self.state.touch(self._key(session_id), self._ttl)
        if cached is not None:
            return self._cached(session_id, cached)
        record, expired = await run_in_thread(self._select, session_id, self.server, self.idle_timeout)
        if expired:
            await self.forget(*self.forgetting(None, expired))
        if record is not None:
            self._touched.add(session_id)
            await self.state.set(self._key(session_id), record.dumps(), self._ttl)
        return record

    async def load_adding(self, session_id: str, key: str, value: str, ttl: float, counter: str,
                          counter_ttl: float) -> tuple[SessionRecord | None, bool | None]:
        """:meth:`load`, and where the session is in the shared state and the state can, ``key``
        added there as ``add_counted`` adds it, in the same round trip (a request's id claimed):
        whether it was added, or None when that was not tried (the caller adds it then)."""
        touch_adding = getattr(self.state, "touch_adding_counted", None)
        if touch_adding is None or not session_id or len(session_id) > 64:
            return await self.load(session_id), None
        cached, added = await touch_adding(self._key(session_id), self._ttl, key, value, ttl,
                                           counter, counter_ttl)
        if cached is None:  # not in the shared state (it lost its data): from the database
            return await self.load(session_id), None
        record = self._cached(session_id, cached)
        if record is None and added:  # another server's session: nothing of it is ours to hold
            await self.state.delete_counted(key, counter, expected=value)
        return record, None if record is None else added

    def _cached(self, session_id: str, cached: str) -> SessionRecord | None:
        record = SessionRecord.loads(cached)
        if record.server != self.server:
            return None
        self._touched.add(session_id)
        return record

    @staticmethod
    def _select(session_id: str, server: str,
                idle_timeout: float | None) -> tuple[SessionRecord | None, list[str]]:
        """The session's row, or None; and the principals of the sessions deleted as expired."""
        from ..models import Session

        row = Session.objects.filter(pk=session_id, server=server).first()
        if row is None:
            return None, []
        if idle_timeout is not None and \
                row.last_activity < timezone.now() - datetime.timedelta(seconds=idle_timeout):
            return None, SessionStore._delete_rows([row.pk])
        return SessionRecord(
            id=row.id, protocol_version=row.protocol_version, client_info=row.client_info,
            client_capabilities=row.client_capabilities, log_level=row.log_level,
            owner_id=row.owner_id, origin=row.origin, principal=row.principal, server=row.server,
        ), []

    async def peek(self, session_id: str) -> SessionRecord | None:
        """The shared-state copy of a session, without counting as activity."""
        cached = await self.state.get(self._key(session_id))
        return SessionRecord.loads(cached) if cached is not None else None

    async def update(self, record: SessionRecord, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(record, name, value)
        await run_in_thread(self._update_row, record.id, changes)
        await self.state.set(self._key(record.id), record.dumps(), self._ttl)

    @staticmethod
    def _update_row(session_id: str, changes: dict) -> None:
        from ..models import Session

        with writing(router.db_for_write(Session)):
            Session.objects.filter(pk=session_id).update(**changes, last_activity=timezone.now())

    async def delete(self, session_id: str, *, ended: bool = True) -> bool:
        """Delete a session; ``ended=False`` for one refused as it was made, which never lived
        (its duration is not recorded)."""
        principals = await self.delete_row(session_id, ended=ended)
        await self.forget(*self.forgetting(session_id, principals))
        return bool(principals)

    async def delete_row(self, session_id: str, *, ended: bool = True) -> list[str]:
        """:meth:`delete`'s database part: the session's row, events and subscriptions; the
        principal of the session deleted (none when it was not there). Its shared-state entry and
        counts stay until :meth:`forget` (or a caller that drops them in a round trip of its own,
        with what :meth:`forgetting` names)."""
        self._touched.discard(session_id)
        using = router.db_for_write(_session_model())
        route = session_rows.route(using)
        if route == session_rows.PSYCOPG:
            gone = await session_rows.run(using, delete_statement, session_id)
            if ended and gone and metrics.enabled():
                metrics.sessions_ended([row[1:3] for row in gone])
            return [row[0] for row in gone]
        if route == session_rows.DJANGO:
            return await session_rows.run(using, _delete_each, (session_id, ended))
        return await run_in_thread(self._delete_rows, [session_id], ended=ended)

    def forgetting(self, session_id: str | None, principals: list[str]) -> tuple[list[str], list[str]]:
        """The shared-state keys to remove and the counters to take one from (a counter named
        once for each session) once a session's row (``session_id``'s, or None for only the
        counts) and those of ``principals`` are deleted. No counters with a state that does not
        keep counts."""
        keys = [] if session_id is None else [self._key(session_id)]
        if not keeps_counts(self.state):
            return keys, []
        return keys, [server_counter(self.server)] * len(principals) + \
            [principal_counter(self.server, principal) for principal in principals]

    async def forget(self, keys: list[str], counters: list[str]) -> None:
        """Remove shared-state entries of sessions and take one from each counter named (see
        :meth:`forgetting`), in one round trip when the state keeps counts."""
        if not keeps_counts(self.state):
            for key in keys:
                await self.state.delete(key)
        elif keys or counters:
            await self.state.delete_uncounting(keys, counters)

    async def count(self) -> int:
        """The server's sessions, counted in the database; its counter is set to the count."""
        counted = await run_in_thread(count_rows, self.server)
        await self.state.set(server_counter(self.server), str(counted), COUNT_TTL)
        return counted

    async def count_principal(self, principal: str) -> int:
        """The sessions of ``principal``'s fair share here, counted in the database; its counter
        is set to the count."""
        counted = await run_in_thread(count_rows, self.server, principal)
        await self.state.set(principal_counter(self.server, principal), str(counted), COUNT_TTL)
        return counted

    async def flush_activity(self) -> None:
        """Write the last activity of every session used since the previous flush."""
        touched, self._touched = self._touched, set()
        if touched:
            try:
                await run_in_thread(self._write_activity, touched)
            except BaseException:
                self._touched |= touched  # the database away (a restart): written at the next flush
                raise

    @staticmethod
    def _write_activity(session_ids: set[str]) -> None:
        from ..models import Session

        with writing(router.db_for_write(Session)):
            Session.objects.filter(pk__in=session_ids).update(last_activity=timezone.now())

    async def reap(self) -> list[str]:
        """Delete the sessions idle for longer than the timeout; returns their ids.

        A session another process used lately may not have its activity written yet, but its
        shared-state entry is alive (its time to live is the idle timeout): it is kept.
        """
        if self.idle_timeout is None:
            return []
        await self.flush_activity()
        candidates = await run_in_thread(self._idle_ids, self.server, self.idle_timeout)
        expired = [sid for sid in candidates if await self.state.get(self._key(sid)) is None]
        if expired:
            await self.forget(*self.forgetting(None, await run_in_thread(self._delete_rows, expired)))
        return expired

    @staticmethod
    def _idle_ids(server: str, idle_timeout: float) -> list[str]:
        from ..models import Session

        cutoff = timezone.now() - datetime.timedelta(seconds=idle_timeout)
        idle = Session.objects.filter(server=server, last_activity__lt=cutoff)
        return list(idle.values_list("pk", flat=True))

    @staticmethod
    def _delete_rows(session_ids: list[str], *, ended: bool = True) -> list[str]:
        """Delete sessions with their subscriptions and stored events; returns the principals of
        those deleted (one per session). With metrics on, the durations of those that ``ended``
        are recorded once they are gone.

        The rows are locked first, because a request of the session may still be running in
        some process and storing events: one stored before the lock goes with the session, one
        stored after waits for the delete and then fails (the event store takes that as "session
        gone"). Without the lock, an event stored between Django collecting the session's events
        and deleting the session fails the delete instead.
        """
        from django.db import connections, router, transaction

        from ..models import Session

        using = router.db_for_write(Session)
        connection = connections[using]
        quote = connection.ops.quote_name
        timed = ended and metrics.enabled()
        ids = list(session_ids)
        if not ids:
            return []
        deletes, lock, delete = delete_sql(quote, ", ".join(["%s"] * len(ids)))
        if connection.vendor == "postgresql":
            # The deletes in one statement after the rows' lock: every event stored before the
            # lock is seen by it, and none is stored after it. (Its driver gives aware date-times
            # for the metrics, as the ORM would.)
            with connection.cursor() as cursor:
                if _binds_on_client(cursor):
                    # Both statements in one round trip: the simple query protocol runs them in
                    # one transaction (the lock held until the end), each with its own snapshot.
                    cursor.execute(f"{lock}; {delete}", ids * 4)
                    cursor.nextset()
                    gone = cursor.fetchall()
                else:
                    with transaction.atomic(using=using):
                        cursor.execute(lock, ids)
                        cursor.execute(delete, ids * 3)
                        gone = cursor.fetchall()
            if timed and gone:
                metrics.sessions_ended([row[1:3] for row in gone])
            return [row[0] for row in gone]
        with writing(using), transaction.atomic(using=using), connection.cursor() as cursor:
            if connection.features.has_select_for_update:
                cursor.execute(lock, ids)
                ids = [row[0] for row in cursor.fetchall()]
                if not ids:
                    return []
                deletes = delete_sql(quote, ", ".join(["%s"] * len(ids)))[0]
            # (SQLite has no row locks: its first write takes the database's write lock, waiting
            # for it, where a read first would fail to upgrade under a concurrent writer.)
            lived = list(Session.objects.using(using).filter(pk__in=ids).values_list(
                "principal", "created_at", "protocol_version")) if timed else []
            for statement in deletes[:2]:
                cursor.execute(statement, ids)
            if connection.features.can_return_columns_from_insert:  # SQLite 3.35+
                cursor.execute(deletes[2] + f" RETURNING {quote('principal')}", ids)
                principals = [row[0] for row in cursor.fetchall()]
            else:
                principals = [row[0] for row in lived] if timed else list(
                    Session.objects.using(using).filter(pk__in=ids).values_list("principal", flat=True))
                cursor.execute(deletes[2], ids)
                if not cursor.rowcount:
                    principals = []
        if lived and principals:
            metrics.sessions_ended([row[1:] for row in lived])
        return principals


# The statements of session_rows' DJANGO route: each session's row alone, as the executor's path.
_insert_each = session_rows.each(lambda record: SessionStore._insert(record, False, False))
_delete_each = session_rows.each(lambda item: SessionStore._delete_rows([item[0]], ended=item[1]))


@functools.cache
def _session_model() -> Any:
    """The Session model, imported once (an import in a function runs at every call, through
    importlib's Python code for a package)."""
    from ..models import Session

    return Session


def _binds_on_client(cursor: Any) -> bool:
    """Whether the driver merges parameters into the query text (psycopg 3's client-side cursor,
    Django's default), which lets one execute run several statements."""
    try:
        from psycopg import ClientCursor
    except ImportError:
        return False
    return isinstance(getattr(cursor, "cursor", None), ClientCursor)

