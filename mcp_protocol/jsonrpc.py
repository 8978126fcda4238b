"""JSON-RPC 2.0 framing: classifying incoming messages and building outgoing ones."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, cycle
from json.encoder import c_make_encoder as _c_make_encoder
from json.encoder import encode_basestring as _encode_basestring
from operator import mul
from typing import Any

import orjson

from .errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, MCPError

JSONRPC_VERSION = "2.0"
MAX_JSON_DEPTH = 64
# Objects and arrays in one message at most: building a million tiny containers holds the event
# loop for the better part of a second, and no MCP message needs that many.
MAX_JSON_CONTAINERS = 100_000
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


class DecodeError(ValueError):
    """JSON text refused; :meth:`response` is the error to answer with.

    ``request_id`` is set when the text did parse and named a valid id (a string the server
    cannot keep, say), so the answer still reaches the request that caused it.
    """

    def __init__(self, message: str, code: int = PARSE_ERROR, request_id: Any = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.request_id = request_id

    def response(self) -> dict[str, Any]:
        return error_response(self.request_id, self.code, self.message)


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (math.inf, -math.inf):
        raise ValueError(f"number {token[:40]} overflows a double")
    return value


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_refuse_constant)
# Escapes that may decode to a character no peer or database can keep: NUL (PostgreSQL refuses
# it in text and jsonb) and UTF-16 surrogates (a lone one cannot be encoded as UTF-8). Their
# presence only triggers the exact check, which a literal backslash before them passes.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
# Integers of 19 digits or more may lie outside 64 bits, which orjson reads as a float; the
# standard library reads them exactly. Looked for as a run of nines once every digit is a nine
# (a translation and a substring search cost a few hundred instructions, a regular expression's
# scan a hundred times more).
_NINES = bytes.maketrans(b"012345678", b"999999999")
_LONG_NUMBER = b"9" * 19


def decode(text: str | bytes, max_depth: int = MAX_JSON_DEPTH,
           max_containers: int = MAX_JSON_CONTAINERS) -> Any:
    """Parse one JSON text, refused with :class:`DecodeError` when it breaks a rule.

    Refused: invalid UTF-8 or JSON, more than ``max_containers`` objects and arrays (counted on
    the text before decoding, so such a body costs a scan, not a decode), ``NaN``/``Infinity``
    and numbers that overflow to infinity, nesting deeper than ``max_depth``, and strings holding
    NUL or a lone surrogate. The text is decoded once, by a C decoder (:func:`_parse`; a refused
    text a second time, to say why); the other rules are checked with C string operations, each
    only when a cheap count of the text says it could be broken.
    """
    if isinstance(text, bytes | bytearray):
        raw = text
    else:
        try:
            raw = text.encode("utf-8")  # a str from memory may hold a lone surrogate as is
        except UnicodeError:
            raise DecodeError("Parse error: Invalid JSON") from None  # JSON text is UTF-8
    brackets = raw.count(b"[") + raw.count(b"{")
    skeleton = None
    if brackets > max_containers:
        skeleton = _skeleton(raw)
        if skeleton.count(b"(") > max_containers:
            raise DecodeError(f"Parse error: more than {max_containers} objects and arrays in one message")
    try:
        if brackets > _PAUSE_ABOVE:
            with _collector_paused():
                value = _parse(raw)
        else:  # too few containers to set a collection off: the pause would cost more
            value = _parse(raw)
        too_deep = brackets > max_depth and _skeleton_deeper_than(
            skeleton if skeleton is not None else _skeleton(raw), max_depth)
    except RecursionError:
        raise DecodeError(f"Parse error: JSON nested deeper than {max_depth} levels") from None
    except (UnicodeError, json.JSONDecodeError):
        raise DecodeError("Parse error: Invalid JSON") from None
    except ValueError as exc:  # a refused number or constant, an integer too long to convert
        raise DecodeError(f"Parse error: Invalid JSON: {_reason(exc)}") from None
    request_id = value.get("id") if isinstance(value, dict) and is_valid_id(value.get("id")) else None
    if too_deep:
        raise DecodeError(f"Parse error: JSON nested deeper than {max_depth} levels",
                          request_id=request_id)
    if b"\\u" in raw and _SUSPECT_ESCAPE.search(raw) and not _storable(value):
        raise DecodeError("Invalid Request: strings must not contain NUL characters or lone "
                          "UTF-16 surrogates", INVALID_REQUEST, request_id)
    return value


def _parse(raw: bytes | bytearray) -> Any:
    """The value of ``raw``: orjson's, a few times faster, where it reads the text as the standard
    library would; else the standard library's, whose refusals (and their reasons) are the rule.

    orjson refuses all the standard decoder refuses here (invalid UTF-8, surrogates encoded as
    bytes, ``NaN``, numbers past a double, nesting past 1024) and then the standard decoder runs
    to say why; the one text it reads otherwise, an integer past 64 bits, goes to the standard
    decoder first."""
    if _LONG_NUMBER not in raw.translate(_NINES):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _DECODER.decode(raw.decode("utf-8"))  # strict UTF-8: json.loads of bytes is lenient


def _reason(exc: ValueError) -> str:
    # Our own words, or int()'s about a number's digit count: never the input itself.
    return str(exc).split("\n", 1)[0][:200]


# Containers under which decoding never pauses the collector (its first generation collects
# after 700 allocations: a few dozen containers set off one collection at most).
_PAUSE_ABOVE = 64


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a value is built.

    A decoded value holds no reference cycles, yet building a million small containers would
    set off collections that each walk them all, more than doubling the cost of decoding.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def depth_exceeds(text: bytes | bytearray, limit: int) -> bool:
    """Whether valid JSON ``text`` nests objects and arrays deeper than ``limit``.

    Done with C string operations alone, in time linear in the text: strings are cut out, the
    brackets left are peeled of their empty containers a few times (each peel lowers the height
    by exactly one, and a few of them leave few runs of brackets), and the deepest point of what
    remains is a running sum over its runs of openers and closers. Walking the decoded value
    instead costs several times more on a body of many small containers.
    """
    return _skeleton_deeper_than(_skeleton(text), limit)


def _skeleton(text: bytes | bytearray) -> bytes:
    """The objects and arrays of valid JSON ``text`` outside strings, as ``(`` and ``)``."""
    if b"\\" in text:
        # Escapes only occur inside strings: without them, no quote is left inside a string.
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'"' in text:
        text = b"".join(text.split(b'"')[::2])  # the parts outside strings
    return text.translate(_TO_PARENTHESES, _NOT_BRACKETS)


def _skeleton_deeper_than(skeleton: bytes, limit: int) -> bool:
    peeled = 0
    while skeleton and peeled < _PEELS:
        skeleton = skeleton.replace(b"()", b"")
        peeled += 1
    if not skeleton:
        return peeled > limit
    runs = map(len, _RUNS.findall(skeleton))  # openers and closers in turn, openers first
    return peeled + max(accumulate(map(mul, runs, cycle((1, -1))))) > limit


_TO_PARENTHESES = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_RUNS = re.compile(rb"\(+|\)+")
_PEELS = 8


def _storable(value: Any) -> bool:
    """No string in ``value`` (key or value) holds NUL or a lone surrogate (the exact check)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    # In json.dumps' output every backslash starts an escape; once escaped backslashes are
    # gone, a remaining \u0000 is a NUL.
    return "\\u0000" not in text.replace("\\\\", "")


