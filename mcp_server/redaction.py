"""What the audit trail and span attributes keep of a call's arguments and results: one policy.

``MCP_SERVER["REDACTED_KEYS"]`` names the keys whose values are replaced, at any depth
(case-insensitive, and a key containing a name counts: ``db_password``); a project with other
rules names its own ``REDACTION_POLICY(name, value) -> value``. ``digest`` fingerprints the
arguments before redaction, so that two calls with the same secret can be matched without it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .settings import mcp_settings

REDACTED = "[REDACTED]"


def redact(name: str, value: Any) -> Any:
    """``value`` (the arguments or result of the tool, prompt or resource ``name``) as the
    project's policy lets it be kept."""
    policy = mcp_settings.REDACTION_POLICY
    if policy is not None:
        return policy(name, value)
    return redact_keys(value, mcp_settings.REDACTED_KEYS)


def redact_keys(value: Any, keys: list[str] | tuple[str, ...]) -> Any:
    """A copy of ``value`` with the value of every mapping key that contains one of ``keys``
    (case-insensitive) replaced by ``[REDACTED]``, at any depth."""
    needles = tuple(key.lower() for key in keys)
    return _redacted(value, needles) if needles else value


def _redacted(value: Any, needles: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {key: REDACTED if _sensitive(key, needles) else _redacted(item, needles)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, needles) for item in value]
    return value


def _sensitive(key: Any, needles: tuple[str, ...]) -> bool:
    lowered = str(key).lower()
    return any(needle in lowered for needle in needles)


def digest(value: Any) -> str:
    """A SHA-256 of ``value`` as canonical JSON (sorted keys, no spaces): the same arguments give
    the same digest on every process."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
