"""``DatabaseTokenStorage``: the OAuth registration and tokens of one key in the database, shared by
every process of a deployment (OAUTH-23).

``locked()`` takes a row lock (``SELECT ... FOR UPDATE``; on SQLite, which has none, a write takes
the database's write lock) in a transaction of its own, on a thread of its own, held while the flow
discovers, refreshes or registers: another process renewing the same key waits, then finds the
tokens renewed and uses them. So a rotated refresh token is spent once and a client registered once.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from ...oauth.storage import TokenStorage
from .crypto import cipher, decrypt, encrypt
from .models import OAuthCredential

T = TypeVar("T")
# The row locks the running task holds, by storage: its reads and writes go through them.
_HELD: contextvars.ContextVar[dict[int, _RowLock] | None] = contextvars.ContextVar("mcp_client_row_locks",
                                                                                   default=None)
KEY_LENGTH = OAuthCredential._meta.get_field("key").max_length


class DatabaseTokenStorage(TokenStorage):
    """``DatabaseTokenStorage(key)``: ``key`` names what the credentials are for (the MCP server's
    URL, with a user's id where each user authorizes for themselves). Processes with the same key
    share one registration and one set of tokens. Needs ``mcp_client.contrib.django`` installed and
    ``MCP_CLIENT["OAUTH_ENCRYPTION_KEYS"]`` set (ImproperlyConfigured here otherwise)."""

    def __init__(self, key: str, *, using: str = "default"):
        if not isinstance(key, str) or not key or len(key) > KEY_LENGTH:
            raise ValueError(f"key must be a non-empty string of at most {KEY_LENGTH} characters")
        self.key = key
        self.using = using
        self._cipher = cipher()

    async def tokens(self) -> dict | None:
        return await self._run(self._read, "tokens")

    async def save_tokens(self, tokens: dict | None) -> None:
        await self._run(self._write, "tokens", tokens)

    async def client_information(self) -> dict | None:
        return await self._run(self._read, "client_information")

    async def save_client_information(self, information: dict | None) -> None:
        await self._run(self._write, "client_information", information)

    @asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        held = _HELD.get() or {}
        if id(self) in held:  # already ours: the flow's steps nest
            yield
            return
        lock = _RowLock(self.key, self.using)
        await lock.acquire()
        mark = _HELD.set({**held, id(self): lock})
        try:
            yield
        finally:
            _HELD.reset(mark)
            await lock.release()

    # On worker threads -------------------------------------------------------------------------
    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        lock = (_HELD.get() or {}).get(id(self))
        if lock is not None:
            return await lock.run(function, *args)
        return await asyncio.to_thread(_with_connection, function, *args)

    def _rows(self) -> Any:
        return OAuthCredential.objects.using(self.using).filter(key=self.key)

    def _read(self, field: str) -> dict | None:
        token = self._rows().values_list(field, flat=True).first()
        return decrypt(self._cipher, token, f"{field} of {self.key!r}") if token else None

    def _write(self, field: str, value: dict | None) -> None:
        values: dict[str, Any] = {field: encrypt(self._cipher, value) if value is not None else ""}
        value = value or {}
        if field == "tokens":
            expires_at = value.get("expires_at")
            values["expires_at"] = datetime.datetime.fromtimestamp(expires_at, datetime.UTC) \
                if isinstance(expires_at, int | float) and not isinstance(expires_at, bool) else None
        else:
            values["client_id"] = str(value.get("client_id") or "")
            values["issuer"] = str(value.get("issuer") or "")
        OAuthCredential.objects.using(self.using).update_or_create(key=self.key, defaults=values)


def _with_connection(function: Callable[..., T], *args: Any) -> T:
    """``function`` on a worker thread, whose connection is kept only as CONN_MAX_AGE allows."""
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()


class _RowLock:
    """The row of one key, locked in a transaction on a thread (and connection) of its own."""

    def __init__(self, key: str, using: str):
        self.key, self.using = key, using
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mcp-oauth-row-lock")
        self._atomic: Any = None

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self._thread.submit(function, *args))

    async def acquire(self) -> None:
        try:
            await self.run(self._lock)
        except BaseException:
            # Cancelled while waiting (or failed): the thread ends the transaction once it has it.
            self._thread.submit(self._unlock)
            self._thread.shutdown(wait=False)
            raise

    async def release(self) -> None:
        """Commit what was saved under the lock (whatever happened after: the authorization server
        issued it), before anyone reads it on another connection."""
        try:
            await asyncio.shield(self.run(self._unlock))
        finally:
            self._thread.shutdown(wait=False)

    def _lock(self) -> None:
        rows = OAuthCredential.objects.using(self.using)
        rows.get_or_create(key=self.key)
        self._atomic = transaction.atomic(using=self.using)
        self._atomic.__enter__()
        try:
            if connections[self.using].features.has_select_for_update:
                list(rows.select_for_update().filter(key=self.key).values_list("pk", flat=True))
            else:
                rows.filter(key=self.key).update(updated_at=timezone.now())
        except BaseException as exc:
            atomic, self._atomic = self._atomic, None
            atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def _unlock(self) -> None:
        try:
            if self._atomic is not None:
                atomic, self._atomic = self._atomic, None
                atomic.__exit__(None, None, None)
        finally:
            connections[self.using].close()
