"""Middleware the tests install, by import string or as factories."""

from __future__ import annotations

import os
from typing import Any

from mcp_protocol.errors import MCPError

# What Recording middleware saw, in order: (label, "in" | "out", method, era).
seen: list[tuple[str, str, str, str]] = []


def recording(label: str) -> Any:
    def factory(get_response: Any) -> Any:
        async def middleware(call: Any) -> Any:
            seen.append((label, "in", call.method, call.era))
            try:
                return await get_response(call)
            finally:
                seen.append((label, "out", call.method, call.era))
        return middleware
    return factory


class Refuse:
    """Refuses every call of the tool named ``forbidden`` (-32050), and every roots notification."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    async def __call__(self, call: Any) -> Any:
        if call.tool == "forbidden" or call.method == "notifications/roots/list_changed":
            raise MCPError("Forbidden by middleware", code=-32050)
        return await self.get_response(call)


class Shout:
    """Changes the params: the ``text`` argument of a tool call in upper case."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    async def __call__(self, call: Any) -> Any:
        arguments = call.params.get("arguments") if isinstance(call.params, dict) else None
        if isinstance(arguments, dict) and isinstance(arguments.get("text"), str):
            call.params = {**call.params, "arguments": {**arguments, "text": arguments["text"].upper()}}
        return await self.get_response(call)


class StampBackground:
    """Marks the result of a background call with the process whose middleware saw it run."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    async def __call__(self, call: Any) -> Any:
        result = await self.get_response(call)
        if call.background and isinstance(result, dict):
            meta = {**(result.get("_meta") or {}), "test/middleware": {"pid": os.getpid(), "era": call.era}}
            result = {**result, "_meta": meta}
        return result


def not_async(get_response: Any) -> Any:
    def middleware(call: Any) -> Any:
        return get_response(call)
    return middleware
