"""A saved or deleted registry row reaches every process: once the transaction commits, each
process drops its snapshot (a channel-layer message, and the change counter in Django's cache)
and every connected session gets the matching ``list_changed``, once per save."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

logger = logging.getLogger("mcp_server.registry")

# Which list a row's change touches.
_LISTS = {"tool": "tools", "prompt": "prompts", "resource": "resources", "resource_template": "resources"}


def connect() -> None:
    """Hook the registry models' signals (the app's ready())."""
    from ..models import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate

    for model in (PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate):
        post_save.connect(_changed, sender=model, dispatch_uid=f"mcp-registry-save-{model.__name__}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"mcp-registry-delete-{model.__name__}")
        m2m_changed.connect(_groups_changed, sender=model.groups.through,
                            dispatch_uid=f"mcp-registry-groups-{model.__name__}")


def _changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    lists = {_list_of(instance)}
    server_name = instance.server
    transaction.on_commit(lambda: publish(server_name, lists))


def _groups_changed(sender: Any, instance: Any, action: str, **kwargs: Any) -> None:
    if action in ("post_add", "post_remove", "post_clear") and hasattr(instance, "server"):
        _changed(sender, instance)


def _list_of(instance: Any) -> str:
    from ..models import PrimitiveSetting, StoredPrompt

    if isinstance(instance, PrimitiveSetting):
        return _LISTS[instance.kind]
    return "prompts" if isinstance(instance, StoredPrompt) else "resources"


def publish(server_name: str, lists: set[str]) -> None:
    """Tell every process (blocking). Only the project's default server has the overlay."""
    from ..site import get_server, get_transport
    from .counter import mark_change

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
    except Exception as exc:  # the counter in the cache still gets the change there within a second
        logger.warning("telling the processes of a registry change failed: %s", exc)
    for name in sorted(lists):
        getattr(server, f"notify_{name}_list_changed")()
