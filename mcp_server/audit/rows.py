"""Turning what the writer queued into ``AuditRecord`` rows: a request the dispatcher served, or
a background call that reached its final state. Runs on the writer's thread, off the call's path:
the digest, the redaction and the result's size are computed here, a few microseconds a row
(encoders built once, the redaction policy read once a batch)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from mcp_protocol import methods
from mcp_protocol.trace_context import TRACEPARENT_META_KEY

from ..models import AuditRecord, ToolCall
from ..redaction import REDACTED
from ..settings import mcp_settings

# Plain strings (the driver adapts them directly), equal to AuditRecord.Outcome's values.
OK, ERROR, TOOL_ERROR, CANCELLED, INPUT_REQUIRED = (str(value) for value in (
    AuditRecord.Outcome.OK, AuditRecord.Outcome.ERROR, AuditRecord.Outcome.TOOL_ERROR,
    AuditRecord.Outcome.CANCELLED, AuditRecord.Outcome.INPUT_REQUIRED))


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(*, sort_keys: bool, allow_nan: bool, default: Callable) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, ...).encode``, made once: the
    json module makes its C encoder anew at each call, which costs more than encoding a call's
    small arguments. (Without the module's cycle check: arguments and results are parsed or
    already sent JSON, never cyclic.)"""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False,
                                allow_nan=allow_nan, default=default).encode
    encode = make(None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, allow_nan)
    return lambda value: "".join(encode(value, 0))


# mcp_server.redaction.digest's canonical JSON, and jsonrpc.encode's compact JSON.
_canonical = _encoder(sort_keys=True, allow_nan=True, default=str)
_compact = _encoder(sort_keys=False, allow_nan=False, default=_refuse)
Redactor = Callable[[str, Any], Any]


