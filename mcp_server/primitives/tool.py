"""Tools: a subclass with ``call``, ``Tool.define(handler, ...)``, or a decorated function."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, ClassVar

from ..invoke import accepts_keyword
from .base import (
    check_groups,
    check_icons,
    check_meta,
    check_permissions,
    check_required_scopes,
    declared_asks,
    put,
    snake_case,
)
from .schema import InputSchema, OutputSchema, input_schema, output_schema

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")
ANNOTATION_DEFAULTS = {
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
    "readOnlyHint": False,
}
_ANNOTATION_KEYS = {
    "read_only_hint": "readOnlyHint",
    "destructive_hint": "destructiveHint",
    "idempotent_hint": "idempotentHint",
    "open_world_hint": "openWorldHint",
    "title": "title",
}


def check_tool_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid tool name {name!r}: use 1 to 128 characters from A-Z, a-z, 0-9, _, . and -"
        )
    return name


def tool_annotations(annotations: dict | None) -> dict | None:
    """snake_case or camelCase hints, as the camelCase wire object with unset hints defaulted."""
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise ValueError("annotations must be a dict")
    wire: dict[str, Any] = {}
    for key, value in annotations.items():
        camel = _ANNOTATION_KEYS.get(key, key)
        if camel not in ANNOTATION_DEFAULTS and camel != "title":
            raise ValueError(f"unknown tool annotation {key!r}")
        if camel != "title" and not isinstance(value, bool):
            raise ValueError(f"tool annotation {key!r} must be True or False")
        wire[camel] = value
    return {**ANNOTATION_DEFAULTS, **wire}


def _check_task_only(task_only: bool, background: bool) -> bool:
    if task_only and not background:
        raise ValueError("task_only=True needs background=True: only background calls become tasks")
    return task_only


def _check_capture(capture: Any) -> bool:
    if not isinstance(capture, bool):
        raise ValueError(f"capture must be True or False, not {capture!r}")
    return capture


class Tool:
    """A tool the model can call.

    Subclass and implement ``call(self, **arguments)`` (add a ``server_context`` parameter to
    receive the request's :class:`ServerContext`), or use :meth:`define`, whose handler gets the
    arguments dict, or the :func:`mcp_server.tool` decorator, which reads the schema from type hints.
    """

    name: ClassVar[str | None] = None
    title: ClassVar[str | None] = None
    description: ClassVar[str | None] = None
    icons: ClassVar[list[dict] | None] = None
    input_schema: ClassVar[Any] = None
    output_schema: ClassVar[Any] = None
    annotations: ClassVar[dict | None] = None
    meta: ClassVar[dict | None] = None
    # Run on a Celery worker instead of the web process (issue of background tools).
    background: ClassVar[bool] = False
    # A background tool that only runs as a task (Tasks extension): a client that does not declare
    # the extension gets -32021 instead of a call held open for it.
    task_only: ClassVar[bool] = False
    # OAuth scopes and Django permissions ("app_label.codename") a principal needs: without them
    # the tool is not listed, and a call is refused (over HTTP, 403 insufficient_scope).
    required_scopes: ClassVar[tuple[str, ...]] = ()
    permissions: ClassVar[tuple[str, ...]] = ()
    # Django groups (names): when any, the user must belong to one of them (as for permissions).
    groups: ClassVar[tuple[str, ...]] = ()
    # Set by curation (mcp_server.curate, admin's overrides): arguments left out of the input
    # schema, dropped from a call (the handler's default applies) or always passed with a value.
    hidden_arguments: ClassVar[tuple[str, ...]] = ()
    fixed_arguments: ClassVar[dict[str, Any]] = {}
    # The tool a curated one was made from (None: not curated).
    original: ClassVar[Any] = None
    # Put the call's arguments and result on its span (gen_ai.tool.call.arguments and .result),
    # redacted by MCP_SERVER["REDACTED_KEYS"] / REDACTION_POLICY; off by default, as they may
    # hold what a trace backend must not keep.
    capture: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Checked when the class is defined, so a bad definition fails at import time.
        cls.name = check_tool_name(cls.__dict__.get("name") or snake_case(cls.__name__))
        cls.input_schema = input_schema(cls.input_schema)
        cls.output_schema = output_schema(cls.output_schema)
        cls.annotations = tool_annotations(cls.annotations)
        cls.icons = check_icons(cls.icons)
        cls.meta = check_meta(cls.meta)
        cls.required_scopes = check_required_scopes(cls.required_scopes)
        cls.permissions = check_permissions(cls.permissions)
        cls.groups = check_groups(cls.groups)
        cls.task_only = _check_task_only(bool(cls.task_only), bool(cls.background))
        cls.capture = _check_capture(cls.capture)

    def __init__(self) -> None:
        # Handlers get the arguments as keywords; Tool.define handlers get one dict instead.
        self._arguments_as_dict = False
        self._handler: Callable = self.call
        self._wants_context = accepts_keyword(self.call, "server_context")
        self._structured_output = self.output_schema is not None

    def call(self, **arguments: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement call()")

    def prepare(self, arguments: dict, server_context: Any) -> Any:
        """A background tool's step in the web process before its call is queued: return an
        :class:`~mcp_server.InputRequiredResult` to ask the client first (SEP-2322 rounds, answered
        before any task exists), or None to go on. The handler then reads those answers from
        ``server_context.input_responses``. The default asks nothing."""
        return None

    def bound(self, arguments: dict) -> dict:
        """The arguments the handler gets: a curated tool's fixed ones set, its hidden ones dropped."""
        if not self.hidden_arguments and not self.fixed_arguments:
            return arguments
        kept = {key: value for key, value in arguments.items() if key not in self.hidden_arguments}
        return {**kept, **self.fixed_arguments}

    def offered_in(self, tools: dict[str, Any]) -> bool:
        """Whether a principal who sees ``tools`` is offered this tool (listed, callable): always,
        unless a tool says otherwise (the tool search, past its threshold only)."""
        return True

    @property
    def prepares(self) -> bool:
        return type(self).prepare is not Tool.prepare

    @classmethod
    def define(
        cls,
        handler: Callable | None = None,
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict] | None = None,
        input_schema: dict | InputSchema | None = None,
        output_schema: dict | OutputSchema | None = None,
        annotations: dict | None = None,
        meta: dict | None = None,
        background: bool = False,
        task_only: bool = False,
        required_scopes: list[str] | tuple[str, ...] = (),
        permissions: list[str] | tuple[str, ...] = (),
        groups: list[str] | tuple[str, ...] = (),
        capture: bool = False,
    ) -> Any:
        """A tool whose ``handler(arguments, server_context=...)`` gets the arguments dict.

        Without ``handler`` it returns a decorator.
        """

        def build(function: Callable) -> Tool:
            return _FunctionTool(
                function, arguments_as_dict=True, name=name, title=title,
                description=description, icons=icons, input_schema=input_schema,
                output_schema=output_schema, annotations=annotations, meta=meta,
                background=background, task_only=task_only, required_scopes=required_scopes,
                permissions=permissions, groups=groups, capture=capture,
            )

        return build(handler) if handler is not None else build

    @property
    def handler(self) -> Callable:
        return self._handler

    @property
    def wants_context(self) -> bool:
        return self._wants_context

    @property
    def arguments_as_dict(self) -> bool:
        return self._arguments_as_dict

    @property
    def structured_output(self) -> bool:
        return self._structured_output

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name}
        put(entry, "title", self.title)
        put(entry, "description", self.description)
        put(entry, "icons", self.icons)
        entry["inputSchema"] = self.input_schema.to_dict()
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema.to_dict()
        put(entry, "annotations", self.annotations)
        put(entry, "_meta", self.meta)
        return entry

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


