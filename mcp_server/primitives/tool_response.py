"""What a tool returns: content blocks, optional structured content, and the error flag."""

from __future__ import annotations

import json
from typing import Any

from mcp_protocol.content import Text, to_wire

_UNSET: Any = object()


class ToolResponse:
    """``ToolResponse([content...], structured_content=..., error=False, meta=None)``.

    ``structured_content`` may be any JSON value (SEP-2106); a non-object value with no content
    blocks is mirrored as one text block so that clients reading only ``content`` see it.
    """

    def __init__(
        self,
        content: list | None = None,
        *,
        structured_content: Any = _UNSET,
        error: bool = False,
        meta: dict | None = None,
    ):
        self.content = list(content or [])
        self.structured_content = structured_content
        self.error = bool(error)
        self.meta = meta

    @property
    def has_structured_content(self) -> bool:
        return self.structured_content is not _UNSET

    def to_dict(self) -> dict[str, Any]:
        content = [to_wire(block) for block in self.content]
        result: dict[str, Any] = {"content": content, "isError": self.error}
        if self.has_structured_content:
            result["structuredContent"] = self.structured_content
            if not content and not isinstance(self.structured_content, dict):
                result["content"] = [Text(json.dumps(self.structured_content)).to_dict()]
        if self.meta is not None:
            result["_meta"] = self.meta
        return result

    @classmethod
    def from_value(cls, value: Any, *, structured_output: bool) -> ToolResponse:
        """Turn what a decorated function returned into a response.

        A string becomes text; a content block or list of them is content; with an output
        schema, any other value is the structured content (and its JSON the text).
        """
        if isinstance(value, ToolResponse):
            return value
        if isinstance(value, str):
            return cls([Text(value)])
        if hasattr(value, "to_dict") and not isinstance(value, dict):
            return cls([value])
        if isinstance(value, list) and value and all(_is_block(item) for item in value):
            return cls(value)
        if value is None and not structured_output:
            return cls([])
        text = json.dumps(value, default=str)
        if structured_output or isinstance(value, dict):
            return cls([Text(text)], structured_content=value)
        return cls([Text(text)])


def _is_block(item: Any) -> bool:
    if isinstance(item, dict):
        return isinstance(item.get("type"), str)
    return hasattr(item, "to_dict")
