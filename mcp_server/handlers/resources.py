"""``resources/list``, ``resources/read``, ``resources/templates/list`` and subscriptions."""

from __future__ import annotations

from functools import partial
from typing import Any

from .. import mrtr, resolution
from ..context import ServerContext
from ..errors import ResourceNotFoundError
from ..input_required import InputRequiredResult
from ..invoke import call_with_params
from ..primitives.resource import read_result
from ..registry import guard
from . import cache_hints
from .pagination import page
from .params import as_object, required_string, subscription_uri


async def list_resources(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "resources/list")
    if server.hooks.resources_list is not None:
        items = list(await call_with_params(server.hooks.resources_list, params, ctx) or [])
    else:
        registered = (await server.registry_view(ctx)).resources.values()
        items = [r for r in registered if getattr(r, "listed", True)]
    resources, next_cursor = page(items, params, server.page_size)
    result: dict[str, Any] = {"resources": [_wire(r) for r in resources]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)


async def list_templates(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "resources/templates/list")
    registry = await server.registry_view(ctx)
    templates, next_cursor = page(list(registry.resource_templates.values()), params, server.page_size)
    result: dict[str, Any] = {"resourceTemplates": [t.to_dict() for t in templates]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)


async def read_resource(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "resources/read")
    uri = required_string(params, "uri", "resources/read")
    ctx.instrumentation["resource_uri"] = uri
    if server.hooks.resources_read is not None:
        value = await mrtr.run_rounds(
            ctx, lambda: call_with_params(server.hooks.resources_read, params, ctx))
        result = value if isinstance(value, InputRequiredResult) else read_result(value, uri)
    else:
        result = await _route(ctx, uri, params)
    if isinstance(result, InputRequiredResult):  # no contents wrapper and no cache hints (MRTR-02)
        return mrtr.wire_result(ctx, result)
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)


async def _route(ctx: ServerContext, uri: str, params: dict) -> dict[str, Any] | InputRequiredResult:
    server, session = ctx.server, ctx.session
    registry = await server.registry_for(session.user_id)
    resource = registry.resources.get(uri)
    if resource is not None and resource.readable and await guard.usable(
            server, resource, "resources", uri, session.principal, session.user_id):
        extra = {"server_context": ctx} if resource.wants_context else {}
        plan = resolution.plan_of(resource.handler)
        value = await mrtr.run_rounds(ctx, lambda: resolution.call(ctx, plan, {}, resource.handler, **extra))
        return value if isinstance(value, InputRequiredResult) \
            else read_result(value, uri, resource.mime_type)
    for template in registry.resource_templates.values():
        variables = template.match(uri) if template.readable else None
        if variables is not None and await guard.usable(
                server, template, "resource_templates", uri, session.principal, session.user_id):
            ctx.instrumentation["resource_template"] = template.uri_template
            extra = {"server_context": ctx} if template.wants_context else {}
            plan = resolution.plan_of(template.handler)
            value = await mrtr.run_rounds(
                ctx, partial(resolution.call, ctx, plan, variables, template.handler, **variables, **extra))
            return value if isinstance(value, InputRequiredResult) \
                else read_result(value, uri, template.mime_type)
    if server.serves_reads or (registry is not server and (
            registry.resource_templates or any(r.readable for r in registry.resources.values()))):
        raise ResourceNotFoundError(uri, params)
    # Nothing registered serves reads: a read is a no-op, as documented.
    return {"contents": []}


async def subscribe(ctx: ServerContext) -> dict[str, Any]:
    return await _subscription(ctx, "resources/subscribe", ctx.server.hooks.resources_subscribe,
                               add=True)


async def unsubscribe(ctx: ServerContext) -> dict[str, Any]:
    return await _subscription(ctx, "resources/unsubscribe",
                               ctx.server.hooks.resources_unsubscribe, add=False)


async def _subscription(ctx: ServerContext, method: str, handler: Any, *, add: bool) -> dict:
    params = as_object(ctx.params, method)
    uri = subscription_uri(params, method)
    ctx.instrumentation["resource_uri"] = uri
    if add:
        await ctx.session.subscribe(uri)
    else:
        await ctx.session.unsubscribe(uri)
    returned = await call_with_params(handler, params, ctx) if handler is not None else None
    # Only _meta of what the handler returns reaches the wire.
    if isinstance(returned, dict) and isinstance(returned.get("_meta"), dict):
        return {"_meta": returned["_meta"]}
    return {}


def _wire(item: Any) -> Any:
    return item.to_dict() if hasattr(item, "to_dict") else item
