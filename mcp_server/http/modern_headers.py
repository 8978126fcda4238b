"""The standard request headers of the 2026-07-28 revision, checked against the body (SEP-2243).

``Mcp-Method`` on every request, ``Mcp-Name`` on ``tools/call``, ``resources/read`` and
``prompts/get`` (and, when sent, on the Tasks extension's ``tasks/*``), and one
``Mcp-Param-{Name}`` per tool argument whose input-schema property carries ``x-mcp-header``
(HTTP-28). Any violation is -32020 (HeaderMismatch), answered with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp_protocol import methods
from mcp_protocol.errors import HEADER_MISMATCH, MCPError

from .checks import decode_header_value
from .request import Request

PARAM_HEADER_PREFIX = "mcp-param-"
# A header value a client may send as it is: visible ASCII, spaces and tabs (RFC 9110).
_PLAIN_VALUE = re.compile(r"[\x20-\x7e\t]*")


class HeaderMismatchError(MCPError):
    code = HEADER_MISMATCH
    default_message = "Header mismatch"


def check_modern_headers(request: Request, tools: Mapping[str, Any], method: str, params: Any) -> None:
    header_method = request.header("mcp-method")
    if header_method is None:
        raise HeaderMismatchError("Header mismatch: the Mcp-Method header is required")
    if header_method.strip() != method:
        raise HeaderMismatchError(f"Header mismatch: Mcp-Method header value {header_method!r} does "
                                  f"not match body value {method!r}")
    name_param = methods.NAME_PARAMS.get(method)
    if name_param is None:
        return
    body_value = params.get(name_param) if isinstance(params, dict) else None
    header_name = request.header("mcp-name")
    if header_name is None and method in methods.TASK_METHODS:
        return  # checked when sent (SEP-2663 routing); a client that leaves it out is still served
    if header_name is None:
        raise HeaderMismatchError(f"Header mismatch: the Mcp-Name header is required for {method}")
    if decode_header_value(header_name.strip()) != body_value:
        raise HeaderMismatchError(f"Header mismatch: Mcp-Name header value {header_name!r} does not "
                                  f"match body value {body_value!r}")
    if method == methods.TOOLS_CALL and isinstance(body_value, str):
        tool = tools.get(body_value)
        if tool is not None:
            arguments = params.get("arguments")
            check_param_headers(request, tool.input_schema.header_paths,
                                arguments if isinstance(arguments, dict) else {})


_MISSING = object()


def _value_at(arguments: dict, path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def check_param_headers(request: Request, paths: dict[str, tuple[str, ...]], arguments: dict) -> None:
    """Each annotated argument present in the body needs its header, carrying the same value."""
    for name, path in paths.items():
        value = _value_at(arguments, path)
        header = request.header(PARAM_HEADER_PREFIX + name)
        if value is _MISSING or value is None:
            if header is not None:
                raise HeaderMismatchError(f"Header mismatch: Mcp-Param-{name} header sent but "
                                          f"argument {'.'.join(path)!r} is absent from the body")
            continue
        if header is None:
            raise HeaderMismatchError(f"Header mismatch: the Mcp-Param-{name} header is required, "
                                      f"as argument {'.'.join(path)!r} is in the body")
        if not _PLAIN_VALUE.fullmatch(header):
            raise HeaderMismatchError(f"Header mismatch: Mcp-Param-{name} holds invalid characters")
        decoded = decode_header_value(header.strip())
        if decoded is None or not _same(decoded, value):
            raise HeaderMismatchError(f"Header mismatch: Mcp-Param-{name} header value {header!r} "
                                      f"does not match body value {value!r}")


def _same(text: str, value: Any) -> bool:
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, int | float):
        # Compared as numbers: "42" and 42.0 are the same integer (SEP-2243).
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return isinstance(value, str) and text == value
