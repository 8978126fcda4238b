"""``completion/complete``."""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import InvalidParamsError

from ..context import ServerContext
from ..invoke import call_with_params
from .params import as_object

MAX_VALUES = 100


async def complete(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "completion/complete")
    ref = params.get("ref")
    if not isinstance(ref, dict) or not isinstance(ref.get("type"), str):
        raise InvalidParamsError("Invalid params: completion/complete needs 'ref' with a 'type'")
    argument = params.get("argument")
    if not (
        isinstance(argument, dict)
        and isinstance(argument.get("name"), str)
        and isinstance(argument.get("value"), str)
    ):
        raise InvalidParamsError("Invalid params: 'argument' needs string 'name' and 'value'")
    _check_reference(await server.registry_view(ctx), ref)
    if server.hooks.completion is None:
        return _empty()
    return _normalize(await call_with_params(server.hooks.completion, params, ctx))


def _check_reference(registry: Any, ref: dict) -> None:
    if ref["type"] == "ref/prompt":
        name = ref.get("name")
        if name not in registry.prompts:
            raise InvalidParamsError(f"Prompt not found {name}", data={"name": name})
    elif ref["type"] == "ref/resource":
        uri = ref.get("uri")
        known = uri in registry.resources or any(
            t.uri_template == uri for t in registry.resource_templates.values()
        )
        if not known:
            raise InvalidParamsError(f"Resource not found: {uri}", data={"uri": uri})
    else:
        raise InvalidParamsError(
            f"Invalid params: ref.type must be 'ref/prompt' or 'ref/resource', not {ref['type']!r}"
        )


def _normalize(value: Any) -> dict[str, Any]:
    completion = value.get("completion") if isinstance(value, dict) else None
    if not isinstance(completion, dict) or not isinstance(completion.get("values"), list):
        return _empty()
    values = [str(v) for v in completion["values"]]
    result: dict[str, Any] = {"values": values[:MAX_VALUES]}
    if "total" in completion:
        result["total"] = completion["total"]
    elif len(values) > MAX_VALUES:
        result["total"] = len(values)
    result["hasMore"] = len(values) > MAX_VALUES or bool(completion.get("hasMore", False))
    return {"completion": result}


def _empty() -> dict[str, Any]:
    return {"completion": {"values": [], "hasMore": False}}
