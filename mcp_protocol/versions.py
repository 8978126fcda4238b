"""Protocol revisions and version negotiation.

Revision strings are ISO dates, so comparing them as strings orders them in time.
"""

from __future__ import annotations

STABLE_VERSIONS: tuple[str, ...] = (
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
# Derived, so the two tables cannot drift apart.
HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(v for v in STABLE_VERSIONS if v not in MODERN_VERSIONS)

LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]
# What a Streamable HTTP server assumes when the MCP-Protocol-Version header is absent.
DEFAULT_NEGOTIATED_VERSION = "2025-03-26"


def is_handshake_version(version: object) -> bool:
    return isinstance(version, str) and version in HANDSHAKE_VERSIONS


def is_modern_version(version: object) -> bool:
    return isinstance(version, str) and version in MODERN_VERSIONS


def negotiate(requested: object, pinned: str | None = None) -> str:
    """The revision the server answers an ``initialize`` with.

    A supported handshake revision is echoed back (up to the pinned one, when a pin is set);
    anything else, including the modern revision, is counter-offered the pin or the latest
    handshake revision.
    """
    ceiling = pinned or LATEST_HANDSHAKE_VERSION
    if is_handshake_version(requested) and requested <= ceiling:  # type: ignore[operator]
        return requested  # type: ignore[return-value]
    return ceiling


def at_most(version: str, other: str) -> bool:
    """True when ``version`` is the same revision as ``other`` or an older one."""
    return version <= other
