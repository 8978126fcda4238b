"""Elicitation form schemas: the ``EnumSchema`` builders, the flat-schema rule, and the check
of what a client accepted against the schema it was asked to fill.

A form's ``requestedSchema`` is an object whose properties are primitives only (string, number,
integer, boolean, or a single- or multi-select enum), so that any client can render it as a form.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import InvalidParamsError
from mcp_protocol.json_schema import check_schema, validation_errors

STRING_FORMATS = ("date", "date-time", "email", "uri")
_COMMON = ("title", "description")
_ALLOWED = {
    "string": {"type", "title", "description", "default", "format", "minLength", "maxLength",
               "enum", "enumNames", "oneOf"},
    "number": {"type", "title", "description", "default", "minimum", "maximum"},
    "integer": {"type", "title", "description", "default", "minimum", "maximum"},
    "boolean": {"type", "title", "description", "default"},
    "array": {"type", "title", "description", "default", "items", "minItems", "maxItems"},
}


def _annotated(schema: dict, default: Any, title: str | None, description: str | None) -> dict:
    if title is not None:
        schema["title"] = title
    if description is not None:
        schema["description"] = description
    if default is not None:
        schema["default"] = default
    return schema


def _strings(values: Any, what: str) -> list[str]:
    if not isinstance(values, list | tuple) or not values or \
            not all(isinstance(v, str) for v in values):
        raise ValueError(f"{what} must be a non-empty list of strings, not {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat a value: {values!r}")
    return list(values)


def _options(options: Any) -> list[dict]:
    """``[{"const": v, "title": t}]`` from dicts or ``(value, title)`` pairs."""
    if not isinstance(options, list | tuple) or not options:
        raise ValueError("options must be a non-empty list of {const, title} or (value, title)")
    normalized = []
    for option in options:
        if isinstance(option, dict):
            value, title = option.get("const"), option.get("title")
        elif isinstance(option, list | tuple) and len(option) == 2:
            value, title = option
        else:
            raise ValueError(f"an option is {{const, title}} or (value, title), not {option!r}")
        if not isinstance(value, str) or not isinstance(title, str):
            raise ValueError(f"option value and title must be strings: {option!r}")
        normalized.append({"const": value, "title": title})
    _strings([o["const"] for o in normalized], "option values")
    return normalized


def _check_default_in(default: Any, allowed: list[str], many: bool) -> None:
    if default is None:
        return
    chosen = default if many else [default]
    if many and not isinstance(default, list):
        raise ValueError(f"a multi-select default must be a list, not {default!r}")
    unknown = [d for d in chosen if d not in allowed]
    if unknown:
        raise ValueError(f"default {unknown!r} is not among the values {allowed!r}")


class EnumSchema:
    """Builders for the enum property shapes of SEP-1330."""

    @staticmethod
    def untitled_single_select(values: list[str], *, default: str | None = None,
                               title: str | None = None, description: str | None = None) -> dict:
        values = _strings(values, "values")
        _check_default_in(default, values, many=False)
        return _annotated({"type": "string", "enum": values}, default, title, description)

    @staticmethod
    def titled_single_select(options: list, *, default: str | None = None,
                             title: str | None = None, description: str | None = None) -> dict:
        one_of = _options(options)
        _check_default_in(default, [o["const"] for o in one_of], many=False)
        return _annotated({"type": "string", "oneOf": one_of}, default, title, description)

    @staticmethod
    def untitled_multi_select(values: list[str], *, default: list[str] | None = None,
                              title: str | None = None, description: str | None = None) -> dict:
        values = _strings(values, "values")
        _check_default_in(default, values, many=True)
        schema = {"type": "array", "items": {"type": "string", "enum": values}}
        return _annotated(schema, default, title, description)

    @staticmethod
    def titled_multi_select(options: list, *, default: list[str] | None = None,
                            title: str | None = None, description: str | None = None) -> dict:
        any_of = _options(options)
        _check_default_in(default, [o["const"] for o in any_of], many=True)
        schema = {"type": "array", "items": {"anyOf": any_of}}
        return _annotated(schema, default, title, description)

    @staticmethod
    def legacy_titled(values: list[str], value_titles: list[str], *, default: str | None = None,
                      title: str | None = None, description: str | None = None) -> dict:
        values = _strings(values, "values")
        if not isinstance(value_titles, list | tuple) or len(value_titles) != len(values) or \
                not all(isinstance(t, str) for t in value_titles):
            raise ValueError("value_titles must be strings, one for each value")
        _check_default_in(default, values, many=False)
        schema = {"type": "string", "enum": values, "enumNames": list(value_titles)}
        return _annotated(schema, default, title, description)


# Multi-select (array) fields arrived with SEP-1330 in this revision; older wires cannot carry them.
MULTI_SELECT_SINCE = "2025-11-25"


def check_requested_schema(schema: Any, protocol_version: str | None = None) -> dict:
    """Raise ``ValueError`` unless ``schema`` is a flat form schema; returns it.

    ``protocol_version`` is the session's revision, when known: before 2025-11-25 a form has no
    multi-select fields.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("requested_schema must be an object schema with type 'object'")
    # Every revision's schema requires "properties" (an empty form is {"properties": {}}).
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise ValueError("requested_schema needs a 'properties' object")
    for name, prop in properties.items():
        _check_property(name, prop)
        if prop["type"] == "array" and protocol_version is not None \
                and protocol_version < MULTI_SELECT_SINCE:
            raise ValueError(f"property {name!r}: multi-select fields need protocol revision "
                             f"{MULTI_SELECT_SINCE} (this session uses {protocol_version})")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise ValueError(f"requested_schema required names unknown properties: {required!r}")
    # A valid JSON Schema too (a negative minLength, say), so the answer can be checked against it.
    check_schema(schema)
    return schema


