"""Who may see a registry entry an administrator restricted, and what a user is granted.

A user's permissions and groups are read from the database at most every ``GRANT_TTL`` seconds
per process (a permission taken away reaches every process within that time).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

# Seconds a process keeps what a user is granted before reading it again.
GRANT_TTL = 5.0


@dataclass(frozen=True)
class Access:
    """An entry's restriction: a permission ("app_label.codename"), and groups (any of them)."""

    permission: str = ""
    group_ids: frozenset[int] = frozenset()

    def allows(self, grant: Grant | None) -> bool:
        if grant is None or not grant.active:
            return False
        if grant.superuser:
            return True
        if self.permission and self.permission not in grant.permissions:
            return False
        return not self.group_ids or bool(self.group_ids & grant.group_ids)


@dataclass(frozen=True)
class Grant:
    """What one user holds."""

    user_id: Any
    active: bool
    superuser: bool
    permissions: frozenset[str]
    group_ids: frozenset[int]
    # Groups by name, for restrictions code declares (Tool.groups, mcp_server.curate).
    group_names: frozenset[str] = frozenset()


_grants: dict[Any, tuple[float, Grant | None]] = {}
_lock = threading.Lock()


_MISSING = object()


def cached_grant(user_id: Any) -> Any:
    """The user's grant if this process read it less than ``GRANT_TTL`` s ago, else ``_MISSING``."""
    with _lock:
        cached = _grants.get(user_id)
    if cached is not None and time.monotonic() - cached[0] < GRANT_TTL:
        return cached[1]
    return _MISSING


async def grant_for(user_id: Any) -> Grant | None:
    """The user's grant, read on a worker thread when not cached; None for no such user."""
    from ..invoke import run_in_thread

    grant = cached_grant(user_id)
    return await run_in_thread(grant_of, user_id) if grant is _MISSING else grant


def grant_of(user_id: Any) -> Grant | None:
    """The user's grant (blocking: ORM queries; cached ``GRANT_TTL`` s); None for no such user."""
    grant = cached_grant(user_id)
    if grant is not _MISSING:
        return grant
    now = time.monotonic()
    grant = _load(user_id)
    with _lock:
        if len(_grants) > 10_000:  # bounded: the oldest half goes
            for key, _value in sorted(_grants.items(), key=lambda item: item[1][0])[:5_000]:
                _grants.pop(key, None)
        _grants[user_id] = (now, grant)
    return grant


def _load(user_id: Any) -> Grant | None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return None
    groups = list(user.groups.values_list("id", "name"))
    return Grant(user_id=user_id, active=bool(getattr(user, "is_active", True)),
                 superuser=bool(getattr(user, "is_superuser", False)),
                 permissions=frozenset(user.get_all_permissions()),
                 group_ids=frozenset(pk for pk, _name in groups),
                 group_names=frozenset(name for _pk, name in groups))


def forget_grants() -> None:
    """Drop every cached grant (tests; a deployment that changed permissions in bulk)."""
    with _lock:
        _grants.clear()
