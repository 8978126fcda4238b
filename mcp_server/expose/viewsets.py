"""Django REST framework ViewSets as MCP tools: ``viewset_tools(TicketViewSet, actions=[...],
prefix="ticket")``.

Each chosen action becomes one tool whose input schema comes from the serializer (writable fields,
the lookup for detail actions), the FilterSet, the search and ordering backends and the paginator
(a ``cursor`` argument); a call runs the ViewSet's own code in process (drf_call.py), as the
principal's Django user, so its permissions, throttles, filters and validation decide as over HTTP.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from rest_framework import serializers
from rest_framework.viewsets import ViewSetMixin

from ..primitives.tool import Tool
from . import drf_call
from .drf_filters import QueryParameter, query_parameters
from .drf_schema import key_schema, object_schema, serializer_properties

# action: (HTTP method, detail, annotations)
# The ViewSet works on the project's own database: a closed world.
_READ = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True,
         "open_world_hint": False}
_CREATE = {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False,
           "open_world_hint": False}
_CHANGE = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True,
           "open_world_hint": False}
_STANDARD: dict[str, tuple[str, bool, dict]] = {
    "list": ("get", False, _READ),
    "retrieve": ("get", True, _READ),
    "create": ("post", False, _CREATE),
    "update": ("put", True, _CHANGE),
    "partial_update": ("patch", True, _CHANGE),
    "destroy": ("delete", True, _CHANGE),
}
_BODY_METHODS = {"post", "put", "patch"}
CURSOR = "cursor"


def viewset_tools(viewset: type, *, actions: Sequence[str], prefix: str,
                  descriptions: dict[str, str] | None = None,
                  required_scopes: Sequence[str] = (), permissions: Sequence[str] = ()) -> list[Tool]:
    """One tool per action of ``viewset``, named ``<prefix>_<action>``, for the project to register
    (``mcp_server.register(tool)`` or ``server.add_tool(tool)``).

    ``actions`` names each action to expose: ``list``, ``retrieve``, ``create``, ``update``,
    ``partial_update``, ``destroy``, or an ``@action`` by its method's name (``"close"``; write
    ``"close:post"`` for an action that answers several HTTP methods). ``descriptions`` replaces
    the description of an action's tool; ``required_scopes`` and ``permissions`` are required of
    the principal before any tool is listed or called, on top of what the ViewSet checks.
    """
    if not (isinstance(viewset, type) and issubclass(viewset, ViewSetMixin)):
        raise TypeError(f"viewset_tools() takes a ViewSet class, not {viewset!r}")
    if isinstance(actions, str) or not actions:
        raise ValueError("actions must be a list of the actions to expose, e.g. ['list', 'retrieve']")
    descriptions = dict(descriptions or {})
    unknown = set(descriptions) - set(actions)
    if unknown:
        raise ValueError(f"descriptions names actions that are not exposed: {sorted(unknown)}")
    tools = []
    for name in actions:
        spec = _ActionSpec.of(viewset, name, prefix)
        tools.append(spec.tool(descriptions.get(name), tuple(required_scopes), tuple(permissions)))
    return tools


@dataclass
class _ActionSpec:
    viewset: type
    action: str
    method: str
    detail: bool
    tool_name: str
    annotations: dict
    initkwargs: dict
    lookup: str | None = None
    query: list[QueryParameter] = field(default_factory=list)
    paginated: bool = False
    body: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    output_schema: dict | None = None

    @classmethod
    def of(cls, viewset: type, requested: str, prefix: str) -> _ActionSpec:
        if not isinstance(requested, str):
            raise ValueError(f"an action is named by a string, not {requested!r}")
        action, _, method = requested.partition(":")
        if action in _STANDARD:
            if method:
                raise ValueError(f"{action!r} always answers {_STANDARD[action][0].upper()}: "
                                 "name it without a method")
            if not callable(getattr(viewset, action, None)):
                raise ValueError(f"{viewset.__name__} has no {action!r} action (add its mixin)")
            method, detail, annotations = _STANDARD[action]
            initkwargs = {"detail": detail, "suffix": "Instance" if detail else "List"}
        else:
            method, detail, annotations, initkwargs = _extra_action(viewset, action, method)
        name = f"{prefix}_{action}" + (f"_{method}" if ":" in requested else "")
        spec = cls(viewset, action, method, detail, name, annotations,
                   {"basename": prefix, **initkwargs})
        spec.build()
        return spec

    def view_instance(self) -> Any:
        """The ViewSet as it is set up for this action, with no request: what it says about
        its serializer, filters and paginator."""
        view = self.viewset(**self.initkwargs)
        view.action, view.action_map = self.action, {self.method: self.action}
        view.request, view.args, view.kwargs, view.format_kwarg = None, (), {}, None
        return view

    def build(self) -> None:
        view = self.view_instance()
        model = _model_of(view)
        if self.detail:
            self.lookup = view.lookup_url_kwarg or view.lookup_field
            lookup_field = None if "__" in view.lookup_field else _model_field(model, view.lookup_field)
            self._add(self.lookup, {**key_schema(lookup_field),
                                    "description": f"The {view.lookup_field} of the object"}, True)
        serializer = self._serializer(view)
        if self.action == "list":
            queryset = getattr(view, "queryset", None)
            if queryset is None and model is not None:
                queryset = model._default_manager.all()
            self.query = query_parameters(view, queryset)
            for parameter in self.query:
                self._add(parameter.name, parameter.schema, False)
            if view.pagination_class is not None:
                self.paginated = True
                self._add(CURSOR, {"type": "string", "description":
                                   "The next_cursor of the previous page; leave it out for the first"},
                          False)
        if self.method in _BODY_METHODS and serializer is not None:
            partial = self.action == "partial_update"
            properties, required = serializer_properties(serializer, write=True, partial=partial)
            for name, schema in properties.items():
                self._add(name, schema, name in required)
                self.body.append(name)
        self.output_schema = self._output(serializer)

    def _add(self, name: str, schema: dict, required: bool) -> None:
        if name in self.properties:
            raise ValueError(f"{self.viewset.__name__}.{self.action}: the argument {name!r} would be "
                             "both a query or lookup parameter and a serializer field; rename one")
        self.properties[name] = schema
        if required:
            self.required.append(name)

    def _serializer(self, view: Any) -> serializers.BaseSerializer | None:
        if self.action not in _STANDARD and "serializer_class" not in self.initkwargs:
            return None  # an @action's body is described only by the serializer it names
        try:
            serializer_class = view.get_serializer_class()
        except Exception:  # it reads the request (request.user, say), which there is none of yet
            serializer_class = getattr(view, "serializer_class", None)
        if serializer_class is None:
            if self.action in _STANDARD:
                raise ValueError(f"{self.viewset.__name__} names no serializer_class for {self.action!r}")
            return None
        return serializer_class(context={"request": None, "view": view, "format": None})

    def _output(self, serializer: serializers.BaseSerializer | None) -> dict | None:
        if self.action == "destroy":
            return {"type": "object", "properties": {"deleted": {"const": True}}, "required": ["deleted"]}
        if self.action not in _STANDARD or serializer is None:
            return None  # an @action answers whatever its code returns
        item = object_schema(serializer, write=False)
        if self.action != "list":
            return item
        return {"type": "object", "properties": {
            "results": {"type": "array", "items": item},
            "next_cursor": {"type": ["string", "null"],
                            "description": "Give it as cursor for the next page; null on the last"},
            "count": {"type": "integer"},
        }, "required": ["results", "next_cursor"]}

    def description(self, given: str | None) -> str:
        if given:
            return given
        method = getattr(self.viewset, self.action)
        defined_here = not getattr(method, "__module__", "").startswith("rest_framework")
        doc = inspect.getdoc(method) if defined_here else None
        if doc:
            return doc
        model = _model_of(self.view_instance())
        one = str(model._meta.verbose_name) if model is not None else "object"
        many = str(model._meta.verbose_name_plural) if model is not None else "objects"
        return {
            "list": f"List {many}." + (" Pass next_cursor back as cursor for the next page."
                                       if self.paginated else ""),
            "retrieve": f"Get one {one} by its {self.lookup}.",
            "create": f"Create a {one}.",
            "update": f"Replace a {one}: give every required field.",
            "partial_update": f"Change some fields of a {one}.",
            "destroy": f"Delete a {one}.",
        }.get(self.action, f"The {self.action} action of {self.viewset.__name__}.")

    def tool(self, description: str | None, required_scopes: tuple, permissions: tuple) -> Tool:
        input_schema: dict[str, Any] = {"type": "object", "properties": self.properties}
        if self.required:
            input_schema["required"] = self.required
        return Tool.define(
            _Handler(self), name=self.tool_name, description=self.description(description),
            input_schema=input_schema, output_schema=self.output_schema,
            annotations=self.annotations, required_scopes=required_scopes, permissions=permissions)


class _Handler:
    """The tool's handler: arguments in, the ViewSet's answer out (a plain ``def``: the call
    runs on a worker thread with fresh database connections)."""

    def __init__(self, spec: _ActionSpec):
        self.spec = spec
        self.view = spec.viewset.as_view({spec.method: spec.action}, **spec.initkwargs)
        self.path = f"/{spec.initkwargs['basename']}/"

    def __call__(self, arguments: dict, server_context: Any = None) -> Any:
        spec = self.spec
        principal = getattr(server_context, "principal", None)
        view_kwargs: dict[str, str] = {}
        path = self.path
        if spec.lookup is not None:
            view_kwargs[spec.lookup] = str(arguments[spec.lookup])
            path += f"{view_kwargs[spec.lookup]}/"
        body = {name: arguments[name] for name in spec.body if name in arguments}
        request = drf_call.ToolRequest(spec.method, path, self._query(arguments),
                                       body if spec.method in _BODY_METHODS else None,
                                       drf_call.principal_user(principal))
        response = drf_call.dispatch(self.view, request, principal, view_kwargs)
        if not 200 <= response.status_code < 300:
            return drf_call.refusal(response)
        data = drf_call.response_data(response)
        if spec.action == "destroy":
            return drf_call.success({"deleted": True}, structured_output=True)
        if spec.action == "list":
            return drf_call.success(_page(data), structured_output=True)
        return drf_call.success(data, structured_output=spec.output_schema is not None)

    def _query(self, arguments: dict) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        cursor = arguments.get(CURSOR) if self.spec.paginated else None
        carried: set[str] = set()
        if cursor:
            # The cursor carries the first page's filters: they hold for every page.
            query = parse_qsl(str(cursor), keep_blank_values=True)
            carried = {name for name, _ in query}
        for parameter in self.spec.query:
            if parameter.name in arguments and parameter.name not in carried:
                query.extend((parameter.name, value) for value in parameter.values(arguments[parameter.name]))
        return query


def _page(data: Any) -> dict[str, Any]:
    if isinstance(data, list):  # not paginated
        return {"results": data, "next_cursor": None}
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        page = {"results": data["results"], "next_cursor": drf_call.next_cursor(data.get("next"))}
        if isinstance(data.get("count"), int):
            page["count"] = data["count"]
        return page
    raise ValueError("the list answered neither a list nor a page with 'results'")


def _extra_action(viewset: type, name: str, method: str) -> tuple[str, bool, dict, dict]:
    extras = {extra.__name__: extra for extra in viewset.get_extra_actions()}
    if name not in extras:
        known = sorted([*(a for a in _STANDARD if callable(getattr(viewset, a, None))), *extras])
        raise ValueError(f"{viewset.__name__} has no action {name!r}; it has: {', '.join(known)}")
    extra = extras[name]
    methods = [m for m, function_name in extra.mapping.items() if function_name == name]
    if method:
        if method.lower() not in methods:
            raise ValueError(f"the action {name!r} does not answer {method.upper()}")
        method = method.lower()
    elif len(methods) > 1:
        raise ValueError(f"the action {name!r} answers {', '.join(m.upper() for m in methods)}: "
                         f"name one, e.g. '{name}:{methods[0]}'")
    else:
        method = methods[0]
    if method == "get":
        annotations = _READ
    elif method == "post":
        annotations = {**_CHANGE, "idempotent_hint": False}
    else:
        annotations = _CHANGE
    return method, bool(extra.detail), annotations, {"detail": extra.detail, **extra.kwargs}


def _model_of(view: Any) -> Any:
    queryset = getattr(view, "queryset", None)
    if queryset is not None:
        return queryset.model
    serializer_class = getattr(view, "serializer_class", None)
    return getattr(getattr(serializer_class, "Meta", None), "model", None)


def _model_field(model: Any, name: str) -> Any:
    if model is None:
        return None
    if name == "pk":
        return model._meta.pk
    try:
        return model._meta.get_field(name)
    except Exception:  # a property or annotation, not a field
        return None
