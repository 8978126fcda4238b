"""What a client declared, and the guards that hold a handler to it: -32021 on a modern request
(MOD-10), and the capability a server-to-client request needs on a handshake-era session."""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY, MCPError

from .errors import ClientCapabilityError


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


# The first revision whose wire carries each of these; an older session is never sent them, even
# when its client declares the capability (the message would not be valid on its wire).
_FIRST_REVISION = {
    "elicitation": "2025-06-18",
    "elicitation.form": "2025-06-18",
    "elicitation.url": "2025-11-25",
    "sampling.tools": "2025-11-25",
}


def revision_has(protocol_version: str | None, capability: str) -> bool:
    """Whether the wire of ``protocol_version`` (None: any) can carry what ``capability`` names."""
    first = _FIRST_REVISION.get(capability)
    return first is None or protocol_version is None or protocol_version >= first


def require_client_capability(capabilities: dict, protocol_version: str | None, method: str,
                              capability: str) -> None:
    """Raise :class:`ClientCapabilityError` unless ``method`` may be sent to this client."""
    if not revision_has(protocol_version, capability):
        raise ClientCapabilityError(method, capability, protocol_version)
    if not client_declares(capabilities, capability):
        raise ClientCapabilityError(method, capability)


def client_declares(capabilities: dict, path: str) -> bool:
    """Whether a client's capabilities include ``path`` such as ``"sampling.tools"``.

    ``elicitation.form`` is implied by a bare ``elicitation: {}`` (clients from before modes).
    """
    return declares(capabilities, tuple(path.split(".")))
