"""A saved or deleted registry row reaches every process: once the transaction commits, each
process drops its snapshot (a channel-layer message, and the change marker of
``registry/counter.py``) and every connected session gets the matching ``list_changed``, once per
save. The app's ``ready()`` connects the models' signals here."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from .settings import mcp_settings

logger = logging.getLogger("mcp_server.registry")

# Which list a row's change touches.
_LISTS = {"tool": "tools", "prompt": "prompts", "resource": "resources", "resource_template": "resources"}
# Per thread: (database alias, server) -> the lists a transaction changed, and its commit callback.
_pending = threading.local()


def connect() -> None:
    """Hook the registry models' signals (the app's ready())."""
    from .models import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate, StoredSkill

    for model in (PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate, StoredSkill):
        post_save.connect(_changed, sender=model, dispatch_uid=f"mcp-registry-save-{model.__name__}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"mcp-registry-delete-{model.__name__}")
        m2m_changed.connect(_groups_changed, sender=model.groups.through,
                            dispatch_uid=f"mcp-registry-groups-{model.__name__}")


def _changed(sender: Any, instance: Any, using: str | None = None, **kwargs: Any) -> None:
    announce(instance.server, {_list_of(instance)}, using=using)


def list_of_kind(kind: str) -> str:
    """The list (``tools``, ``prompts``, ``resources``) of a ``PrimitiveSetting`` kind."""
    return _LISTS[kind]


def announce(server_name: str, lists: set[str], using: str | None = None) -> None:
    """Publish once the transaction commits. The changes of one transaction are announced
    together, once: a row and its groups saved by one admin form are one save, not three."""
    connection = transaction.get_connection(using)
    if not connection.in_atomic_block:
        publish(server_name, set(lists))  # autocommit: already committed
        return
    pending = getattr(_pending, "lists", None)
    if pending is None:
        pending = _pending.lists = {}
    key = (connection.alias, server_name)
    entry = pending.get(key)
    # A rolled back transaction dropped its callback: that entry is stale.
    if entry is not None and any(item[1] is entry[1] for item in connection.run_on_commit):
        entry[0].update(lists)
        return

    def commit() -> None:
        if pending.get(key) is entry_now:
            del pending[key]
        publish(server_name, entry_now[0])

    entry_now = pending[key] = (set(lists), commit)
    transaction.on_commit(commit, using=connection.alias)


def _groups_changed(sender: Any, instance: Any, action: str, **kwargs: Any) -> None:
    if action in ("post_add", "post_remove", "post_clear") and hasattr(instance, "server"):
        _changed(sender, instance, using=kwargs.get("using"))


def _list_of(instance: Any) -> str:
    from .models import PrimitiveSetting, StoredPrompt

    if isinstance(instance, PrimitiveSetting):
        return _LISTS[instance.kind]
    # A skill's files are resources: its change is the resources list's (its SKILL.md is listed).
    return "prompts" if isinstance(instance, StoredPrompt) else "resources"


def publish(server_name: str, lists: set[str]) -> None:
    """Tell every process (blocking). Only the project's default server has the overlay."""
    from .registry.counter import mark_change
    from .site import get_server, get_transport

    server = get_server()
    if server.name != server_name:
        return
    get_transport()  # the server's HTTP transport, whose shared state holds the change marker
    mark_change(server)
    if server.overlay is not None:
        server.overlay.invalidate()
    try:
        # Before the list_changed below, on the same group: each process drops its snapshot first.
        async_to_sync(get_transport().tell_every_process)({"type": "mcp.registry"})
    except Exception as exc:  # the change marker still gets it there within a second
        logger.warning("telling the processes of a registry change failed: %s", exc)
    for name in sorted(lists):
        _list_changes.announce(server, name)


class ListChanges:
    """At most one ``list_changed`` per list every ``MCP_SERVER["LIST_CHANGED_MIN_INTERVAL"]``
    seconds from this process: a change of a quiet list is announced at once, and the changes
    that follow within the interval once, when it ends. Thirty saves in a loop are then two
    notifications for every session, not thirty; none is lost, as the last one always follows
    the last change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_sent: dict[tuple[str, str], float] = {}
        self._pending: dict[tuple[str, str], threading.Timer] = {}

    def announce(self, server: Any, name: str) -> None:
        interval = mcp_settings.LIST_CHANGED_MIN_INTERVAL or 0
        key = (server.name, name)
        with self._lock:
            if key in self._pending:
                return  # the one at the end of the interval announces this change too
            waited = time.monotonic() - self._last_sent.get(key, float("-inf"))
            if waited < interval:
                timer = self._pending[key] = threading.Timer(interval - waited, self._send_pending,
                                                             (server, name))
                timer.daemon = True
                timer.start()
                return
            self._last_sent[key] = time.monotonic()
        _notify(server, name)

    def _send_pending(self, server: Any, name: str) -> None:
        with self._lock:
            self._pending.pop((server.name, name), None)
            self._last_sent[(server.name, name)] = time.monotonic()
        _notify(server, name)


def _notify(server: Any, name: str) -> None:
    getattr(server, f"notify_{name}_list_changed")()


_list_changes = ListChanges()
