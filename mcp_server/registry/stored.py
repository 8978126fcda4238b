"""Primitives made from what administrators wrote: prompts, resources and resource templates
defined in admin, and the overrides of those registered in code. Each ``check_*`` raises
ValueError with a message for a person (admin forms and the API show it)."""

from __future__ import annotations

import copy
import re
from typing import Any

from ..primitives.curated import curate
from ..primitives.prompt import Prompt, PromptMessage, PromptResult
from ..primitives.resource import Resource, ResourceTemplate
from ..primitives.tool import Tool, tool_annotations
from .placeholders import placeholders, render

ROLES = ("user", "assistant")
_URI_VARIABLE = re.compile(r"\{([A-Za-z0-9_]+)\}")


def check_prompt(arguments: Any, messages: Any) -> None:
    if not isinstance(arguments, list):
        raise ValueError("arguments must be a list of {name, description?, required?} objects")
    names = []
    for argument in arguments:
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str) \
                or not argument["name"].isidentifier():
            raise ValueError(f"each argument needs a name made of letters, digits and _: {argument!r}")
        unknown = set(argument) - {"name", "title", "description", "required"}
        if unknown:
            raise ValueError(f"argument {argument['name']!r} has unknown keys: {', '.join(sorted(unknown))}")
        if "required" in argument and not isinstance(argument["required"], bool):
            raise ValueError(f"'required' of argument {argument['name']!r} must be true or false")
        names.append(argument["name"])
    if len(set(names)) != len(names):
        raise ValueError("two arguments have the same name")
    if not isinstance(messages, list) or not messages:
        raise ValueError('messages must be a non-empty list of {"role", "text"} objects')
    for index, message in enumerate(messages, 1):
        if not isinstance(message, dict) or message.get("role") not in ROLES \
                or not isinstance(message.get("text"), str):
            raise ValueError(f'message {index} must be {{"role": "user" or "assistant", "text": "..."}}')
        try:
            used = placeholders(message["text"])
        except ValueError as exc:
            raise ValueError(f"message {index}: {exc}") from None
        undeclared = sorted(set(used) - set(names))
        if undeclared:
            raise ValueError(f"message {index} uses {', '.join('{' + n + '}' for n in undeclared)}, "
                             "which no argument declares")


def check_resource_template(uri_template: str, text: str) -> None:
    variables = set(_URI_VARIABLE.findall(uri_template))
    if not variables:
        raise ValueError("the URI template has no {variable}")
    try:
        used = placeholders(text)
    except ValueError as exc:
        raise ValueError(f"text: {exc}") from None
    unknown = sorted(set(used) - variables)
    if unknown:
        raise ValueError(f"the text uses {', '.join('{' + n + '}' for n in unknown)}, which the URI "
                         "template does not have")


def prompt_of(row: Any) -> Prompt:
    messages = [(message["role"], message["text"]) for message in row.messages]

    def template(args: dict) -> PromptResult:
        values = {key: value for key, value in (args or {}).items() if isinstance(key, str)}
        return PromptResult([PromptMessage(role, render(text, values)) for role, text in messages],
                            description=row.description or None)

    return Prompt.define(template, name=row.name, title=row.title or None,
                         description=row.description or None, arguments=list(row.arguments))


def resource_of(row: Any) -> Resource:
    stored_file = row.file if row.file else None
    text = row.text

    def contents() -> Any:
        if stored_file is None:
            return text
        with stored_file.open("rb") as handle:  # storage: the project's MEDIA settings
            return handle.read()

    return Resource(uri=row.uri, name=row.name, title=row.title or None,
                    description=row.description or None, mime_type=row.mime_type or None,
                    handler=contents)


def resource_template_of(row: Any) -> ResourceTemplate:
    text = row.text

    def contents(**variables: str) -> str:
        return render(text, variables)

    return ResourceTemplate(uri_template=row.uri_template, name=row.name, title=row.title or None,
                            description=row.description or None, mime_type=row.mime_type or None,
                            handler=contents)


def overridden(primitive: Any, setting: Any) -> Any:
    """``primitive`` as the setting shapes it (itself when the setting overrides nothing); raises
    ValueError when a tool's curation no longer fits what code registers."""
    annotations = setting.annotations if isinstance(primitive, Tool) else None
    if isinstance(primitive, Tool) and (setting.exposed_name or setting.hidden_arguments
                                        or setting.fixed_arguments):
        primitive = curate(primitive, name=setting.exposed_name or None,
                           hidden_arguments=setting.hidden_arguments or (),
                           fixed_arguments=setting.fixed_arguments or None)
    if not setting.title and not setting.description and annotations is None:
        return primitive
    shaped = copy.copy(primitive)
    if setting.title:
        shaped.title = setting.title
    if setting.description:
        shaped.description = setting.description
    if annotations is not None:
        shaped.annotations = tool_annotations(annotations)
    return shaped
