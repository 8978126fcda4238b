"""The notification filter of ``subscriptions/listen`` (SEP-2575, 2026-07-28), as both sides read it:
each list flag, the capability that backs it and the notification it opts in to."""

from __future__ import annotations

from . import methods

# Filter flag -> (capability, its sub-capability that must be declared, the notification it opts in to).
LIST_FLAGS: dict[str, tuple[str, str, str]] = {
    "toolsListChanged": ("tools", "listChanged", methods.NOTIFICATIONS_TOOLS_LIST_CHANGED),
    "promptsListChanged": ("prompts", "listChanged", methods.NOTIFICATIONS_PROMPTS_LIST_CHANGED),
    "resourcesListChanged": ("resources", "listChanged", methods.NOTIFICATIONS_RESOURCES_LIST_CHANGED),
}
# The filter key listing the resource URIs whose notifications/resources/updated the client wants;
# backed by the resources.subscribe capability.
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"


def declared(capabilities: dict, capability: str, feature: str) -> bool:
    """Whether ``capabilities`` declares ``capability.feature`` (``tools.listChanged``, say)."""
    entry = capabilities.get(capability)
    return isinstance(entry, dict) and bool(entry.get(feature))
