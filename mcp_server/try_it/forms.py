"""A Django form built from a tool's input schema (JSON Schema), checked with that same schema.

Each property becomes a field: a string a text input (with the input type its ``format`` hints
at), an ``enum`` (or a ``oneOf``/``anyOf`` of ``const``) a select, a number or an integer a number
input, a boolean a checkbox (a yes/no/unset select when it is optional with no default), and
anything else (arrays, objects, unions, ``$ref``) a JSON text area. Required properties are
required fields, defaults are prefilled, descriptions are help texts. A field left empty is
left out of the arguments, so the tool's own default applies.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from ..primitives.tool import Tool

# Input types browsers offer for JSON Schema formats whose value they write exactly as the format
# says; other formats get a text input with an example.
FORMAT_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date"}
FORMAT_EXAMPLES = {"date-time": "2025-01-31T12:00:00Z", "time": "12:00:00Z", "uuid":
                   "123e4567-e89b-12d3-a456-426614174000", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1"}
_INTEGER_TEXT = re.compile(r"\s*[-+]?\d+\s*")


class NumberField(forms.FloatField):
    """A JSON number: what is written as an integer stays one (2, not 2.0)."""

    def to_python(self, value: Any) -> int | float | None:
        if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
            return int(value)
        return super().to_python(value)


class JSONValueField(forms.JSONField):
    """Any JSON value, written as JSON; empty is no value (``[]`` and ``{}`` are values)."""

    empty_values = [None, ""]

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class ToolForm(forms.Form):
    """The arguments of one tool; after ``is_valid()``, ``arguments`` is what the call sends."""

    required_css_class = "required"  # admin's style for the labels of required fields

    def __init__(self, tool: Tool, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.tool = tool
        self.arguments: dict[str, Any] = {}
        schema = tool.input_schema.to_dict()
        required = set(schema.get("required") or ())
        for name, definition in (schema.get("properties") or {}).items():
            self.fields[name] = field_for(name, definition if isinstance(definition, dict) else {},
                                          name in required)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        arguments = {name: value for name, value in cleaned.items()
                     if name in self.fields and value not in (None, "")}
        if not self.errors:  # fields that did not parse are reported already
            for message in self.tool.input_schema.errors(arguments):
                self._add_schema_error(message)
        self.arguments = arguments
        return cleaned

    def _add_schema_error(self, message: str) -> None:
        """A schema error next to the field it is about ("tags/0: ..." goes to tags), else on top."""
        where, separator, text = message.partition(": ")
        field = where.split("/", 1)[0]
        if separator and field in self.fields:
            self.add_error(field, text if where == field else message)
        else:
            self.add_error(None, message)


def field_for(name: str, definition: dict, required: bool) -> forms.Field:
    """The form field of one property of an input schema."""
    options: dict[str, Any] = {"required": required, "label": definition.get("title") or name,
                               "help_text": definition.get("description") or ""}
    has_default = "default" in definition
    if has_default:
        options["initial"] = definition["default"]
    kind = definition.get("type")
    choices = _choices(definition)
    if choices is not None:
        if has_default:
            options["initial"] = json.dumps(definition["default"])
        return forms.TypedChoiceField(choices=[("", "---------"), *choices], coerce=json.loads,
                                      empty_value=None, **options)
    if kind == "string":
        return _string_field(definition, options)
    if kind in ("integer", "number"):
        bounds = {"min_value": definition.get("minimum"), "max_value": definition.get("maximum")}
        if kind == "integer":
            return forms.IntegerField(**bounds, **options)
        return NumberField(**bounds, widget=forms.NumberInput(attrs={"step": "any"}), **options)
    if kind == "boolean":
        if required or has_default:  # always sent: unticked is false
            return forms.BooleanField(**{**options, "required": False})
        return forms.NullBooleanField(**options)  # unset, yes or no: unset is left out
    return JSONValueField(widget=forms.Textarea(attrs={"rows": 4, "cols": 60}), **{
        **options, "help_text": _joined(options["help_text"], _json_hint(definition))})


def _string_field(definition: dict, options: dict) -> forms.Field:
    format_ = definition.get("format")
    attrs: dict[str, Any] = {}
    if format_ in FORMAT_INPUT_TYPES:
        attrs["type"] = FORMAT_INPUT_TYPES[format_]
    elif format_ in FORMAT_EXAMPLES:
        attrs["placeholder"] = FORMAT_EXAMPLES[format_]
    if format_:
        options = {**options, "help_text": _joined(options["help_text"], f"Format: {format_}.")}
    return forms.CharField(min_length=definition.get("minLength"), max_length=definition.get("maxLength"),
                           strip=False, widget=forms.TextInput(attrs=attrs), **options)


def _choices(definition: dict) -> list[tuple[str, str]] | None:
    """(JSON of the value, label) for an ``enum``, or a ``oneOf``/``anyOf`` of ``const`` entries."""
    if isinstance(definition.get("enum"), list):
        return [(json.dumps(value), _label(value)) for value in definition["enum"]]
    for keyword in ("oneOf", "anyOf"):
        options = definition.get(keyword)
        if isinstance(options, list) and options and all(
                isinstance(option, dict) and "const" in option for option in options):
            return [(json.dumps(option["const"]), option.get("title") or _label(option["const"]))
                    for option in options]
    return None


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _json_hint(definition: dict) -> str:
    kind = definition.get("type")
    kinds = [kind] if isinstance(kind, str) else [k for k in kind if isinstance(k, str)] \
        if isinstance(kind, list) else []
    return f"Written as JSON ({' or '.join(kinds)})." if kinds else "Written as JSON."


def _joined(*texts: str) -> str:
    return " ".join(text for text in texts if text)