def digest(value: Any) -> str:
    """``mcp_server.redaction.digest(value)``, the same text hashed (and, where that raises on a
    lone surrogate, which UTF-8 cannot carry, its surrogatepass bytes: the row is still made)."""
    return hashlib.sha256(_canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def redactor() -> Redactor:
    """``mcp_server.redaction.redact`` with the settings read now (once for a batch of rows): the
    project's ``REDACTION_POLICY``, or ``REDACTED_KEYS`` (a key is redacted when it contains one
    of them, case-insensitive), which returns ``value`` itself when nothing in it is redacted."""
    policy = mcp_settings.REDACTION_POLICY
    if policy is not None:
        return policy
    keys = mcp_settings.REDACTED_KEYS
    global _keys_redactor
    # Made again only when the setting changed (a new list, or the same list edited).
    if _keys_redactor is None or _keys_redactor[0] is not keys or _keys_redactor[1] != keys:
        _keys_redactor = (keys, list(keys), _keys_redact(tuple(key.lower() for key in keys)))
    return _keys_redactor[2]


_keys_redactor: tuple[Any, list[str], Redactor] | None = None
# Verdicts kept per key: a tool's argument names are few and come back with every call.
_MAX_VERDICTS = 10_000


def _keys_redact(needles: tuple[str, ...]) -> Redactor:
    if not needles:
        return lambda _name, value: value
    verdicts: dict[str, bool] = {}

    def search(key: str) -> bool:
        verdict = verdicts.get(key)
        if verdict is None:
            lowered = key.lower()
            verdict = any(needle in lowered for needle in needles)
            if len(verdicts) >= _MAX_VERDICTS:
                verdicts.clear()
            verdicts[key] = verdict
        return verdict

    def redact(_name: str, value: Any) -> Any:
        if type(value) is dict:  # the usual arguments: keys known to be kept, plain values
            for key, item in value.items():
                if verdicts.get(key) is not False or isinstance(item, dict | list | tuple):
                    return _redact(value, search)
            return value
        return _redact(value, search)

    return redact


def _redact(value: Any, search: Callable) -> Any:
    """``value``, or a copy with what ``search`` finds redacted (only what changed is copied)."""
    if isinstance(value, dict):
        copy = None
        for key, item in value.items():
            if search(key if isinstance(key, str) else str(key)):
                new = REDACTED
            elif isinstance(item, dict | list | tuple):
                new = _redact(item, search)
            else:
                continue
            if new is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = new
        return value if copy is None else copy
    if isinstance(value, list | tuple):
        items = [_redact(item, search) if isinstance(item, dict | list | tuple) else item for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    return value
AUDITED_METHODS = frozenset({methods.TOOLS_CALL, methods.PROMPTS_GET, methods.RESOURCES_READ})
# version-traceid-parentid-flags (W3C Trace Context); version ff and all-zero ids are invalid.
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def trace_id_of(params: Any) -> str | None:
    """The trace id of ``params._meta.traceparent`` when it is a valid W3C traceparent."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get(TRACEPARENT_META_KEY) if isinstance(meta, dict) else None
    match = _TRACEPARENT.match(value) if isinstance(value, str) else None
    if match is None or match[1] == "ff" or set(match[2]) == {"0"} or set(match[3]) == {"0"}:
        return None
    return match[2]


def outcome_of(response: dict | None, error: BaseException | None) -> tuple[str, int | None, Any]:
    """(outcome, JSON-RPC error code, result) of an answer; no answer is a cancel."""
    if response is None:
        return CANCELLED, None, None
    if "error" in response:
        code = response["error"].get("code")
        return ERROR, code if isinstance(code, int) else None, None
    result = response.get("result")
    if isinstance(result, dict):
        if result.get("isError") is True:
            return TOOL_ERROR, None, result
        if result.get("resultType") == "input_required":
            return INPUT_REQUIRED, None, result
    return OK, None, result


def result_size(result: Any) -> int | None:
    if result is None:
        return None
    try:
        text = _compact(result)
    except (TypeError, ValueError):  # the client got -32603 instead; the size is unknown
        return None
    # A lone surrogate goes out as U+FFFD (jsonrpc.encode): three bytes, as surrogatepass counts it.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _arguments(method: str, name: str, params: Any, redact: Redactor) -> tuple[str, Any]:
    """The digest of the arguments, and the redacted arguments as JSON text (the canonical text
    hashed, when nothing was redacted)."""
    if method == methods.RESOURCES_READ or not isinstance(params, dict):
        return "", None  # a read has a URI, no arguments
    arguments = params.get("arguments")
    arguments = {} if arguments is None else arguments
    text = _canonical(arguments)
    kept = redact(name, arguments)
    stored = text if kept is arguments else _canonical(kept)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), stored


# What a row is made of, in the order of ``AuditRecord``'s columns the writer inserts.
COLUMNS = ("time", "user_id", "username", "client_id", "subject", "authentication", "session_id",
           "request_id", "protocol_version", "method", "name", "arguments_digest", "arguments", "outcome",
           "error_code", "duration", "result_size", "background_call", "task", "trace_id")
JSON_COLUMNS = ("request_id", "arguments")  # arguments: JSON text already made


def request_row(entry: tuple, redact: Redactor) -> tuple:
    """The row (values in :data:`COLUMNS` order) of a request the dispatcher served
    (:class:`mcp_server.audit.observer.AuditObserver`): what :func:`_arguments`,
    :func:`outcome_of` and :func:`result_size` do is inline here, for this runs for every call."""
    (finished, duration, method, params, session_id, request_id, protocol_version, principal,
     user_id, username, response, _error) = entry  # the answer tells the outcome
    arguments_digest, arguments, trace_id, name = "", None, None, ""
    if isinstance(params, dict):
        if method == methods.RESOURCES_READ:  # a read has a URI, no arguments
            value = params.get("uri")
        else:
            value = params.get("name")
            arguments = params.get("arguments")
            if arguments is None:
                arguments = {}
        if value is not None:
            name = str(value)[:1000]
        if arguments is not None:
            text = _canonical(arguments)
            arguments_digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            kept = redact(name, arguments)
            arguments = text if kept is arguments else _canonical(kept)
        if "_meta" in params:
            trace_id = trace_id_of(params)
    # outcome_of and result_size, inline.
    code = size = None
    if response is None:
        outcome = CANCELLED
    elif "error" in response:
        outcome, code = ERROR, response["error"].get("code")
        if not isinstance(code, int):
            code = None
    else:
        outcome, result = OK, response.get("result")
        if isinstance(result, dict):
            if result.get("isError") is True:
                outcome = TOOL_ERROR
            elif result.get("resultType") == "input_required":
                outcome = INPUT_REQUIRED
        if result is not None:
            try:
                text = _compact(result)
            except (TypeError, ValueError):  # the client got -32603 instead; the size is unknown
                pass
            else:
                size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if principal is None:
        client_id = subject = authentication = ""
    else:
        client_id, subject, authentication = principal.client_id or "", principal.subject or "", \
            principal.method or ""
    # The start, in seconds since the epoch: the writer formats it (insert.py), as it does the
    # duration, to the microsecond.
    return (finished - duration, user_id, username, client_id, subject, authentication, session_id or "",
            request_id, protocol_version or "", method, name, arguments_digest, arguments, outcome, code,
            duration, size, "", False, trace_id)


def call_row(call: ToolCall, redact: Redactor) -> tuple:
    """The row of a background call in its final state, from its record (on whichever process
    moved it there)."""
    params = {**(call.params or {}), "name": call.tool, "arguments": call.arguments}
    arguments_digest, arguments = _arguments(methods.TOOLS_CALL, call.tool, params, redact)
    if call.state == ToolCall.State.CANCELLED:
        outcome, code, result = CANCELLED, None, None
    elif call.response is not None:
        outcome, code, result = outcome_of(call.response, None)
    else:  # failed with no response recorded (the session ended, the broker refused it)
        outcome, code, result = ERROR, None, None
    principal = call.principal or {}
    finished = call.finished_at or call.updated_at
    user = call.owner
    return (call.created_at, call.owner_id, user.get_username() if user is not None else "",
            principal.get("client_id") or "", principal.get("subject") or "", principal.get("method") or "",
            call.session_id, call.request_id, call.protocol_version, methods.TOOLS_CALL, call.tool[:1000],
            arguments_digest, arguments, outcome, code,
            max((finished - call.created_at) / timedelta(seconds=1), 0.0), result_size(result), call.id,
            call.task, trace_id_of(params))
