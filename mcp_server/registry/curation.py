"""The checks of an administrator's curation of a tool registered in code (its exposed name, hidden
and fixed arguments: ``PrimitiveSetting``), shared by admin's form and the REST API. Each raises
ValueError with a message for a person; the overlay applies what passes (``stored.overridden``)."""

from __future__ import annotations

from typing import Any

from ..primitives.curated import curated_schema
from ..primitives.tool import check_tool_name


def exposed_name(value: Any, *, code_name: str, registered: Any, server_name: str, pk: Any) -> str:
    """The name a tool is served under instead of ``code_name`` ("" for its own): a valid tool
    name, not another tool's in code (``registered``: the server's tools) nor another row's."""
    from ..models import PrimitiveSetting

    value = (value or "").strip()
    if not value or value == code_name:
        return ""
    check_tool_name(value)
    if value in registered:
        raise ValueError(f"{value!r} is the name of another tool registered in code.")
    taken = PrimitiveSetting.objects.filter(server=server_name, kind=PrimitiveSetting.Kind.TOOL,
                                            exposed_name=value).exclude(pk=pk).first()
    if taken is not None:
        raise ValueError(f"{value!r} is already the exposed name of the tool {taken.name}.")
    return value


def hidden_arguments(value: Any) -> list[str]:
    value = value or []
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise ValueError('Give a JSON list of argument names, for example ["verbose"].')
    return value


def fixed_arguments(value: Any) -> dict[str, Any]:
    value = value or {}
    if not isinstance(value, dict):
        raise ValueError('Give a JSON object of argument names and values, for example {"tenant": "acme"}.')
    return value


def arguments(tool: Any, hidden: list[str], fixed: dict[str, Any]) -> None:
    """Whether ``tool``'s schema allows hiding ``hidden`` and fixing ``fixed`` (see ``curate``)."""
    if tool is None or not (hidden or fixed):
        return
    try:
        curated_schema(tool.input_schema, hidden, fixed, tool_name=tool.name)
    except ValueError as exc:
        text = str(exc)
        raise ValueError(f"{text[0].upper()}{text[1:]}.") from None
