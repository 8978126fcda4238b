"""The notification filter of a ``subscriptions/listen`` request (SEP-2575): what the client asked
for, checked (LSN-01), narrowed to what the server declared (LSN-02), and matched against each
notification a listen stream is offered (LSN-04)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_protocol import methods
from mcp_protocol.errors import INVALID_PARAMS, MCPError
from mcp_protocol.subscriptions import LIST_FLAGS as FLAGS
from mcp_protocol.subscriptions import RESOURCE_SUBSCRIPTIONS, declared

# The Tasks extension's filter key: the tasks whose notifications/tasks the stream wants.
TASK_IDS = "taskIds"
# Every notification a listen stream can carry (a log message, say, is none of them).
LISTENABLE = frozenset({method for _capability, _feature, method in FLAGS.values()}
                       | {methods.NOTIFICATIONS_RESOURCES_UPDATED, methods.NOTIFICATIONS_TASKS})


def _bad(message: str) -> MCPError:
    return MCPError(f"Invalid params: {message}", code=INVALID_PARAMS)


def parse_requested(params: Any, max_uris: int | None = None) -> dict[str, Any]:
    """The filter of ``params.notifications``; -32602 when it is missing or malformed, or names
    more than ``max_uris`` resources (each stream keeps its URIs for its whole life).

    Keys the revision does not define are ignored, as its schema lets a newer client send them.
    """
    notifications = params.get("notifications") if isinstance(params, dict) else None
    if not isinstance(notifications, dict):
        raise _bad("subscriptions/listen needs params.notifications, an object")
    requested: dict[str, Any] = {}
    for flag in FLAGS:
        if flag in notifications:
            if not isinstance(notifications[flag], bool):
                raise _bad(f"notifications.{flag} must be a boolean")
            requested[flag] = notifications[flag]
    for key, what in ((RESOURCE_SUBSCRIPTIONS, ("URI", "resources")), (TASK_IDS, ("task id", "tasks"))):
        if key in notifications:
            requested[key] = _strings(notifications[key], key, what, max_uris)
    return requested


def _strings(values: Any, key: str, what: tuple[str, str], limit: int | None) -> list[str]:
    """A list of strings naming at most ``limit`` different things (``what``: one, several)."""
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise _bad(f"notifications.{key} must be an array of {what[0]} strings")
    if limit is not None and len(set(values)) > limit:
        raise MCPError(f"Invalid params: notifications.{key} names {len(set(values))} {what[1]}, "
                       f"more than the {limit} allowed", code=INVALID_PARAMS, data={"limit": limit})
    return values


@dataclass(frozen=True)
class ListenFilter:
    """What one listen stream delivers: the honoured part of its request."""

    methods: frozenset[str]
    uris: frozenset[str] | None  # None: no resourceSubscriptions honoured
    wire: dict[str, Any]  # as the acknowledgement states it
    task_ids: frozenset[str] = frozenset()

    def wants(self, message: dict) -> bool:
        method = message.get("method")
        params = message.get("params")
        if method == methods.NOTIFICATIONS_RESOURCES_UPDATED:
            uri = params.get("uri") if isinstance(params, dict) else None
            return self.uris is not None and uri in self.uris
        if method == methods.NOTIFICATIONS_TASKS:
            return isinstance(params, dict) and params.get("taskId") in self.task_ids
        return method in self.methods


def honour(requested: dict[str, Any], capabilities: dict[str, Any]) -> ListenFilter:
    """Requested ∩ declared: a flag the server's capabilities do not back is left out (LSN-02)."""
    wire: dict[str, Any] = {}
    wanted = set()
    for flag, (capability, feature, method) in FLAGS.items():
        if requested.get(flag) and declared(capabilities, capability, feature):
            wire[flag] = True
            wanted.add(method)
    uris = None
    if RESOURCE_SUBSCRIPTIONS in requested and declared(capabilities, "resources", "subscribe"):
        # Kept in the order asked, once each: the acknowledgement repeats them.
        ordered = list(dict.fromkeys(requested[RESOURCE_SUBSCRIPTIONS]))
        uris = frozenset(ordered)
        wire[RESOURCE_SUBSCRIPTIONS] = ordered
    task_ids: list[str] = []
    if TASK_IDS in requested and isinstance(capabilities.get("extensions"), dict) \
            and methods.TASKS_EXTENSION in capabilities["extensions"]:
        # Only the tasks the caller may see are honoured (serve_listen narrowed the list).
        task_ids = list(dict.fromkeys(requested[TASK_IDS]))
        wire[TASK_IDS] = task_ids
    return ListenFilter(frozenset(wanted), uris, wire, frozenset(task_ids))
