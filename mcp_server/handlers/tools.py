"""``tools/list`` and ``tools/call``."""

from __future__ import annotations

from typing import Any

from mcp_protocol.cancellation import CancelledError
from mcp_protocol.content import Text
from mcp_protocol.errors import InternalError, InvalidParamsError, MCPError
from mcp_protocol.versions import is_modern_version

from .. import mrtr, ports, resolution
from ..asks import AskDeclinedError
from ..context import ServerContext
from ..input_required import InputRequiredResult
from ..invoke import call_user_code
from ..primitives.tool import Tool
from ..primitives.tool_response import ToolResponse
from ..registry import guard
from . import cache_hints
from .pagination import page
from .params import as_object, required_string

INTERNAL_ERROR_TEXT = "Internal error occurred"


async def list_tools(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    params = as_object(ctx.params, "tools/list")
    registry = await server.registry_view(ctx)
    offered = [tool for tool in registry.tools.values() if tool.offered_in(registry.tools)]
    tools, next_cursor = page(offered, params, server.page_size)
    handshake = not is_modern_version(ctx.protocol_version)
    result: dict[str, Any] = {"tools": [_entry(tool, handshake) for tool in tools]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)


def _entry(tool: Tool, handshake: bool) -> dict[str, Any]:
    entry = tool.to_dict()
    # Handshake revisions require an object root for outputSchema, and strict clients reject
    # the whole list otherwise; an SEP-2106 schema with another root is for modern clients only.
    if handshake and entry.get("outputSchema", {}).get("type") != "object":
        entry.pop("outputSchema", None)
    return entry


async def call_tool(ctx: ServerContext) -> dict[str, Any]:
    server = ctx.server
    data = ctx.instrumentation
    params = as_object(ctx.params, "tools/call")
    name = required_string(params, "name", "tools/call")
    tool = await guard.find(ctx, "tools", name)
    if tool is not None and type(tool).offered_in is not Tool.offered_in \
            and not tool.offered_in((await server.registry_view(ctx)).tools):
        tool = None  # not offered to this principal: unknown, as a tool it may not see
    if tool is None:
        data["error"] = "tool_not_found"
        raise InvalidParamsError(f"Tool not found: {name}", data={"name": name})
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParamsError("Invalid params: 'arguments' of tools/call must be an object")
    data["tool_name"] = name
    data["tool_arguments"] = arguments

    missing = tool.input_schema.missing_required(arguments)
    if missing:
        data["error"] = "missing_required_arguments"
        return _error_result(f"Missing required arguments: {', '.join(missing)}")
    # A background call is always checked: nothing is queued that the tool would refuse.
    if server.configuration.validate_tool_call_arguments or tool.background:
        errors = tool.input_schema.errors(arguments)
        if errors:
            data["error"] = "invalid_schema"
            return _error_result(f"Invalid arguments: {'; '.join(errors)}")
    if tool.background:
        background = ports.implementation(ports.BackgroundCalls)
        if background is None:
            raise InternalError(f"Tool {name} runs in the background, and background calls are not "
                                "installed (the mcp_server app is not ready)")
        return await background.call(ctx, tool, arguments)
    return await run_tool(ctx, tool, arguments)


async def run_tool(ctx: ServerContext, tool: Tool, arguments: dict) -> dict[str, Any]:
    """Run a tool whose arguments were checked, wherever it runs (a web process, a worker):
    its result, or an error result when it raised something other than an MCP error."""
    server = ctx.server
    data = ctx.instrumentation
    try:
        value = await mrtr.run_rounds(ctx, lambda: _invoke(tool, arguments, ctx))
    except AskDeclinedError as exc:  # the user said no to what the tool declared it needs
        data["error"] = "ask_declined"
        return _error_result(exc.message)
    except (MCPError, CancelledError):
        raise
    except Exception as exc:
        # The client learns that the tool failed, never why (CWE-209); the reporter learns why.
        data["error"] = "internal_error"
        await server.report_exception_async(exc, {"request": ctx.message})
        return _error_result(INTERNAL_ERROR_TEXT)
    if isinstance(value, InputRequiredResult):  # modern wire: no content, no structured fallback
        return mrtr.wire_result(ctx, value)

    result = _as_result(value, tool)
    if server.configuration.validate_tool_call_results and tool.output_schema is not None:
        _check_result(tool, result)
    if not is_modern_version(ctx.protocol_version) and "structuredContent" in result \
            and not isinstance(result["structuredContent"], dict):
        # Handshake revisions type structuredContent as an object; a non-object value (SEP-2106)
        # reaches those clients as its mirrored text content only.
        del result["structuredContent"]
    return result


async def _invoke(tool: Tool, arguments: dict, ctx: ServerContext) -> Any:
    arguments = tool.bound(arguments)  # a curated tool's fixed and hidden arguments
    extra = {"server_context": ctx} if tool.wants_context else {}
    plan = resolution.plan_of(tool.handler)
    if plan is None:
        if tool.arguments_as_dict:
            return await call_user_code(tool.handler, arguments, **extra)
        return await call_user_code(tool.handler, **arguments, **extra)
    if tool.arguments_as_dict:
        return await resolution.call(ctx, plan, arguments, tool.handler, arguments, **extra)
    # A declared parameter is the client's answer, never an argument of the same name.
    given = {name: value for name, value in arguments.items() if name not in plan.names}
    return await resolution.call(ctx, plan, arguments, tool.handler, **given, **extra)


def _as_result(value: Any, tool: Tool) -> dict[str, Any]:
    if type(value) is str:  # the usual return: the one text block ToolResponse.from_value makes
        return {"content": [{"type": "text", "text": value}], "isError": False}
    # A dict that already is a tool result (it has content blocks) is kept as given.
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return {**value, "isError": bool(value.get("isError", False))}
    return ToolResponse.from_value(value, structured_output=tool.structured_output).to_dict()


def _check_result(tool: Tool, result: dict) -> None:
    if result.get("isError"):
        return
    if "structuredContent" not in result:
        raise InternalError(
            f"Tool {tool.name} has an output schema but returned no structured content"
        )
    errors = tool.output_schema.errors(result["structuredContent"])
    if errors:
        raise InternalError(
            f"Tool {tool.name} returned structured content that does not match its output "
            f"schema: {'; '.join(errors)}"
        )


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [Text(text).to_dict()], "isError": True}
