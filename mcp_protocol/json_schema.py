"""JSON Schema 2020-12 handling: resource bounds, metaschema checks and cached validators.

Only same-document references are allowed, so validation never touches the network or disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as _JsonSchemaError

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
MAX_SCHEMA_DEPTH = 64
MAX_SUBSCHEMA_COUNT = 10_000
VALIDATOR_CACHE_SIZE = 1000

# Root keywords that already say what the root is; without any, a tool schema is an object.
ROOT_SHAPE_KEYWORDS = ("type", "$ref", "oneOf", "anyOf", "allOf", "not", "if", "const", "enum")


class SchemaError(ValueError):
    """A schema that is not a valid, bounded JSON Schema 2020-12 document."""


def check_schema(schema: Any) -> None:
    """Raise :class:`SchemaError` unless ``schema`` is a bounded, self-contained 2020-12 schema."""
    if not isinstance(schema, dict | bool):
        raise SchemaError(f"a JSON Schema must be an object or a boolean, not {type(schema).__name__}")
    _check_bounds(schema)
    _validator(_canonical(schema))


def _check_bounds(schema: Any) -> None:
    _check_depth(schema)
    count = 0
    # Only schema positions are walked: data keywords (const, enum, default, examples) and
    # property names such as "$ref" inside "properties" are not schemas.
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        count += 1
        if count > MAX_SUBSCHEMA_COUNT:
            raise SchemaError(f"schema has more than MAX_SUBSCHEMA_COUNT ({MAX_SUBSCHEMA_COUNT}) subschemas")
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
                raise SchemaError(
                    f"only same-document references are allowed: {keyword} {ref!r} must start with '#'"
                )
        stack.extend(_subschemas(node))


_SCHEMA_KEYWORDS = ("additionalProperties", "items", "contains", "propertyNames", "not", "if",
                    "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
                    "additionalItems")
_SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions",
                        "dependentSchemas", "dependencies")


def _subschemas(node: dict) -> list[Any]:
    found: list[Any] = []
    for keyword in _SCHEMA_KEYWORDS:
        if isinstance(node.get(keyword), dict):
            found.append(node[keyword])
    for keyword in _SCHEMA_LIST_KEYWORDS:
        if isinstance(node.get(keyword), list):
            found.extend(node[keyword])
    for keyword in _SCHEMA_MAP_KEYWORDS:
        if isinstance(node.get(keyword), dict):
            found.extend(node[keyword].values())
    return found


def _check_depth(document: Any) -> None:
    """The JSON nesting of the whole document is bounded, whatever its keywords."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"schema is nested deeper than MAX_SCHEMA_DEPTH ({MAX_SCHEMA_DEPTH})")
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=VALIDATOR_CACHE_SIZE)
def _validator(canonical: str) -> Draft202012Validator:
    schema = json.loads(canonical)
    try:
        Draft202012Validator.check_schema(schema)
    except _JsonSchemaError as exc:
        raise SchemaError(f"invalid JSON Schema: {exc.message}") from None
    return Draft202012Validator(schema)


# Keywords that only annotate: they never make an instance invalid.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly",
                          "writeOnly", "$comment", "$schema"})
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "number": lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
}


@lru_cache(maxsize=VALIDATOR_CACHE_SIZE)
def _quick_check(canonical: str) -> Callable[[Any], bool] | None:
    """For the usual tool schema (an object of typed properties, some required), a check that
    says True only when the instance conforms, without jsonschema's validator machinery (most of
    the CPU of validating a small ``tools/call``). None for any other schema; False means "ask
    jsonschema" (1.0 is an integer to it, say), which also writes the messages."""
    schema = json.loads(canonical)
    if not isinstance(schema, dict) or schema.get("type") != "object" or \
            set(schema) - {"type", "properties", "required", "additionalProperties"} - _ANNOTATIONS:
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or \
            not all(isinstance(name, str) for name in required) or not isinstance(additional, bool):
        return None
    checks: dict[str, tuple[Callable[[Any], bool], ...] | None] = {}
    for name, subschema in properties.items():
        if subschema is True:
            checks[name] = None
            continue
        if not isinstance(subschema, dict) or set(subschema) - {"type"} - _ANNOTATIONS:
            return None
        kind = subschema.get("type")
        kinds = [kind] if isinstance(kind, str) else kind
        if kind is None:
            checks[name] = None
        elif isinstance(kinds, list) and kinds and all(k in _TYPE_CHECKS for k in kinds):
            checks[name] = tuple(_TYPE_CHECKS[k] for k in kinds)
        else:
            return None

    def conforms(instance: Any) -> bool:
        if not isinstance(instance, dict) or any(name not in instance for name in required):
            return False
        for key, value in instance.items():
            if key in checks:
                allowed = checks[key]
                if allowed is not None and not any(check(value) for check in allowed):
                    return False
            elif not additional:
                return False
        return True

    return conforms


def canonical_text(schema: Any) -> str:
    """``schema`` as the key of the validators kept: give it to :func:`validation_errors` when the
    same schema is checked again and again (a tool's, on every call)."""
    return _canonical(schema)


def validation_errors(schema: Any, instance: Any, canonical: str | None = None) -> list[str]:
    """Readable messages for every way ``instance`` fails ``schema`` (empty when it conforms).
    ``canonical`` is :func:`canonical_text` of ``schema``, if the caller keeps it."""
    if canonical is None:
        canonical = _canonical(schema)
    quick = _quick_check(canonical)
    if quick is not None and quick(instance):
        return []
    validator = _validator(canonical)
    messages = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(part) for part in error.absolute_path)
        messages.append(f"{where}: {error.message}" if where else error.message)
    return messages


def with_draft(schema: dict) -> dict:
    """The schema with ``$schema`` set to Draft 2020-12 unless it names one already."""
    if "$schema" in schema:
        return schema
    return {"$schema": DRAFT_2020_12, **schema}
