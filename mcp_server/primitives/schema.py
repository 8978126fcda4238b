"""Tool input and output schemas (JSON Schema 2020-12), checked when they are defined."""

from __future__ import annotations

from typing import Any

from mcp_protocol.json_schema import (
    ROOT_SHAPE_KEYWORDS,
    canonical_text,
    check_schema,
    validation_errors,
    with_draft,
)
from mcp_protocol.param_headers import header_paths

from ..errors import SchemaValidationError
from .declared import Declared, declared_by


class _Schema:
    def __init__(self, schema: dict | None = None, **keywords: Any):
        if schema is not None and keywords:
            raise TypeError("give the schema as one dict or as keywords, not both")
        raw = dict(schema if schema is not None else keywords)
        self.schema: dict[str, Any] = self._with_root(raw)
        check_schema(self.schema)
        self._canonical: str | None = None

    def _with_root(self, schema: dict) -> dict:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return with_draft(self.schema)

    def errors(self, instance: Any) -> list[str]:
        # The schema's text is the validator cache's key; made once, as the schema does not
        # change after its tool is defined (a change makes a new schema object).
        if self._canonical is None:
            self._canonical = canonical_text(self.schema)
        return validation_errors(self.schema, instance, self._canonical)

    def uses_ref(self) -> bool:
        return _has_key(self.schema, "$ref")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and other.schema == self.schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.schema!r})"


class InputSchema(_Schema):
    """The arguments a tool takes; the root is always an object."""

    _required: tuple[str, ...] | None = None  # the required names, read at the first call

    def __init__(self, schema: dict | None = None, **keywords: Any):
        super().__init__(schema, **keywords)
        # Checked now, so a bad annotation fails at import time; kept for the HTTP checks.
        self.header_paths = header_paths(self.schema)
        self._declared: Declared | None = None

    def _with_root(self, schema: dict) -> dict:
        if schema.get("type", "object") != "object":
            raise ValueError("a tool's input schema must have type 'object' at the root")
        return {"type": "object", **schema}

    @property
    def required(self) -> list[str]:
        return list(self.schema.get("required", []))

    def missing_required(self, arguments: dict) -> list[str]:
        # Read once, as the schema does not change once its tool is defined (see errors()).
        required = self._required
        if required is None:
            required = self._required = tuple(self.schema.get("required", []))
        return [name for name in required if name not in arguments]

    def declared(self, arguments: dict) -> dict:
        """``arguments`` without those this schema does not declare (see ``declared.py``): what a
        background call keeps and runs with."""
        if self._declared is None:
            self._declared = declared_by(self.schema)
        return self._declared.keep(arguments)


class OutputSchema(_Schema):
    """The structured content a tool returns; any 2020-12 root (SEP-2106), object by default."""

    def _with_root(self, schema: dict) -> dict:
        if any(keyword in schema for keyword in ROOT_SHAPE_KEYWORDS):
            return schema
        return {"type": "object", **schema}

    def validate_result(self, data: Any) -> None:
        """Raise :class:`SchemaValidationError` when ``data`` does not conform."""
        errors = self.errors(data)
        if errors:
            raise SchemaValidationError(errors)


def _has_key(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_has_key(value, key) for value in node.values())
    if isinstance(node, list):
        return any(_has_key(value, key) for value in node)
    return False


def input_schema(value: Any) -> InputSchema:
    if isinstance(value, InputSchema):
        return value
    if value is None:
        return InputSchema({})
    if isinstance(value, dict):
        return InputSchema(value)
    raise TypeError(f"input_schema must be a dict or InputSchema, not {type(value).__name__}")


def output_schema(value: Any) -> OutputSchema | None:
    if value is None or isinstance(value, OutputSchema):
        return value
    if isinstance(value, dict):
        return OutputSchema(value)
    raise TypeError(f"output_schema must be a dict or OutputSchema, not {type(value).__name__}")
