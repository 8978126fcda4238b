"""Helpers for answering ``elicitation/create``."""

from __future__ import annotations

from typing import Any


def apply_defaults(requested_schema: dict, content: dict | None = None) -> dict[str, Any]:
    """``content`` with every field the user left out filled from the schema's ``default``
    (SEP-1034); values that were given are never replaced."""
    filled = dict(content or {})
    for name, prop in (requested_schema or {}).get("properties", {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled
