"""The registry each request sees: what code registered, shaped by administrators (switches,
overrides, restrictions) and joined by what they defined in admin.

Each process builds a snapshot from the database once, and again only after a change: a message
on the channel layer (sent by whoever saved it, before the matching ``list_changed``) or, for a
process that has no channel (stdio, a stateless endpoint), the change counter in Django's cache,
looked at no more than once every ``RECHECK_INTERVAL`` seconds. Requests read the snapshot: no
query on the way, except a user's grants where an entry is restricted (see ``access.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..invoke import run_in_thread
from . import access, stored

if TYPE_CHECKING:
    from ..context import ServerContext
    from ..server import Server

logger = logging.getLogger("mcp_server.registry")
# Seconds between two looks at the change counter in Django's cache.
RECHECK_INTERVAL = 1.0
KINDS = ("tools", "prompts", "resources", "resource_templates")


@dataclass
class View:
    """What one principal may see: name (or URI) -> primitive, for each kind."""

    tools: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    resource_templates: dict[str, Any] = field(default_factory=dict)


@dataclass
class Snapshot:
    """Every entry with its restriction (None: anyone), as of one version of the database."""

    entries: dict[str, dict[str, tuple[Any, access.Access | None]]]
    code_version: Any  # server.registry_version when it was built
    counter: Any  # the change counter in Django's cache when it was built
    open_view: View  # the entries anyone may see
    restricted: bool

    def view_for(self, grant: access.Grant | None) -> View:
        view = View()
        for kind in KINDS:
            getattr(view, kind).update(
                (key, primitive) for key, (primitive, rule) in self.entries[kind].items()
                if rule is None or rule.allows(grant))
        return view


class RegistryOverlay:
    """The admin-shaped registry of one server (``server.overlay``)."""

    def __init__(self, server: Server):
        self.server = server
        self._snapshot: Snapshot | None = None
        self._building: asyncio.Future | None = None
        self._checked = 0.0
        self._views: dict[access.Grant | None, tuple[Snapshot, View]] = {}
        self._rechecking: asyncio.Task | None = None

    def invalidate(self) -> None:
        self._snapshot = None
        self._views.clear()

    async def view(self, ctx: ServerContext) -> View:
        """The registry as ``ctx``'s principal (the session's owner) may see it."""
        snapshot = await self._current()
        if not snapshot.restricted:
            return snapshot.open_view
        user_id = ctx.session.user_id
        grant = None if user_id is None else await access.grant_for(user_id)
        cached = self._views.get(grant)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        view = snapshot.view_for(grant)
        if len(self._views) < 10_000:  # one per distinct grant: few, since grants repeat
            self._views[grant] = (snapshot, view)
        return view

    async def _current(self) -> Snapshot:
        now = time.monotonic()
        if now - self._checked >= RECHECK_INTERVAL and (self._rechecking is None or self._rechecking.done()):
            self._checked = now
            self._rechecking = asyncio.ensure_future(self._recheck())  # off this request's way
        snapshot = self._snapshot
        if snapshot is not None and snapshot.code_version == self.server.registry_version:
            return snapshot
        if self._building is None or self._building.done():
            self._building = asyncio.ensure_future(run_in_thread(self._build))
        snapshot = await asyncio.shield(self._building)
        self._snapshot = snapshot
        return snapshot

    async def _recheck(self) -> None:
        snapshot = self._snapshot
        if snapshot is not None and await changes_counter(self.server.name) != snapshot.counter:
            self.invalidate()

    def _build(self) -> Snapshot:
        from django.db import DatabaseError

        try:
            return self._build_from_rows()
        except DatabaseError:
            if _tables_exist():
                raise  # the database failed: the request fails, rather than show what is hidden
            # Never migrated (a stdio server that needs no database, say): no row can shape
            # anything. (Admin, which needs the tables, says so where it matters.)
            logger.debug("the registry tables are missing (manage.py migrate creates them): serving "
                         "the registry as code defines it")
            return self._build_from_rows(rows=False)

    def _build_from_rows(self, rows: bool = True) -> Snapshot:
        from ..models import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate

        server = self.server
        code_version, counter = server.registry_version, _read_counter(server.name)
        settings = {(row.kind, row.name): row for row in
                    PrimitiveSetting.objects.filter(server=server.name).prefetch_related("groups")} \
            if rows else {}
        kinds = {"tools": "tool", "prompts": "prompt", "resources": "resource",
                 "resource_templates": "resource_template"}
        entries: dict[str, dict[str, tuple[Any, access.Access | None]]] = {kind: {} for kind in KINDS}
        for kind, setting_kind in kinds.items():
            for key, primitive in list(getattr(server, kind).items()):
                setting = settings.get((setting_kind, key))
                if setting is None:
                    entries[kind][key] = (primitive, None)
                elif setting.enabled:
                    entries[kind][key] = (stored.overridden(primitive, setting), _rule(setting))
        defined = ((StoredPrompt, "prompts", stored.prompt_of, "name"),
                   (StoredResource, "resources", stored.resource_of, "uri"),
                   (StoredResourceTemplate, "resource_templates", stored.resource_template_of,
                    "uri_template"))
        for model, kind, build, key_field in defined if rows else ():
            for row in model.objects.filter(server=server.name, enabled=True).prefetch_related("groups"):
                key = getattr(row, key_field)
                if key not in entries[kind]:  # what code registers wins (admin forms refuse it)
                    entries[kind][key] = (build(row), _rule(row))
        restricted = any(rule is not None for kind in KINDS for _p, rule in entries[kind].values())
        snapshot = Snapshot(entries, code_version, counter, View(), restricted)
        snapshot.open_view = snapshot.view_for(None)
        return snapshot


def _tables_exist() -> bool:
    from django.db import connection

    from ..models import PrimitiveSetting

    return PrimitiveSetting._meta.db_table in connection.introspection.table_names()


def _rule(row: Any) -> access.Access | None:
    group_ids = frozenset(group.pk for group in row.groups.all())
    if not row.permission and not group_ids:
        return None
    return access.Access(row.permission, group_ids)


def _counter_key(server_name: str) -> str:
    return f"mcp_server:registry:{server_name}"


def _read_counter(server_name: str) -> Any:
    from django.core.cache import cache

    try:
        return cache.get(_counter_key(server_name))
    except Exception:
        return None


async def changes_counter(server_name: str) -> Any:
    """The change counter of a server's registry in Django's cache (None: never changed)."""
    from django.core.cache import cache

    try:
        return await cache.aget(_counter_key(server_name))
    except Exception:  # a cache that does not answer: the channel-layer message still reaches us
        return None


def count_change(server_name: str) -> None:
    """Bump the change counter (blocking): processes without a channel notice it so."""
    from django.core.cache import cache

    key = _counter_key(server_name)
    try:
        cache.add(key, 0, timeout=None)
        cache.incr(key)
    except Exception:
        cache.set(key, time.time_ns(), timeout=None)
