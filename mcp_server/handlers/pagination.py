"""Cursor pagination of list results: the cursor is the zero-based offset, as a string."""

from __future__ import annotations

import re
from typing import Any

from mcp_protocol.errors import InvalidParamsError

_DIGITS = re.compile(r"[0-9]+")


def page(items: list, params: dict, page_size: int | None) -> tuple[list, str | None]:
    cursor = params.get("cursor")
    start = 0 if cursor is None else _offset(cursor, len(items))
    if page_size is None:
        return items[start:], None
    end = start + page_size
    return items[start:end], (str(end) if end < len(items) else None)


def _offset(cursor: Any, count: int) -> int:
    if not isinstance(cursor, str) or not _DIGITS.fullmatch(cursor) or int(cursor) >= count:
        raise InvalidParamsError(f"Invalid cursor: {cursor!r}")
    return int(cursor)


def check_page_size(page_size: Any) -> int | None:
    if page_size is None:
        return None
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size <= 0:
        raise ValueError(f"page_size must be a positive integer or None, not {page_size!r}")
    return page_size
