"""``initialize``, ``ping`` and ``logging/setLevel``."""

from __future__ import annotations

from typing import Any

from mcp_protocol import versions
from mcp_protocol.errors import InvalidParamsError, InvalidRequestError

from .. import logging_levels
from ..context import ServerContext
from .params import as_object


async def initialize(ctx: ServerContext) -> dict[str, Any]:
    params = as_object(ctx.params, "initialize")
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise InvalidParamsError("Invalid params: initialize needs a string 'protocolVersion'")
    capabilities = params.get("capabilities")
    if not isinstance(capabilities, dict):
        raise InvalidParamsError("Invalid params: initialize needs a 'capabilities' object")
    client_info = params.get("clientInfo")
    if not (
        isinstance(client_info, dict)
        and isinstance(client_info.get("name"), str)
        and isinstance(client_info.get("version"), str)
    ):
        raise InvalidParamsError("Invalid params: 'clientInfo' needs string 'name' and 'version'")
    session = ctx.session
    if session.initialized:
        raise InvalidRequestError("Server already initialized")
    server = ctx.server
    version = versions.negotiate(requested, server.configuration.protocol_version)
    session.initialized = True
    session.protocol_version = version
    session.client_info = client_info
    session.client_capabilities = capabilities
    ctx.instrumentation["client"] = {"name": client_info["name"], "version": client_info["version"]}
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": _copied(server.capabilities_for(version)),
        "serverInfo": server.server_info_for(version),
    }
    if server.instructions is not None and version != "2024-11-05":
        result["instructions"] = server.instructions
    return result


def _copied(value: Any) -> Any:
    """A copy of JSON-like data (what middleware may edit of a result must not edit the server's
    own), several times cheaper than ``copy.deepcopy``, which keeps a memo for shared objects."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copied(item) for item in value]
    return value


async def ping(ctx: ServerContext) -> dict:
    return {}


async def set_level(ctx: ServerContext) -> dict:
    params = as_object(ctx.params, "logging/setLevel")
    level = params.get("level")
    if not logging_levels.is_level(level):
        raise InvalidParamsError(
            f"Invalid params: level must be one of {', '.join(logging_levels.LEVELS)}",
            data={"level": level},
        )
    await ctx.session.set_log_level(level)
    return {}
