"""``prompts/list`` and ``prompts/get``."""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import InvalidParamsError

from .. import mrtr, resolution
from ..context import ServerContext
from ..input_required import InputRequiredResult
from ..primitives.prompt import prompt_result
from ..registry import guard
from . import cache_hints
from .pagination import page
from .params import as_object, optional_object, required_string


async def list_prompts(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "prompts/list")
    registry = await server.registry_view(ctx)
    prompts, next_cursor = page(list(registry.prompts.values()), params, server.page_size)
    result: dict[str, Any] = {"prompts": [prompt.to_dict() for prompt in prompts]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)


async def get_prompt(ctx: ServerContext) -> dict[str, Any]:
    params = as_object(ctx.params, "prompts/get")
    name = required_string(params, "name", "prompts/get")
    prompt = await guard.find(ctx, "prompts", name)
    if prompt is None:
        ctx.instrumentation["error"] = "prompt_not_found"
        raise InvalidParamsError(f"Prompt not found {name}", data={"name": name})
    ctx.instrumentation["prompt_name"] = name
    arguments = optional_object(params, "arguments", "prompts/get")
    missing = [a for a in prompt.required_arguments if a not in arguments]
    if missing:
        ctx.instrumentation["error"] = "missing_required_arguments"
        raise InvalidParamsError(f"Missing required arguments: {', '.join(missing)}")
    extra = {"server_context": ctx} if prompt.wants_context else {}
    plan = resolution.plan_of(prompt.handler)
    value = await mrtr.run_rounds(
        ctx, lambda: resolution.call(ctx, plan, arguments, prompt.handler, arguments, **extra))
    if isinstance(value, InputRequiredResult):
        return mrtr.wire_result(ctx, value)
    return prompt_result(value)
