"""Curated tools: any tool renamed, described for an assistant, with arguments hidden or fixed,
and restricted to a permission or to groups (:func:`curate`, and admin's overrides).

A fixed argument leaves the input schema and is always passed with its value, whatever the client
sends; a hidden one leaves the schema and the handler's default applies. The curated tool is a
copy of the original: its class, handler and other fields are the original's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from .base import check_permissions
from .schema import InputSchema
from .tool import Tool, check_tool_name

# What is kept of the input schema to check one fixed value against its property's schema.
_SCHEMA_CONTEXT = ("$schema", "$id", "$defs", "definitions")


def curate(
    tool: Tool | type[Tool],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    hidden_arguments: Iterable[str] = (),
    fixed_arguments: Mapping[str, Any] | None = None,
    permission: str | None = None,
    groups: Iterable[str] = (),
) -> Tool:
    """A copy of ``tool`` as curated: ``name``, ``title``, ``description`` replace the tool's;
    ``hidden_arguments`` and ``fixed_arguments`` leave its input schema; ``permission``
    ("app_label.codename") and ``groups`` (names; any of them) restrict who sees and calls it,
    on top of the tool's own ``permissions``. Raises ValueError naming what is wrong."""
    original = tool() if isinstance(tool, type) else tool
    if not isinstance(original, Tool):
        raise TypeError(f"curate() takes a Tool, not {type(original).__name__}")
    hidden = _names(hidden_arguments, "hidden_arguments")
    fixed = dict(fixed_arguments or {})
    if not all(isinstance(key, str) for key in fixed):
        raise ValueError("fixed_arguments must map argument names to values")
    schema = curated_schema(original.input_schema, hidden, fixed, tool_name=original.name)
    curated = copy.copy(original)
    curated.original = original.original or original  # the code's tool, however often curated
    if name:
        curated.name = check_tool_name(name)
    if title:
        curated.title = title
    if description:
        curated.description = description
    if hidden or fixed:
        curated.input_schema = schema
        # Curating a curated tool adds to what it already hides and fixes.
        curated.hidden_arguments = tuple(sorted({*original.hidden_arguments, *hidden}))
        curated.fixed_arguments = {**original.fixed_arguments, **fixed}
    if permission:
        curated.permissions = check_permissions([*original.permissions, permission])
    group_names = _names(groups, "groups")
    if group_names:
        curated.groups = tuple(sorted({*original.groups, *group_names}))
    return curated


def curated_schema(schema: InputSchema, hidden: Iterable[str], fixed: Mapping[str, Any], *,
                   tool_name: str) -> InputSchema:
    """``schema`` without the hidden and fixed arguments; ValueError for an argument the schema
    does not declare, a required one hidden, or a fixed value its property's schema refuses."""
    raw = schema.schema
    properties = raw.get("properties") or {}
    required = set(raw.get("required") or ())
    hidden = list(hidden)
    for argument in [*hidden, *fixed]:
        if argument not in properties:
            known = ", ".join(sorted(properties)) or "none"
            raise ValueError(f"tool {tool_name!r} has no argument {argument!r} (its arguments: {known})")
    both = sorted(set(hidden) & set(fixed))
    if both:
        raise ValueError(f"argument {both[0]!r} of tool {tool_name!r} is both hidden and fixed: "
                         "choose one")
    for argument in hidden:
        if argument in required:
            raise ValueError(f"argument {argument!r} of tool {tool_name!r} is required and has no "
                             "default: it cannot be hidden; fix it to a value instead")
    for argument, value in fixed.items():
        check = InputSchema({**{key: raw[key] for key in _SCHEMA_CONTEXT if key in raw},
                             "type": "object", "properties": {argument: properties[argument]}})
        errors = check.errors({argument: value})
        if errors:
            raise ValueError(f"fixed value {value!r} of argument {argument!r} of tool {tool_name!r} "
                             f"does not match its schema: {'; '.join(errors)}")
    removed = {*hidden, *fixed}
    if not removed:
        return schema
    shaped = {**raw, "properties": {key: value for key, value in properties.items() if key not in removed}}
    kept = [name for name in raw.get("required") or () if name not in removed]
    if kept:
        shaped["required"] = kept
    else:
        shaped.pop("required", None)
    return InputSchema(shaped)


def _names(values: Iterable[str], label: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValueError(f"{label} must be a list of names, not {values!r}")
    names = tuple(values)
    if not all(isinstance(value, str) and value for value in names):
        raise ValueError(f"{label} must be a list of names, not {names!r}")
    return names
