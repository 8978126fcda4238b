"""JSON Schemas (2020-12) of Django REST framework serializers: what a tool takes and returns.

A serializer's writable fields make a tool's input, its readable fields the output, so that the
schemas a client reads say what the serializer will accept and give back.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework import fields as drf
from rest_framework import relations, serializers
from rest_framework.settings import api_settings

# Order matters: subclasses before the classes they extend (EmailField is a CharField).
_FORMATS: tuple[tuple[type, str], ...] = (
    (drf.EmailField, "email"),
    (drf.URLField, "uri"),
    (drf.UUIDField, "uuid"),
    (drf.IPAddressField, "ip-address"),
    (drf.DateTimeField, "date-time"),
    (drf.DateField, "date"),
    (drf.TimeField, "time"),
    (drf.DurationField, "duration"),
)


def serializer_properties(serializer: serializers.BaseSerializer, *, write: bool,
                          partial: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The properties and required names of ``serializer``'s fields: for input (``write``, its
    writable fields; none required when ``partial``), or for output (its readable fields)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in serializer.fields.items():
        if isinstance(field, drf.HiddenField):
            continue  # set by the serializer itself, never given nor shown
        if (write and field.read_only) or (not write and field.write_only):
            continue
        properties[name] = field_schema(field, write=write, name=name)
        if write and field.required and not partial:
            required.append(name)
    return properties, required


def object_schema(serializer: serializers.BaseSerializer, *, write: bool, partial: bool = False) -> dict:
    properties, required = serializer_properties(serializer, write=write, partial=partial)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def field_schema(field: drf.Field, *, write: bool, name: str = "") -> dict[str, Any]:
    """One field's schema, with its label, help text, bounds and choices."""
    schema = _typed(field, write=write, name=name)
    if field.label and "title" not in schema:
        schema["title"] = str(field.label)
    if field.help_text:
        schema["description"] = str(field.help_text)
    if write and field.default is not drf.empty and not callable(field.default):
        default = field.default
        if default is None or isinstance(default, (str, int, float, bool)):
            schema["default"] = default
    if getattr(field, "allow_null", False):
        _allow_null(schema)
    return schema


def _typed(field: drf.Field, *, write: bool, name: str) -> dict[str, Any]:
    if isinstance(field, serializers.ListSerializer):
        return {"type": "array", "items": object_schema(field.child, write=write)}
    if isinstance(field, serializers.BaseSerializer):
        return object_schema(field, write=write)
    if isinstance(field, relations.ManyRelatedField):
        return {"type": "array", "items": _typed(field.child_relation, write=write, name=name)}
    if isinstance(field, drf.MultipleChoiceField):
        return {"type": "array", "items": enum_schema(_choice_values(field)), "uniqueItems": True}
    if isinstance(field, drf.ChoiceField):  # FilePathField too
        values = _choice_values(field)
        if getattr(field, "allow_blank", False) and "" not in values:
            values.append("")
        return enum_schema(values)
    if isinstance(field, drf.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, drf.DecimalField):
        # Given as a number or its text; given back as the field and COERCE_DECIMAL_TO_STRING say.
        coerced = getattr(field, "coerce_to_string", api_settings.COERCE_DECIMAL_TO_STRING)
        return {"type": ["number", "string"] if write else ("string" if coerced else "number")}
    if isinstance(field, drf.IntegerField):
        big = getattr(drf, "BigIntegerField", None)  # DRF 3.16: given back as text if so set
        if not write and big is not None and isinstance(field, big) and getattr(
                field, "coerce_to_string", api_settings.COERCE_BIGINT_TO_STRING):
            return {"type": "string"}
        return _bounded({"type": "integer"}, field)
    if isinstance(field, drf.FloatField):
        return _bounded({"type": "number"}, field)
    if isinstance(field, drf.FileField):  # ImageField too
        if write:
            raise ValueError(f"the writable file field {name!r} cannot be given as a tool argument: "
                             "make it read-only in the serializer, or leave this action out")
        return {"type": "string"}
    if isinstance(field, drf.ListField):
        return {"type": "array", "items": _typed(field.child, write=write, name=name)}
    if isinstance(field, drf.DictField):
        return {"type": "object", "additionalProperties": _typed(field.child, write=write, name=name)}
    if isinstance(field, drf.HStoreField):
        return {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
    if isinstance(field, drf.JSONField):
        return {}
    if isinstance(field, relations.PrimaryKeyRelatedField):
        return _key_of(getattr(field, "queryset", None))
    if isinstance(field, relations.HyperlinkedRelatedField):  # HyperlinkedIdentityField too
        return {"type": "string", "format": "uri"}
    if isinstance(field, (relations.SlugRelatedField, relations.StringRelatedField)):
        return {"type": "string"}
    for kind, format_name in _FORMATS:
        if isinstance(field, kind):
            return {"type": "string", "format": format_name}
    if isinstance(field, drf.CharField):  # RegexField and SlugField too
        schema: dict[str, Any] = {"type": "string"}
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        if field.min_length is not None:
            schema["minLength"] = field.min_length
        return schema
    return {}  # ReadOnlyField, SerializerMethodField, custom fields: any JSON value


def key_schema(model_field: models.Field | None) -> dict[str, Any]:
    """A lookup value's schema: an integer for integer keys, else text."""
    if isinstance(model_field, (models.AutoField, models.IntegerField)):
        return {"type": "integer"}
    if isinstance(model_field, models.UUIDField):
        return {"type": "string", "format": "uuid"}
    if isinstance(model_field, models.ForeignKey):
        return key_schema(model_field.target_field)
    return {"type": "string"}


def enum_schema(values: list[Any]) -> dict[str, Any]:
    """An ``enum``, typed when its values are all of one JSON type (clients read the type)."""
    kinds = {_json_type(value) for value in values}
    if len(kinds) == 1 and None not in kinds:
        return {"type": kinds.pop(), "enum": values}
    return {"enum": values}


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else None


def _key_of(queryset: Any) -> dict[str, Any]:
    model = getattr(queryset, "model", None)
    return key_schema(model._meta.pk if model is not None else None)


def _choice_values(field: drf.ChoiceField) -> list[Any]:
    return [value for value in field.choices if value is None or isinstance(value, (str, int, float, bool))]


def _bounded(schema: dict[str, Any], field: drf.Field) -> dict[str, Any]:
    if getattr(field, "min_value", None) is not None:
        schema["minimum"] = field.min_value
    if getattr(field, "max_value", None) is not None:
        schema["maximum"] = field.max_value
    return schema


def _allow_null(schema: dict[str, Any]) -> None:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        schema["type"] = [*kind, "null"]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
