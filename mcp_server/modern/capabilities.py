"""The client-capability guard of a modern handler (MOD-10)."""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY, MCPError


class MissingRequiredClientCapabilityError(MCPError):
    """-32021: the request needs a client capability the client did not declare (SEP-2575).

    ``data.requiredCapabilities`` is a ClientCapabilities object naming what is missing, such as
    ``{"elicitation": {"form": {}}}``.
    """

    code = MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, path: tuple[str, ...]):
        required: dict[str, Any] = {}
        node = required
        for part in path:
            node = node.setdefault(part, {})
        super().__init__(f"Missing required client capability: {'.'.join(path)}",
                         data={"requiredCapabilities": required})
        self.path = path


def declares(capabilities: dict, path: tuple[str, ...]) -> bool:
    """Whether ``capabilities`` holds an object at ``path``.

    ``elicitation.form`` is implied by a bare ``elicitation: {}`` (clients from before modes).
    """
    node: Any = capabilities
    for depth, part in enumerate(path):
        if depth == 1 and path[0] == "elicitation" and part == "form" and "url" not in node:
            return True
        section = node.get(part) if isinstance(node, dict) else None
        if not isinstance(section, dict):
            return False
        node = section
    return True
