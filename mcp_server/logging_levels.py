"""The eight syslog severities of ``notifications/message``, least severe first."""

from mcp_protocol.log_levels import LEVELS

__all__ = ["LEVELS", "is_level", "passes"]
_RANK = {level: rank for rank, level in enumerate(LEVELS)}


def is_level(value: object) -> bool:
    return isinstance(value, str) and value in _RANK


def passes(level: str, threshold: str | None) -> bool:
    """Whether a message at ``level`` is sent to a peer that asked for ``threshold``.

    Nothing is sent until the client has set a level.
    """
    return threshold is not None and _RANK[level] >= _RANK[threshold]