class _FunctionTool(Tool):
    """A tool made from a function, by :meth:`Tool.define` or the ``tool`` decorator."""

    def __init__(self, function: Callable, *, arguments_as_dict: bool, **fields: Any):
        self.name = check_tool_name(fields["name"])
        self.title = fields.get("title")
        self.description = fields.get("description")
        self.icons = check_icons(fields.get("icons"))
        self.input_schema = input_schema(fields.get("input_schema"))
        self.output_schema = output_schema(fields.get("output_schema"))
        self.annotations = tool_annotations(fields.get("annotations"))
        self.meta = check_meta(fields.get("meta"))
        self.background = bool(fields.get("background", False))
        self.task_only = _check_task_only(bool(fields.get("task_only", False)), self.background)
        self.required_scopes = check_required_scopes(fields.get("required_scopes", ()))
        self.permissions = check_permissions(fields.get("permissions", ()))
        self.groups = check_groups(fields.get("groups", ()))
        self.capture = _check_capture(fields.get("capture", False))
        self._arguments_as_dict = arguments_as_dict
        self._handler = function
        self._wants_context = accepts_keyword(function, "server_context")
        self._structured_output = fields.get("structured_output", self.output_schema is not None)


def tool_from_function(
    function: Callable,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    icons: list[dict] | None = None,
    input_schema: dict | None = None,
    output_schema: dict | None = None,
    annotations: dict | None = None,
    meta: dict | None = None,
    background: bool = False,
    task_only: bool = False,
    required_scopes: list[str] | tuple[str, ...] = (),
    permissions: list[str] | tuple[str, ...] = (),
    groups: list[str] | tuple[str, ...] = (),
    capture: bool = False,
) -> Tool:
    """A tool whose function takes its arguments as keywords, schemas read from type hints."""
    hints = typing.get_type_hints(function)
    schema = input_schema if input_schema is not None else schema_from_signature(function, hints)
    if output_schema is None and "return" in hints:
        output_schema = _output_schema_from_hint(hints["return"])
    return _FunctionTool(
        function, arguments_as_dict=False,
        name=name or function.__name__, title=title,
        description=description if description is not None else inspect.getdoc(function),
        icons=icons, input_schema=schema, output_schema=output_schema,
        annotations=annotations, meta=meta, background=background, task_only=task_only,
        structured_output=output_schema is not None, required_scopes=required_scopes,
        permissions=permissions, groups=groups, capture=capture,
    )


_JSON_TYPES: dict[Any, dict] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    dict: {"type": "object"},
    list: {"type": "array"},
}


def json_type_for(hint: Any) -> dict:
    """The JSON Schema of a Python type hint (the common cases; anything else is unconstrained)."""
    if hint in _JSON_TYPES:
        return dict(_JSON_TYPES[hint])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset):
        items = json_type_for(args[0]) if args else {}
        return {"type": "array", "items": items} if items else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        options = [json_type_for(arg) for arg in args if arg is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return {"anyOf": options} if all(options) else {}
    return {}


def schema_from_signature(function: Callable, hints: dict | None = None) -> dict:
    hints = hints if hints is not None else typing.get_type_hints(function)
    asked = declared_asks(function)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "server_context" or parameter.name in asked or parameter.kind in (
            parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL
        ):
            continue
        properties[parameter.name] = json_type_for(hints.get(parameter.name, Any))
        if parameter.default is parameter.empty:
            required.append(parameter.name)
        else:
            properties[parameter.name]["default"] = parameter.default
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _output_schema_from_hint(hint: Any) -> dict | None:
    # Only a dict return is structured output; the handshake-era wire allows objects alone there.
    if hint is dict or typing.get_origin(hint) is dict:
        return {"type": "object"}
    return None
