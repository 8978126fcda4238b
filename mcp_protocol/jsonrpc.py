"""JSON-RPC 2.0 framing: classifying incoming messages and building outgoing ones."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, MCPError

JSONRPC_VERSION = "2.0"
MAX_JSON_DEPTH = 64
_STRING_ID = re.compile(r"[A-Za-z0-9_-]+")
_MISSING = object()


def is_valid_id(value: Any) -> bool:
    """Request ids are integers or strings of ``[A-Za-z0-9_-]+``; floats, booleans and objects are not."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and _STRING_ID.fullmatch(value) is not None


def response(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": error}


def error_from(request_id: Any, exc: MCPError) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": exc.to_dict()}


def request(request_id: Any, method: str, params: dict | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        message["params"] = params
    return message


@dataclass(frozen=True, slots=True)
class Incoming:
    """One classified incoming message.

    ``kind`` is ``"request"``, ``"notification"``, ``"response"`` or ``"invalid"``;
    for an invalid message ``error`` is the error response to send back.
    """

    kind: str
    message: Any
    id: Any = None
    method: str | None = None
    params: Any = None
    error: dict | None = None


def classify(message: Any) -> Incoming:
    """Validate the JSON-RPC envelope of one decoded message (not a batch)."""
    if not isinstance(message, dict):
        return _invalid(message, None, INVALID_REQUEST, "Request must be an object")
    raw_id = message.get("id", _MISSING)
    echo_id = raw_id if raw_id is not _MISSING and is_valid_id(raw_id) else None
    if message.get("jsonrpc") != JSONRPC_VERSION:
        return _invalid(message, echo_id, INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0'")
    if "method" not in message and ("result" in message or "error" in message):
        if not is_valid_id(raw_id):
            return _invalid(message, None, INVALID_REQUEST, "Invalid Request: response id is invalid")
        return Incoming("response", message, id=raw_id)
    if raw_id is not _MISSING and raw_id is not None and not is_valid_id(raw_id):
        return _invalid(
            message, None, INVALID_REQUEST,
            "Invalid Request: id must be an integer or a string of [A-Za-z0-9_-]",
        )
    method = message.get("method")
    if not isinstance(method, str) or method.startswith("rpc."):
        return _invalid(
            message, echo_id, INVALID_REQUEST,
            "Invalid Request: method must be a string not starting with 'rpc.'",
        )
    params = message.get("params")
    is_notification = raw_id is _MISSING or raw_id is None
    if params is not None and not isinstance(params, dict | list):
        if is_notification:  # never answered, even when malformed: the bad params are dropped
            return Incoming("notification", message, method=method, params=None)
        return _invalid(message, echo_id, INVALID_PARAMS, "Invalid params: must be an object or array")
    # An absent or null id makes a notification: there is nothing to answer to.
    if is_notification:
        return Incoming("notification", message, method=method, params=params)
    return Incoming("request", message, id=raw_id, method=method, params=params)


def _invalid(message: Any, request_id: Any, code: int, text: str) -> Incoming:
    return Incoming("invalid", message, id=request_id, error=error_response(request_id, code, text))


def parse_error(detail: str = "Invalid JSON") -> dict[str, Any]:
    return error_response(None, PARSE_ERROR, f"Parse error: {detail}")


def json_depth_exceeds(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests objects and arrays deeper than ``limit``, without parsing it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def decode(text: str | bytes) -> Any:
    """Parse JSON text; raises :class:`ValueError` with a readable reason."""
    if json_depth_exceeds(text):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(text)


def encode(message: Any) -> str:
    """Compact JSON text; raises ValueError for NaN or infinities, which are not JSON at all
    (Python would write the bare tokens ``NaN``/``Infinity`` that peers cannot parse)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
