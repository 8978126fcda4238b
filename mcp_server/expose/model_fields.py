"""Model fields as tool arguments and results: paths checked against the model, JSON Schema types,
values read from JSON and written back to it.

Only plain scalar columns (and forward foreign keys, as their primary key) are offered: a path may
cross forward ``ForeignKey`` and ``OneToOneField`` relations, never a many-to-many or reverse one,
which would repeat rows.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models

INTEGER_TYPES = {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                 "SmallIntegerField", "PositiveIntegerField", "PositiveSmallIntegerField",
                 "PositiveBigIntegerField"}
NUMERIC_TYPES = INTEGER_TYPES | {"FloatField", "DecimalField"}
_STRING_FORMATS = {"CharField": None, "TextField": None, "SlugField": None, "DateField": "date",
                   "DateTimeField": "date-time", "TimeField": "time", "UUIDField": "uuid",
                   "GenericIPAddressField": None}
TEXT_TYPES = {"CharField", "TextField", "SlugField", "GenericIPAddressField"}
SUPPORTED_TYPES = NUMERIC_TYPES | {"BooleanField"} | set(_STRING_FORMATS)


def label(model: type[models.Model]) -> str:
    """``"app_label.model_name"``, as Django names permissions and content types."""
    return model._meta.label_lower


def resolve(model: type[models.Model], path: str) -> models.Field:
    """The concrete field ``path`` (``"status"``, ``"owner__username"``) names, or ValueError."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"a field path is a non-empty string, not {path!r}")
    current: Any = model
    parts = path.split("__")
    for position, part in enumerate(parts):
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist:
            raise ValueError(f"{label(current)} has no field {part!r} (in {path!r})") from None
        last = position == len(parts) - 1
        if not getattr(field, "concrete", False) or \
                (field.is_relation and not (field.many_to_one or field.one_to_one)):
            raise ValueError(f"{path!r} crosses {part!r}, a many-valued or reverse relation: only "
                             "forward foreign keys and one-to-one fields may be followed")
        if not last:
            if not field.is_relation:
                raise ValueError(f"{path!r}: {part!r} is not a relation, nothing follows it")
            current = field.related_model
            continue
        if kind(field) not in SUPPORTED_TYPES:
            raise ValueError(f"{path!r} is a {field.get_internal_type()}, which is not offered: only "
                             "numbers, booleans, text, dates, times, UUIDs and foreign keys are")
        return field
    raise AssertionError("unreachable")


def kind(field: models.Field) -> str:
    """The internal type of what the field holds (a foreign key holds its target's)."""
    while field.is_relation:
        field = field.target_field
    return field.get_internal_type()


def json_schema(field: models.Field) -> dict[str, Any]:
    """The JSON Schema of one value of ``field``."""
    internal = kind(field)
    if internal in INTEGER_TYPES:
        schema: dict[str, Any] = {"type": "integer"}
    elif internal == "FloatField":
        schema = {"type": "number"}
    elif internal == "DecimalField":  # given and returned as a string to keep every digit
        schema = {"type": ["number", "string"]}
    elif internal == "BooleanField":
        schema = {"type": "boolean"}
    else:
        schema = {"type": "string"}
        if _STRING_FORMATS.get(internal):
            schema["format"] = _STRING_FORMATS[internal]
    choices = [value for value, _ in field.flatchoices] if field.choices else None
    if choices:
        schema["enum"] = [to_json(choice) for choice in choices]
    if field.null:
        schema["type"] = [*(schema["type"] if isinstance(schema["type"], list) else [schema["type"]]), "null"]
        if "enum" in schema:
            schema["enum"].append(None)
    return schema


def parse(field: models.Field, value: Any, where: str) -> Any:
    """``value`` from a tool's arguments as ``field`` holds it; ValueError naming ``where``."""
    if value is None:
        if not field.null:
            raise ValueError(f"{where}: {field.name} cannot be null")
        return None
    internal = kind(field)
    if isinstance(value, (dict, list)) or (isinstance(value, bool) and internal != "BooleanField"):
        raise ValueError(f"{where}: {value!r} is not a value of {field.name}")
    if internal in INTEGER_TYPES and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{where}: {value!r} is not a whole number")
    if internal == "BooleanField" and not isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not true or false")
    target = field
    while target.is_relation:
        target = target.target_field
    try:
        return target.to_python(value)
    except DjangoValidationError as exc:
        raise ValueError(f"{where}: {value!r} is not a value of {field.name} "
                         f"({' '.join(exc.messages)})") from None


def to_json(value: Any) -> Any:
    """A value read from the database, as JSON holds it."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value


def is_free_text(field: models.Field) -> bool:
    """Text anyone may have typed: every ``TextField``, and ``CharField`` (and its kinds) without
    choices. Foreign keys and choices hold what the application chose."""
    return not field.is_relation and isinstance(field, (models.TextField, models.CharField)) \
        and not field.choices
