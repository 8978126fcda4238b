"""Turning what the writer queued into ``AuditRecord`` rows: a request the dispatcher served, or
a background call that reached its final state. Runs on the writer's thread, off the call's path:
the digest, the redaction and the result's size are computed here, a few microseconds a row
(``mcp_server.redaction``'s encoders and redactor, made for this)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from mcp_protocol import methods

from ..log_context import trace_id_of
from ..models import AuditRecord, ToolCall
from ..ports import awaited_sizes
from ..redaction import Redactor, canonical, compact

try:  # CPython's own SHA-256: for a few dozen bytes it costs less than OpenSSL's, which looks the
    # algorithm up and allocates a context for each hash. The same digest either way.
    from _sha2 import sha256  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256

# Plain strings (the driver adapts them directly), equal to AuditRecord.Outcome's values.
OK, ERROR, TOOL_ERROR, CANCELLED, INPUT_REQUIRED = (str(value) for value in (
    AuditRecord.Outcome.OK, AuditRecord.Outcome.ERROR, AuditRecord.Outcome.TOOL_ERROR,
    AuditRecord.Outcome.CANCELLED, AuditRecord.Outcome.INPUT_REQUIRED))


AUDITED_METHODS = frozenset({methods.TOOLS_CALL, methods.PROMPTS_GET, methods.RESOURCES_READ})
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
        text = compact(result)
    except (TypeError, ValueError):  # the client got -32603 instead; the size is unknown
        return None
    # A lone surrogate goes out as U+FFFD (jsonrpc.encode): three bytes, as surrogatepass counts it.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


# len('{"jsonrpc":"2.0","id":' + ',"result":' + '}'): what jsonrpc.response() puts around a result.
_ENVELOPE = 33


def envelope_size(request_id: Any) -> int:
    """The bytes a response to ``request_id`` adds around its result, encoded compactly."""
    if type(request_id) is int:
        return _ENVELOPE + len(str(request_id))
    text = compact(request_id)
    return _ENVELOPE + (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))


def _arguments(method: str, name: str, params: Any, redact: Redactor) -> tuple[str, Any]:
    """The digest of the arguments, and the redacted arguments as JSON text (the canonical text
    hashed, when nothing was redacted)."""
    if method == methods.RESOURCES_READ or not isinstance(params, dict):
        return "", None  # a read has a URI, no arguments
    arguments = params.get("arguments")
    arguments = {} if arguments is None else arguments
    text = canonical(arguments)
    kept = redact(name, arguments)
    stored = text if kept is arguments else canonical(kept)
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), stored


# What a row is made of, in the order of ``AuditRecord``'s columns the writer inserts.
COLUMNS = ("time", "user_id", "username", "client_id", "subject", "authentication", "session_id",
           "request_id", "protocol_version", "method", "name", "arguments_digest", "arguments", "outcome",
           "error_code", "duration", "result_size", "background_call", "task", "trace_id")
JSON_COLUMNS = ("request_id", "arguments")  # arguments: JSON text already made


RESPONSE_AT = 10  # where a request's entry (AuditObserver) holds its response


def request_row(entry: tuple, redact: Redactor) -> tuple:
    """The row (values in :data:`COLUMNS` order) of a request the dispatcher served
    (:class:`mcp_server.audit.observer.AuditObserver`): what :func:`_arguments`,
    :func:`outcome_of` and :func:`result_size` do is inline here, for this runs for every call."""
    (finished, duration, method, params, session_id, request_id, protocol_version, principal,
     user_id, username, response, trace_id) = entry
    arguments_digest, arguments, name = "", None, ""
    if isinstance(params, dict):
        if method == methods.RESOURCES_READ:  # a read has a URI, no arguments
            value = params.get("uri")
        else:
            value = params.get("name")
            arguments = params.get("arguments")
            if arguments is None:
                arguments = {}
        if value is not None:
            name = value[:1000] if type(value) is str else str(value)[:1000]
        if arguments is not None:
            text = canonical(arguments)
            arguments_digest = sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            kept = redact(name, arguments)
            arguments = text if kept is arguments else canonical(kept)
        if trace_id is None and "_meta" in params:  # no span current: the client's trace
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
        sent = awaited_sizes.pop(id(response), None)
        if sent is not None:  # the response's size as the transport encoded it, less its envelope
            size = sent - (_ENVELOPE + len(str(request_id)) if type(request_id) is int
                           else envelope_size(request_id))
        elif result is not None:  # not encoded yet (or by a transport that does not say)
            try:
                text = compact(result)
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
