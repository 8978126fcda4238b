"""Try it's form, built from a tool's input schema and checked with it (mcp_server.try_it.forms)."""

from __future__ import annotations

import json

from django import forms

from mcp_server import Tool
from mcp_server.try_it.forms import JSONValueField, NumberField, ToolForm

EVERYTHING = {
    "properties": {
        "text": {"type": "string", "title": "Some text", "description": "Said <b>back</b>",
                 "minLength": 2},
        "when": {"type": "string", "format": "date"},
        "mail": {"type": "string", "format": "email"},
        "stamp": {"type": "string", "format": "date-time"},
        "code": {"type": "string", "pattern": "^[A-Z]+$"},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "size": {"oneOf": [{"const": 1, "title": "Small"}, {"const": 2, "title": "Large"}]},
        "count": {"type": "integer", "minimum": 1, "default": 3},
        "ratio": {"type": "number", "maximum": 10},
        "loud": {"type": "boolean", "default": False},
        "maybe": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
        "extra": {"type": "object"},
        "anything": {},
    },
    "required": ["text", "tags", "loud"],
}


def tool_of(schema: dict) -> Tool:
    return Tool.define(lambda arguments: "ok", name="everything", input_schema=schema)


def form_of(schema: dict = EVERYTHING, data: dict | None = None) -> ToolForm:
    return ToolForm(tool_of(schema), data)


def test_each_kind_of_property_gets_its_field():
    fields = form_of().fields
    kinds = {name: type(field) for name, field in fields.items()}
    assert kinds == {
        "text": forms.CharField, "when": forms.CharField, "mail": forms.CharField,
        "stamp": forms.CharField, "code": forms.CharField, "colour": forms.TypedChoiceField,
        "size": forms.TypedChoiceField, "count": forms.IntegerField, "ratio": NumberField,
        "loud": forms.BooleanField, "maybe": forms.NullBooleanField, "tags": JSONValueField,
        "extra": JSONValueField, "anything": JSONValueField,
    }
    # Required properties are required fields, except a boolean: unticked is its false.
    assert [name for name, field in fields.items() if field.required] == ["text", "tags"]
    assert fields["text"].label == "Some text" and fields["when"].label == "when"
    assert fields["text"].help_text == "Said <b>back</b>"
    assert fields["text"].min_length == 2


def test_formats_hint_at_the_input_and_say_so():
    fields = form_of().fields
    assert fields["when"].widget.input_type == "date"
    assert fields["mail"].widget.input_type == "email"
    assert fields["stamp"].widget.attrs["placeholder"] == "2025-01-31T12:00:00Z"
    assert "Format: date-time." in fields["stamp"].help_text
    assert "Written as JSON (array)." in fields["tags"].help_text


def test_enums_are_selects_and_defaults_are_prefilled():
    form = form_of()
    assert form.fields["colour"].choices == [("", "---------"), ('"red"', "red"), ('"green"', "green")]
    assert form.fields["size"].choices == [("", "---------"), ("1", "Small"), ("2", "Large")]
    html = str(form)
    assert '<option value="&quot;green&quot;" selected>green</option>' in html
    assert 'name="count" value="3"' in html
    assert 'id="id_tags">\n[&quot;a&quot;]</textarea>' in html
    assert '<textarea name="extra" cols="60" rows="4"' in html and 'id="id_extra">\n</textarea>' in html
    assert form.fields["ratio"].widget.attrs["step"] == "any"


def test_valid_input_becomes_the_arguments_with_their_json_types():
    form = form_of(data={
        "text": "hello", "when": "", "colour": '"red"', "size": "2", "count": "4", "ratio": "2",
        "maybe": "unknown", "tags": '["x", "y"]', "extra": '{"k": [1]}', "anything": "null",
    })
    assert form.is_valid(), form.errors
    # Empty optional fields are left out (the tool's defaults apply); an unticked boolean is false.
    assert form.arguments == {"text": "hello", "colour": "red", "size": 2, "count": 4, "ratio": 2,
                              "loud": False, "tags": ["x", "y"], "extra": {"k": [1]}}
    assert isinstance(form.arguments["ratio"], int)
    decimal = form_of(data={"text": "hi", "tags": "[]", "ratio": "2.5", "maybe": "true", "loud": "on"})
    assert decimal.is_valid(), decimal.errors
    assert {name: decimal.arguments[name] for name in ("ratio", "maybe", "loud")} == {
        "ratio": 2.5, "maybe": True, "loud": True}


def test_input_the_schema_refuses_gets_field_errors():
    form = form_of(data={"text": "hello", "tags": "[1]", "extra": "[]", "code": "abc"})
    assert not form.is_valid()
    assert form.errors["tags"] == ["tags/0: 1 is not of type 'string'"]
    assert form.errors["extra"] == ["[] is not of type 'object'"]
    assert form.errors["code"] == ["'abc' does not match '^[A-Z]+$'"]
    assert "text" not in form.errors


def test_what_does_not_parse_is_refused_before_the_schema_is_asked():
    form = form_of(data={"text": "h", "tags": "[oops", "count": "0", "ratio": "11", "colour": '"blue"'})
    assert not form.is_valid()
    assert set(form.errors) == {"text", "tags", "count", "ratio", "colour"}
    assert form.errors["tags"] == ["Enter a valid JSON."]
    missing = form_of(data={})
    assert not missing.is_valid()
    assert missing.errors["text"] == missing.errors["tags"] == ["This field is required."]


def test_a_tool_without_arguments_has_an_empty_form():
    form = form_of({}, data={})
    assert form.fields == {} and form.is_valid() and form.arguments == {}


def test_a_property_named_like_a_form_attribute_is_just_a_field():
    form = form_of({"properties": {"data": {"type": "string"}, "fields": {"type": "integer"}}},
                   data={"data": "x", "fields": "1"})
    assert form.is_valid(), form.errors
    assert form.arguments == {"data": "x", "fields": 1}
    assert json.dumps(form.arguments)
