"""The query parameters of a ViewSet's list, as tool arguments: the FilterSet's filters
(django-filter's ``DjangoFilterBackend``), ``search`` and ``ordering`` (DRF's ``SearchFilter`` and
``OrderingFilter``), each with its schema and how its value goes into the query string."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.settings import api_settings

from .drf_schema import enum_schema, key_schema


@dataclass(frozen=True)
class QueryParameter:
    """A tool argument that is a query parameter of the request: ``values`` turns the argument
    into the strings of the query string (several for a repeated parameter)."""

    name: str
    schema: dict[str, Any]
    values: Callable[[Any], list[str]]


def _text(value: Any) -> list[str]:
    if isinstance(value, bool):
        return ["true" if value else "false"]
    return [str(value)]


def _repeated(value: Any) -> list[str]:
    return [item for element in value for item in _text(element)]


def _comma_separated(value: Any) -> list[str]:
    return [",".join(item for element in value for item in _text(element))]


def query_parameters(view: Any, queryset: Any) -> list[QueryParameter]:
    """The filter, search and ordering arguments of ``view`` (a ViewSet instance for its list)."""
    found: list[QueryParameter] = []
    for backend_class in view.filter_backends:
        if issubclass(backend_class, SearchFilter):
            if getattr(view, "search_fields", None):
                found.append(QueryParameter(
                    getattr(backend_class, "search_param", None) or api_settings.SEARCH_PARAM,
                    {"type": "string", "description": "Search terms, matched against: "
                                                      + ", ".join(map(str, view.search_fields))},
                    _text))
        elif issubclass(backend_class, OrderingFilter):
            fields = getattr(view, "ordering_fields", None)
            described = "any field" if fields in (None, "__all__") else ", ".join(map(str, fields))
            found.append(QueryParameter(
                getattr(backend_class, "ordering_param", None) or api_settings.ORDERING_PARAM,
                {"type": "string", "description": "Fields to order by, comma-separated, each with - "
                                                  f"for descending order; one of: {described}"},
                _text))
        elif _is_django_filter(backend_class):
            found.extend(_filterset_parameters(backend_class(), view, queryset))
    return found


def _is_django_filter(backend_class: type) -> bool:
    # django-filter is optional (the "filters" extra): a backend of it implies it is installed.
    return any(base.__module__.startswith("django_filters") for base in backend_class.__mro__)


def _filterset_parameters(backend: Any, view: Any, queryset: Any) -> list[QueryParameter]:
    import django_filters

    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return []
    found = []
    for name, declared in filterset_class.base_filters.items():
        schema, values = _filter_schema(declared, django_filters)
        label = declared.label or f"{declared.field_name} {declared.lookup_expr}"
        found.append(QueryParameter(name, {**schema, "description": f"Filter: {label}"}, values))
    return found


def _filter_schema(declared: Any, django_filters: Any) -> tuple[dict, Callable[[Any], list[str]]]:
    filters = django_filters.filters
    if isinstance(declared, filters.ModelMultipleChoiceFilter):
        return {"type": "array", "items": _related_key(declared)}, _repeated
    if isinstance(declared, filters.MultipleChoiceFilter):
        return {"type": "array", "items": _choices(declared)}, _repeated
    scalar = _scalar_schema(declared, filters)
    if isinstance(declared, filters.BaseCSVFilter):  # "in" and "range" lookups: a comma list
        return {"type": "array", "items": scalar}, _comma_separated
    return scalar, _text


def _scalar_schema(declared: Any, filters: Any) -> dict[str, Any]:
    # A NumberInFilter is a NumberFilter too: its items get the number's schema. A
    # ModelChoiceFilter is a ChoiceFilter whose choices are its queryset's keys.
    if isinstance(declared, filters.ModelChoiceFilter):
        return _related_key(declared)
    if isinstance(declared, filters.ChoiceFilter):
        return _choices(declared)
    if isinstance(declared, filters.BooleanFilter):
        return {"type": "boolean"}
    if isinstance(declared, filters.NumberFilter):
        return {"type": "number"}
    for kind, format_name in ((filters.DateTimeFilter, "date-time"), (filters.DateFilter, "date"),
                              (filters.TimeFilter, "time"), (filters.UUIDFilter, "uuid")):
        if isinstance(declared, kind):
            return {"type": "string", "format": format_name}
    return {"type": "string"}


def _related_key(declared: Any) -> dict[str, Any]:
    queryset = declared.extra.get("queryset")
    related = getattr(queryset, "model", None)
    if related is None:  # a callable queryset, or one from the model field: the field knows
        model_field = _model_field_of(declared)
        related = getattr(getattr(model_field, "remote_field", None), "model", None)
    return key_schema(related._meta.pk if related is not None else None)


def _model_field_of(declared: Any) -> Any:
    model = getattr(getattr(declared, "parent", None), "_meta", None)
    try:
        return model.model._meta.get_field(declared.field_name) if model is not None else None
    except Exception:  # a related path (owner__team), not a field of the model
        return None


def _choices(declared: Any) -> dict[str, Any]:
    choices = declared.extra.get("choices")
    if callable(choices):
        choices = choices()
    values = [str(value) for value, _label in (choices or []) if value not in ("", None)]
    return enum_schema(values) if values else {"type": "string"}