# Made once: json.dumps with any option builds a new encoder for every message.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _encode(message: Any) -> str:
    """``_ENCODER.encode(message)``, straight to the C encoder it would make (the same arguments,
    a circular reference still refused), without its two Python frames and float closure."""
    if _c_make_encoder is None or isinstance(message, str):
        return _ENCODER.encode(message)
    return "".join(_c_make_encoder({}, _ENCODER.default, _encode_basestring, None, ":", ",",
                                   False, False, False)(message, 0))


# What orjson writes that the standard encoder would not is handed to the standard encoder: a
# dataclass and a datetime are refused there, as they are in json.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def encode(message: Any) -> str:
    """Compact JSON text that UTF-8 can carry; raises ValueError for NaN or infinities, which are
    not JSON at all (Python would write the bare tokens ``NaN``/``Infinity`` that peers cannot
    parse).

    A lone surrogate in a string (UTF-8 has no form for one) is written as U+FFFD, as the WHATWG
    encoders do, so that a handler's result holding one is still sent rather than lost.

    orjson writes it, a few times faster, unless the text could differ from the standard
    encoder's: orjson refuses integers past 64 bits, keys that are not strings and lone
    surrogates, and writes NaN as ``null``, so a refusal, or a ``null`` anywhere in its text,
    hands the message to the standard encoder. (An enum member or a UUID, which the standard
    encoder refuses, orjson writes as its value.)
    """
    try:
        data = orjson.dumps(message, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        pass
    else:
        if b"null" not in data:
            return data.decode("utf-8")
    return _standard_encode(message)


def _standard_encode(message: Any) -> str:
    text = _encode(message)
    if not text.isascii():  # O(1); only text with non-ASCII characters can hold a surrogate
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def in_place_of_unencodable(message: Any) -> dict | None:
    """The answer to send instead of a response :func:`encode` refuses (a result holding NaN or an
    infinity, or an object JSON has no form for): -32603 for the same request, its id kept, so the
    request is answered rather than lost. None when ``message`` is no response: a request or
    notification that cannot be encoded is not sent."""
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return None
    request_id = message["id"]
    return error_response(request_id if is_valid_id(request_id) else None, INTERNAL_ERROR, "Internal error")
