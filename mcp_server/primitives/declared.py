"""Which arguments an input schema declares: what a background call keeps of its arguments.

JSON Schema lets an object carry properties its schema never names (``additionalProperties``
defaults to allowing them), so a tool's arguments may hold anything a client adds. A background
call stores its arguments and runs later elsewhere: only what the schema declares is kept. A
property is declared by ``properties`` or ``patternProperties`` at the root or in a subschema that
applies to the root object itself (``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else``,
``dependentSchemas``, same-document ``$ref``); a schema that admits other properties on purpose
(``additionalProperties`` or ``unevaluatedProperties`` other than ``false``), or that cannot be
read this way (an anchor reference, a pattern Python cannot compile), declares every one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Subschemas that describe the same instance as the schema holding them.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("if", "then", "else")
_OPEN_KEYWORDS = ("additionalProperties", "unevaluatedProperties")


@dataclass(frozen=True)
class Declared:
    """The property names and patterns a schema declares; ``everything`` when it admits any."""

    names: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]
    everything: bool

    def keep(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` without what the schema does not declare."""
        if self.everything:
            return dict(arguments)
        return {name: value for name, value in arguments.items()
                if name in self.names or any(pattern.search(name) for pattern in self.patterns)}


def declared_by(schema: dict[str, Any]) -> Declared:
    names: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    stack: list[Any] = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if any(keyword in node and node[keyword] is not False for keyword in _OPEN_KEYWORDS) \
                or "$dynamicRef" in node:
            return Declared(frozenset(), (), everything=True)
        properties = node.get("properties")
        if isinstance(properties, dict):
            names.update(properties)
        for source in (node.get("patternProperties") or {}):
            try:
                patterns.append(re.compile(source))
            except re.error:
                return Declared(frozenset(), (), everything=True)
        for keyword in _IN_PLACE_LISTS:
            if isinstance(node.get(keyword), list):
                stack.extend(node[keyword])
        stack.extend(node.get(keyword) for keyword in _IN_PLACE_ONE)
        if isinstance(node.get("dependentSchemas"), dict):
            stack.extend(node["dependentSchemas"].values())
        reference = node.get("$ref")
        if reference is not None:
            target = _resolve(schema, reference)
            if target is None:
                return Declared(frozenset(), (), everything=True)
            stack.append(target)
    return Declared(frozenset(names), tuple(patterns), everything=False)


def _resolve(root: dict[str, Any], reference: Any) -> Any:
    """The subschema a same-document JSON Pointer names (``#/$defs/point``); None otherwise."""
    if not isinstance(reference, str) or not (reference == "#" or reference.startswith("#/")):
        return None
    node: Any = root
    for token in reference[2:].split("/") if reference != "#" else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node
