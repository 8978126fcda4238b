"""Prompts: a subclass with ``template``, ``Prompt.define(handler, ...)``, or a decorated function."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from mcp_protocol.content import Text, to_wire

from ..invoke import accepts_keyword
from .base import (
    check_icons,
    check_meta,
    check_permissions,
    check_required_scopes,
    declared_asks,
    put,
    snake_case,
)

ROLES = ("user", "assistant")


@dataclass
class PromptArgument:
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name}
        put(body, "title", self.title)
        put(body, "description", self.description)
        put(body, "required", self.required)
        return body


@dataclass
class PromptMessage:
    role: str
    content: Any

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"prompt message role must be 'user' or 'assistant', not {self.role!r}")

    def to_dict(self) -> dict[str, Any]:
        content = Text(self.content) if isinstance(self.content, str) else self.content
        return {"role": self.role, "content": to_wire(content)}


@dataclass
class PromptResult:
    messages: list
    description: str | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        put(body, "description", self.description)
        body["messages"] = [to_wire(message) for message in self.messages]
        put(body, "_meta", self.meta)
        return body


def _argument(value: Any) -> PromptArgument:
    if isinstance(value, PromptArgument):
        return value
    if isinstance(value, dict):
        return PromptArgument(**value)
    raise TypeError("prompt arguments must be PromptArgument objects or dicts")


class Prompt:
    """A prompt template.

    Subclass and implement ``template(self, args, server_context=None)`` returning a
    :class:`PromptResult` (or its dict), or use :meth:`define`.
    """

    Argument = PromptArgument
    Message = PromptMessage
    Result = PromptResult

    name: ClassVar[str | None] = None
    title: ClassVar[str | None] = None
    description: ClassVar[str | None] = None
    arguments: ClassVar[list] = []
    icons: ClassVar[list[dict] | None] = None
    meta: ClassVar[dict | None] = None
    # OAuth scopes and Django permissions a principal needs to see and get the prompt.
    required_scopes: ClassVar[tuple[str, ...]] = ()
    permissions: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__dict__.get("name") or snake_case(cls.__name__)
        cls.arguments = [_argument(a) for a in cls.arguments]
        cls.icons = check_icons(cls.icons)
        cls.meta = check_meta(cls.meta)
        cls.required_scopes = check_required_scopes(cls.required_scopes)
        cls.permissions = check_permissions(cls.permissions)

    def __init__(self) -> None:
        self._handler: Callable = self.template
        self._wants_context = accepts_keyword(self.template, "server_context")

    def template(self, args: dict, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement template()")

    @classmethod
    def define(
        cls,
        handler: Callable | None = None,
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        arguments: list | None = None,
        icons: list[dict] | None = None,
        meta: dict | None = None,
        required_scopes: list[str] | tuple[str, ...] = (),
        permissions: list[str] | tuple[str, ...] = (),
    ) -> Any:
        """A prompt whose ``handler(args, server_context=...)`` builds the result."""

        def build(function: Callable) -> Prompt:
            return _FunctionPrompt(
                function, name=name, title=title, description=description,
                arguments=arguments or [], icons=icons, meta=meta,
                required_scopes=required_scopes, permissions=permissions,
            )

        return build(handler) if handler is not None else build

    @property
    def handler(self) -> Callable:
        return self._handler

    @property
    def wants_context(self) -> bool:
        return self._wants_context

    @property
    def required_arguments(self) -> list[str]:
        return [a.name for a in self.arguments if a.required]

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name}
        put(entry, "title", self.title)
        put(entry, "description", self.description)
        entry["arguments"] = [argument.to_dict() for argument in self.arguments]
        put(entry, "icons", self.icons)
        put(entry, "_meta", self.meta)
        return entry

    def __repr__(self) -> str:
        return f"<Prompt {self.name}>"


class _FunctionPrompt(Prompt):
    def __init__(self, function: Callable, **fields: Any):
        self.name = fields["name"]
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a prompt needs a non-empty name")
        self.title = fields.get("title")
        self.description = fields.get("description")
        self.arguments = [_argument(a) for a in fields.get("arguments", [])]
        self.icons = check_icons(fields.get("icons"))
        self.meta = check_meta(fields.get("meta"))
        self.required_scopes = check_required_scopes(fields.get("required_scopes", ()))
        self.permissions = check_permissions(fields.get("permissions", ()))
        self._handler = function
        self._wants_context = accepts_keyword(function, "server_context")


def prompt_from_function(function: Callable, *, name: str | None = None, title: str | None = None,
                         description: str | None = None, icons: list[dict] | None = None,
                         meta: dict | None = None, required_scopes: list[str] | tuple[str, ...] = (),
                         permissions: list[str] | tuple[str, ...] = ()) -> Prompt:
    """A prompt whose function takes its arguments as keywords and returns messages or text."""
    arguments = []
    asked = declared_asks(function)
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "server_context" or parameter.name in asked or parameter.kind in (
            parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL
        ):
            continue
        arguments.append(PromptArgument(parameter.name, required=parameter.default is parameter.empty))
    wants_context = accepts_keyword(function, "server_context")

    # ``answers``: the values of the function's declared asks (the asks are read from the function
    # itself, through ``__wrapped__``).
    def template(args: dict, server_context: Any = None, **answers: Any) -> Any:
        extra = {"server_context": server_context} if wants_context else {}
        return function(**{k: v for k, v in args.items() if k not in asked}, **extra, **answers)

    async def async_template(args: dict, server_context: Any = None, **answers: Any) -> Any:
        extra = {"server_context": server_context} if wants_context else {}
        return await function(**{k: v for k, v in args.items() if k not in asked}, **extra, **answers)

    chosen = async_template if inspect.iscoroutinefunction(function) else template
    chosen.__wrapped__ = function  # type: ignore[attr-defined]
    return _FunctionPrompt(
        chosen, name=name or function.__name__, title=title,
        description=description if description is not None else inspect.getdoc(function),
        arguments=arguments, icons=icons, meta=meta, required_scopes=required_scopes,
        permissions=permissions,
    )


def prompt_result(value: Any) -> dict[str, Any]:
    """A template's return value as the ``prompts/get`` result.

    Accepts a :class:`PromptResult`, its dict, a list of messages, or a plain string
    (one user message).
    """
    if isinstance(value, PromptResult):
        return value.to_dict()
    if isinstance(value, str):
        return PromptResult([PromptMessage("user", value)]).to_dict()
    if isinstance(value, list):
        return PromptResult(value).to_dict()
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return {**value, "messages": [to_wire(m) for m in value["messages"]]}
    raise TypeError(f"a prompt template returned {type(value).__name__}, not a PromptResult")
