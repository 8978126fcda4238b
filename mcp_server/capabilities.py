"""The server's capabilities object, built from a dict or with a builder."""

from __future__ import annotations

import copy
from typing import Any

DEFAULT_CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True},
    "logging": {},
}


class Capabilities:
    """Builds a capabilities object one feature at a time; ``to_dict()`` omits what was not set."""

    def __init__(self) -> None:
        self._caps: dict[str, Any] = {}

    def support_tools(self) -> Capabilities:
        self._caps.setdefault("tools", {})
        return self

    def support_tools_list_changed(self) -> Capabilities:
        self._caps.setdefault("tools", {})["listChanged"] = True
        return self

    def support_prompts(self) -> Capabilities:
        self._caps.setdefault("prompts", {})
        return self

    def support_prompts_list_changed(self) -> Capabilities:
        self._caps.setdefault("prompts", {})["listChanged"] = True
        return self

    def support_resources(self) -> Capabilities:
        self._caps.setdefault("resources", {})
        return self

    def support_resources_list_changed(self) -> Capabilities:
        self._caps.setdefault("resources", {})["listChanged"] = True
        return self

    def support_resources_subscribe(self) -> Capabilities:
        self._caps.setdefault("resources", {})["subscribe"] = True
        return self

    def support_logging(self) -> Capabilities:
        self._caps.setdefault("logging", {})
        return self

    def support_completions(self) -> Capabilities:
        self._caps.setdefault("completions", {})
        return self

    def support_experimental(self, config: dict[str, Any]) -> Capabilities:
        self._caps["experimental"] = dict(config)
        return self

    def support_extensions(self, extensions: dict[str, Any]) -> Capabilities:
        """Declare SEP-2133 extensions; repeated calls merge."""
        self._caps.setdefault("extensions", {}).update(extensions)
        return self

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._caps)

    to_h = to_dict


def normalize(capabilities: Capabilities | dict | None) -> dict[str, Any]:
    if capabilities is None:
        return copy.deepcopy(DEFAULT_CAPABILITIES)
    if isinstance(capabilities, Capabilities):
        return capabilities.to_dict()
    if isinstance(capabilities, dict):
        return copy.deepcopy(capabilities)
    raise TypeError("capabilities must be a dict or a Capabilities builder")
