"""The registry each request sees: what code registered, shaped by administrators (switches,
overrides, restrictions) and joined by what they defined in admin.

Each process builds a snapshot from the database once, and again only after a change: a message
on the channel layer (sent by whoever saved it, before the matching ``list_changed``) or, for a
process that has no channel (stdio, a stateless endpoint) or missed the message, the change
marker (``counter.py``), looked at no more than once every ``RECHECK_INTERVAL`` seconds. Requests
read the snapshot: no query on the way, except a user's grants where an entry is restricted
(see ``access.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import log_context, ports
from ..invoke import run_in_thread
from . import access, counter, stored

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("mcp_server.registry")
# Seconds between two looks at the change marker (counter.py).
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
    counter: Any  # the change marker (counter.py) when it was built
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
        self._building: asyncio.Task | None = None
        self._checked = 0.0
        self._views: dict[access.Grant | None, tuple[Snapshot, View]] = {}

    def invalidate(self) -> None:
        self._snapshot = None
        self._views.clear()

    def known_tool(self, name: str) -> Any:
        """The tool exposed as ``name`` to anyone, in the snapshot this process holds (None: no
        snapshot yet, or no such tool): for what names a call's tool without a principal
        (telemetry, timeouts), after the call was let through."""
        snapshot = self._snapshot
        entry = snapshot.entries["tools"].get(name) if snapshot is not None else None
        return entry[0] if entry is not None else None

    async def tool_named(self, name: str) -> Any:
        """The tool exposed as ``name`` to anyone (None: none), from a current snapshot: what a
        worker runs for a call a web process let through."""
        snapshot = await self._current()
        entry = snapshot.entries["tools"].get(name)
        return entry[0] if entry is not None else None

    def open_view_now(self) -> View | None:
        """What :meth:`view_for` returns for anyone, when it needs no wait: the snapshot held is
        current (looked at within RECHECK_INTERVAL, of this code's registry) and restricts no
        one. None otherwise (then ask view_for). Three coroutines fewer, twice per call."""
        snapshot = self._snapshot
        if snapshot is None or snapshot.restricted or snapshot.code_version != self.server.registry_version \
                or time.monotonic() - self._checked >= RECHECK_INTERVAL:
            return None
        return snapshot.open_view

    async def view_for(self, user_id: Any) -> View:
        """The registry as the Django user ``user_id`` (None: anonymous) may see it."""
        snapshot = await self._current()
        if not snapshot.restricted:
            return snapshot.open_view
        grant = None if user_id is None else await access.grant_for(user_id)
        cached = self._views.get(grant)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        view = snapshot.view_for(grant)
        if len(self._views) < 10_000:  # one per distinct grant: few, since grants repeat
            self._views[grant] = (snapshot, view)
        return view

    async def _current(self) -> Snapshot:
        snapshot, now = self._snapshot, time.monotonic()
        if snapshot is not None and now - self._checked >= RECHECK_INTERVAL:
            self._checked = now
            if await counter.read(self.server) != snapshot.counter:  # one fast read a second
                self.invalidate()
        snapshot = self._snapshot
        if snapshot is not None and snapshot.code_version == self.server.registry_version:
            return snapshot
        # One build at a time per event loop; the requests that come meanwhile wait for it.
        loop = asyncio.get_running_loop()
        building = self._building
        if building is None or building.done() or building.get_loop() is not loop:
            # Shared by whoever waits for it: its log records are no one request's.
            building = self._building = loop.create_task(self._build_now(), context=log_context.detached())
        snapshot = self._snapshot = await asyncio.shield(building)
        return snapshot

    async def _build_now(self) -> Snapshot:
        # The change marker first: a change made while the rows are read is seen at the next look.
        marker = await counter.read(self.server)
        return await run_in_thread(self._build, marker)

    def _build(self, marker: Any) -> Snapshot:
        from django.db import DatabaseError

        try:
            return self._build_from_rows(marker)
        except DatabaseError:
            if _tables_exist():
                raise  # the database failed: the request fails, rather than show what is hidden
            # Never migrated (a stdio server that needs no database, say): no row can shape
            # anything. (Admin, which needs the tables, says so where it matters.)
            logger.debug("the registry tables are missing (manage.py migrate creates them): serving "
                         "the registry as code defines it")
            return self._build_from_rows(marker, rows=False)

    def _build_from_rows(self, marker: Any, rows: bool = True) -> Snapshot:
        from ..models import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate

        server = self.server
        code_version = server.registry_version
        settings = {(row.kind, row.name): row for row in
                    PrimitiveSetting.objects.filter(server=server.name).prefetch_related("groups")} \
            if rows else {}
        kinds = {"tools": "tool", "prompts": "prompt", "resources": "resource",
                 "resource_templates": "resource_template"}
        entries: dict[str, dict[str, tuple[Any, access.Access | None]]] = {kind: {} for kind in KINDS}
        renamed: list[tuple[Any, Any]] = []
        for kind, setting_kind in kinds.items():
            for key, primitive in list(getattr(server, kind).items()):
                setting = settings.get((setting_kind, key))
                if setting is None:
                    entries[kind][key] = (primitive, None)
                elif setting.enabled:
                    try:
                        shaped = stored.overridden(primitive, setting)
                    except ValueError as exc:
                        # Code changed under the administrator's curation: left out rather than
                        # served without its fixed arguments or restriction.
                        logger.error("%s is left out of the registry: %s", setting, exc)
                        continue
                    if kind == "tools" and shaped.name != key:
                        renamed.append((shaped, setting))
                    else:
                        entries[kind][key] = (shaped, _rule(setting))
        for shaped, setting in renamed:  # after every other tool: a name in use stays its tool's
            if shaped.name in entries["tools"]:
                logger.error("%s is left out of the registry: its exposed name %r is another tool's",
                             setting, shaped.name)
                continue
            entries["tools"][shaped.name] = (shaped, _rule(setting))
        defined = ((StoredPrompt, "prompts", stored.prompt_of, "name"),
                   (StoredResource, "resources", stored.resource_of, "uri"),
                   (StoredResourceTemplate, "resource_templates", stored.resource_template_of,
                    "uri_template"))
        for model, kind, build, key_field in defined if rows else ():
            for row in model.objects.filter(server=server.name, enabled=True).prefetch_related("groups"):
                key = getattr(row, key_field)
                if key not in entries[kind]:  # what code registers wins (admin forms refuse it)
                    entries[kind][key] = (build(row), _rule(row))
        contributor = ports.implementation(ports.RegistryContributor) if rows else None
        for kind, added in (contributor.stored_entries(server) if contributor is not None else {}).items():
            for key, (primitive, row) in added.items():
                if key not in entries[kind]:  # as above: code wins
                    entries[kind][key] = (primitive, _rule(row) if row is not None else None)
        restricted = any(rule is not None for kind in KINDS for _p, rule in entries[kind].values())
        snapshot = Snapshot(entries, code_version, marker, View(), restricted)
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