def _check_property(name: str, prop: Any) -> None:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if not isinstance(kind, str) or kind not in _ALLOWED:  # a list of types is not hashable
        raise ValueError(
            f"property {name!r}: form fields are string, number, integer, boolean or an enum "
            f"array, not {kind!r} (nested objects are not allowed)"
        )
    extra = set(prop) - _ALLOWED[kind]
    if extra:
        raise ValueError(f"property {name!r}: keywords {sorted(extra)} are not allowed in a form")
    if kind == "string" and "format" in prop and prop["format"] not in STRING_FORMATS:
        raise ValueError(f"property {name!r}: format must be one of {STRING_FORMATS}")
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict) or not (
            (items.get("type") == "string" and isinstance(items.get("enum"), list))
            or isinstance(items.get("anyOf"), list)
        ):
            raise ValueError(f"property {name!r}: an array field must be a multi-select enum")
    default = prop.get("default")
    expected = {"string": str, "number": (int, float), "integer": int, "boolean": bool,
                "array": list}[kind]
    if default is not None and (not isinstance(default, expected) or
                                (kind in ("number", "integer") and isinstance(default, bool))):
        raise ValueError(f"property {name!r}: default {default!r} is not a {kind}")


class ElicitationContentError(InvalidParamsError):
    """A client accepted a form elicitation with content that does not match the requested schema.

    Raised to the tool instead of the answer, so invalid content is never taken for valid; a tool
    that does not catch it answers its request with -32602. ``errors`` says what was wrong, field
    by field; ``content`` is what the client sent.
    """

    def __init__(self, errors: list[str], content: Any,
                 what: str = "the accepted content does not match the requested schema"):
        self.errors = errors
        self.content = content
        super().__init__(f"Invalid elicitation response: {what}: {'; '.join(errors)}",
                         data={"errors": errors})


class ElicitationActionError(ElicitationContentError):
    """A client answered an elicitation with an ``action`` other than ``accept``, ``decline`` or
    ``cancel`` (or with no answer object at all): raised to the tool like invalid content."""

    def __init__(self, result: Any):
        error = (f"action: {result.get('action')!r} is not one of {list(ACTIONS)}" if isinstance(result, dict)
                 else f"an object is needed, not {type(result).__name__}")
        super().__init__([error], result, what="not an answer a user can give")


# The three answers a user can give an elicitation (ElicitResult.action).
ACTIONS = ("accept", "decline", "cancel")


def check_action(result: Any) -> Any:
    """``result`` (the client's ``elicitation/create`` answer, either mode) once its ``action`` is
    one of :data:`ACTIONS`."""
    if not isinstance(result, dict) or result.get("action") not in ACTIONS:
        raise ElicitationActionError(result)
    return result


def check_form_answer(result: Any, requested_schema: dict) -> Any:
    """``result`` (the client's ``elicitation/create`` answer) once its action is valid and an
    ``accept`` is known to carry content matching ``requested_schema``: required fields present,
    types, enums, bounds. Fields the form did not ask for are left out (some clients send more
    than they were asked); formats (email, date...) are not checked."""
    if check_action(result)["action"] != "accept":
        return result
    content = result.get("content", {})
    if isinstance(content, dict):
        asked = requested_schema["properties"]
        content = {name: value for name, value in content.items() if name in asked}
    errors = validation_errors(requested_schema, content)
    if errors:
        raise ElicitationContentError(errors, result.get("content", {}))
    return {**result, "content": content}
