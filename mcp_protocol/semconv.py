"""Names and attributes of the OpenTelemetry semantic conventions for MCP, shared by the server's
and the client's spans (status Development: https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp).

Plain data only: nothing here imports OpenTelemetry.
"""

from __future__ import annotations

from typing import Any

from . import methods

METHOD_NAME = "mcp.method.name"
PROTOCOL_VERSION = "mcp.protocol.version"
SESSION_ID = "mcp.session.id"
RESOURCE_URI = "mcp.resource.uri"
REQUEST_ID = "jsonrpc.request.id"
TOOL_NAME = "gen_ai.tool.name"
PROMPT_NAME = "gen_ai.prompt.name"
OPERATION_NAME = "gen_ai.operation.name"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
RESPONSE_STATUS_CODE = "rpc.response.status_code"
CLIENT_ADDRESS = "client.address"
CLIENT_PORT = "client.port"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL_NAME = "network.protocol.name"
NETWORK_PROTOCOL_VERSION = "network.protocol.version"

EXECUTE_TOOL = "execute_tool"
TOOL_ERROR = "tool_error"
_URI_METHODS = (methods.RESOURCES_READ, methods.RESOURCES_SUBSCRIBE, methods.RESOURCES_UNSUBSCRIBE)


def target_of(method: str, params: Any) -> str | None:
    """The low-cardinality target of a span name: the tool or prompt name (never a resource URI)."""
    if method in (methods.TOOLS_CALL, methods.PROMPTS_GET) and isinstance(params, dict):
        name = params.get("name")
        return name if isinstance(name, str) and name else None
    return None


def span_name(method: str, params: Any) -> str:
    """``{mcp.method.name} {target}``, or the method alone when there is no target."""
    target = target_of(method, params)
    return f"{method} {target}" if target else method


def message_attributes(method: str, params: Any, request_id: Any = None) -> dict[str, Any]:
    """What a request or notification says of itself: method, id, tool, prompt or resource."""
    attributes: dict[str, Any] = {METHOD_NAME: method}
    if request_id is not None:
        attributes[REQUEST_ID] = str(request_id)
    target = target_of(method, params)
    if method == methods.TOOLS_CALL:
        attributes[OPERATION_NAME] = EXECUTE_TOOL
        if target:
            attributes[TOOL_NAME] = target
    elif method == methods.PROMPTS_GET and target:
        attributes[PROMPT_NAME] = target
    elif method in _URI_METHODS and isinstance(params, dict) and isinstance(params.get("uri"), str):
        attributes[RESOURCE_URI] = params["uri"]
    return attributes


def outcome(method: str, response: dict | None) -> tuple[dict[str, Any], str | None]:
    """The attributes a response adds, and the error description when it failed (None when not):
    ``error.type`` and ``rpc.response.status_code`` for a JSON-RPC error (its code as a string),
    ``error.type = tool_error`` for a ``tools/call`` result with ``isError`` true."""
    if not isinstance(response, dict):
        return {}, None
    error = response.get("error")
    if isinstance(error, dict):
        code = str(error.get("code"))
        return {ERROR_TYPE: code, RESPONSE_STATUS_CODE: code}, str(error.get("message") or code)
    result = response.get("result")
    if method == methods.TOOLS_CALL and isinstance(result, dict) and result.get("isError") is True:
        return {ERROR_TYPE: TOOL_ERROR}, "the tool reported an error (isError)"
    return {}, None
