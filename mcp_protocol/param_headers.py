"""``x-mcp-header``: tool arguments mirrored into ``Mcp-Param-{Name}`` headers (SEP-2243).

The annotation is valid only as the spec constrains it: an HTTP token, unique case-insensitively
within the schema, on a string, integer or boolean property reachable from the root through
``properties`` alone. A schema breaking any of these is refused when the tool is defined.
"""

from __future__ import annotations

import re
from typing import Any

ANNOTATION = "x-mcp-header"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES = ("string", "integer", "boolean")


def header_paths(schema: dict) -> dict[str, tuple[str, ...]]:
    """``x-mcp-header`` name (lower case) to the chain of ``properties`` keys leading to it.

    Raises ValueError naming the first annotation that breaks the rules.
    """
    found: dict[str, tuple[str, ...]] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            return
        for key, sub in properties.items():
            if not isinstance(sub, dict):
                continue
            if ANNOTATION in sub:
                where = ".".join((*path, key))
                name = sub[ANNOTATION]
                if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                    raise ValueError(f"{ANNOTATION} of {where!r} must be an HTTP token, not {name!r}")
                if sub.get("type") not in _HEADER_TYPES:
                    raise ValueError(f"{ANNOTATION} of {where!r} needs type string, integer or "
                                     f"boolean, not {sub.get('type')!r}")
                if name.lower() in found:
                    raise ValueError(f"{ANNOTATION} {name!r} is used twice (names are case-insensitive)")
                found[name.lower()] = (*path, key)
            walk(sub, (*path, key))

    walk(schema, ())
    if _annotations(schema) != len(found):
        raise ValueError(f"{ANNOTATION} may only annotate properties reachable from the root "
                         "through 'properties' alone (not items, $defs, $ref or composition)")
    return found


def _annotations(node: Any, in_properties: bool = False) -> int:
    """Every ``x-mcp-header`` keyword in ``node`` (a property merely named so does not count)."""
    if isinstance(node, list):
        return sum(_annotations(item) for item in node)
    if not isinstance(node, dict):
        return 0
    count = 0
    for key, value in node.items():
        if key == ANNOTATION and not in_properties:
            count += 1
        count += _annotations(value, in_properties=key == "properties" and not in_properties)
    return count
