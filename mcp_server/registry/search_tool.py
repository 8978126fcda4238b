"""The tool search: a tool that finds, among the many tools a server offers, those for a task
described in words (BM25, ``tool_search.py``), searching only what the caller may see.

The default server registers it when ``MCP_SERVER["TOOL_SEARCH"]`` is a dict; another server adds
``ToolSearch(threshold=..., max_results=...)`` itself. It is offered (listed and callable) to a
principal who sees more than ``threshold`` other tools; ``tools/list`` still lists every tool: the
search helps an assistant through a long list, it does not replace it.
"""

from __future__ import annotations

from typing import Any

from ..primitives.tool import Tool
from .tool_search import ToolIndex, words

DEFAULTS = {"THRESHOLD": 50, "MAX_RESULTS": 10}


def options_from(value: Any) -> dict[str, int] | None:
    """``MCP_SERVER["TOOL_SEARCH"]`` over its defaults as ``ToolSearch`` keywords (None: off);
    ValueError naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"must be None or a dict with THRESHOLD and MAX_RESULTS, not {value!r}")
    unknown = sorted(set(value) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown keys {', '.join(unknown)}; the known ones are {', '.join(DEFAULTS)}")
    merged = {**DEFAULTS, **value}
    return {"threshold": _count(merged["THRESHOLD"], "THRESHOLD", 0),
            "max_results": _count(merged["MAX_RESULTS"], "MAX_RESULTS", 1)}


def _count(value: Any, key: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{key} must be an integer, {least} or more, not {value!r}")
    return value


_FOUND = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object"},
        "score": {"type": "number"},
    },
    "required": ["name", "inputSchema", "score"],
}


class ToolSearch(Tool):
    """Find the tools for a task; see the module."""

    name = "search_tools"
    title = "Search tools"
    description = ("Find the tools for a task among the many this server offers. Describe the task in "
                   "a few words (for example \"close a support ticket\"); the best matching tools come "
                   "back with their names, descriptions and input schemas, best first. Then call the "
                   "tool you chose by its name.")
    input_schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1,
                                 "description": "The task, in a few words."}},
        "required": ["query"],
    }
    output_schema = {
        "type": "object",
        "properties": {"tools": {"type": "array", "items": _FOUND},
                       "searched": {"type": "integer", "description": "How many tools were searched."}},
        "required": ["tools", "searched"],
    }
    annotations = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True,
                   "open_world_hint": False}

    def __init__(self, *, threshold: int = DEFAULTS["THRESHOLD"], max_results: int = DEFAULTS["MAX_RESULTS"]):
        super().__init__()
        self.threshold = _count(threshold, "threshold", 0)
        self.max_results = _count(max_results, "max_results", 1)

    def offered_in(self, tools: dict[str, Any]) -> bool:
        others = sum(1 for tool in tools.values() if not isinstance(tool, ToolSearch))
        return others > self.threshold

    async def call(self, query: str, server_context: Any) -> dict[str, Any]:
        if not words(query):  # a tool error the assistant reads, not an internal error
            return {"content": [{"type": "text", "text": f"The query {query!r} has no word to search "
                                 "for: describe the task, for example \"close a support ticket\"."}],
                    "isError": True}
        registry = await server_context.server.registry_view(server_context)
        tools = registry.tools
        candidates = [tool for tool in tools.values()
                      if not isinstance(tool, ToolSearch) and tool.offered_in(tools)]
        found = ToolIndex(candidates).search(query, self.max_results)
        return {"tools": [_found(match.tool, match.score) for match in found], "searched": len(candidates)}


def _found(tool: Tool, score: float) -> dict[str, Any]:
    entry = tool.to_dict()
    kept = {key: entry[key] for key in ("name", "title", "description", "inputSchema") if key in entry}
    return {**kept, "score": round(score, 3)}
