"""Turning what the writer queued into ``AuditRecord`` rows: a request the dispatcher served, or
a background call that reached its final state. Runs on the writer's thread, off the call's path:
the digest, the redaction and the result's size are computed here."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.trace_context import TRACEPARENT_META_KEY

from ..models import AuditRecord, ToolCall
from ..redaction import digest, redact

Outcome = AuditRecord.Outcome
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


def name_of(method: str, params: Any) -> str:
    if not isinstance(params, dict):
        return ""
    value = params.get("uri") if method == methods.RESOURCES_READ else params.get("name")
    return str(value)[:1000] if value is not None else ""


def outcome_of(response: dict | None, error: BaseException | None) -> tuple[str, int | None, Any]:
    """(outcome, JSON-RPC error code, result) of an answer; no answer is a cancel."""
    if response is None:
        return Outcome.CANCELLED, None, None
    if "error" in response:
        code = response["error"].get("code")
        return Outcome.ERROR, code if isinstance(code, int) else None, None
    result = response.get("result")
    if isinstance(result, dict):
        if result.get("isError") is True:
            return Outcome.TOOL_ERROR, None, result
        if result.get("resultType") == "input_required":
            return Outcome.INPUT_REQUIRED, None, result
    return Outcome.OK, None, result


def result_size(result: Any) -> int | None:
    if result is None:
        return None
    try:
        return len(jsonrpc.encode(result).encode("utf-8"))
    except (TypeError, ValueError):  # the client got -32603 instead; the size is unknown
        return None


def _arguments(method: str, name: str, params: Any) -> tuple[str, Any]:
    if method == methods.RESOURCES_READ or not isinstance(params, dict):
        return "", None  # a read has a URI, no arguments
    arguments = params.get("arguments")
    arguments = {} if arguments is None else arguments
    return digest(arguments), redact(name, arguments)


def _principal_fields(principal: Any) -> dict[str, str]:
    if principal is None:
        return {}
    return {"client_id": principal.client_id or "", "subject": principal.subject or "",
            "authentication": principal.method or ""}


def request_row(entry: tuple) -> AuditRecord:
    """The row of a request the dispatcher served (:class:`mcp_server.audit.observer.AuditObserver`)."""
    (finished, duration, method, params, session_id, request_id, protocol_version, principal,
     user_id, username, response, error) = entry
    name = name_of(method, params)
    arguments_digest, arguments = _arguments(method, name, params)
    outcome, code, result = outcome_of(response, error)
    return AuditRecord(
        time=datetime.fromtimestamp(finished - duration, UTC), user_id=user_id,
        username=username, **_principal_fields(principal), session_id=session_id or "",
        request_id=request_id, protocol_version=protocol_version or "", method=method, name=name,
        arguments_digest=arguments_digest, arguments=arguments, outcome=outcome, error_code=code,
        duration=duration, result_size=result_size(result), trace_id=trace_id_of(params))


def call_row(call: ToolCall) -> AuditRecord:
    """The row of a background call in its final state, from its record (on whichever process
    moved it there)."""
    params = {**(call.params or {}), "name": call.tool, "arguments": call.arguments}
    arguments_digest, arguments = _arguments(methods.TOOLS_CALL, call.tool, params)
    if call.state == ToolCall.State.CANCELLED:
        outcome, code, result = Outcome.CANCELLED, None, None
    elif call.response is not None:
        outcome, code, result = outcome_of(call.response, None)
    else:  # failed with no response recorded (the session ended, the broker refused it)
        outcome, code, result = Outcome.ERROR, None, None
    principal = call.principal or {}
    finished = call.finished_at or call.updated_at
    user = call.owner
    return AuditRecord(
        time=call.created_at, user_id=call.owner_id,
        username=user.get_username() if user is not None else "",
        client_id=principal.get("client_id") or "", subject=principal.get("subject") or "",
        authentication=principal.get("method") or "", session_id=call.session_id,
        request_id=call.request_id, protocol_version=call.protocol_version, method=methods.TOOLS_CALL,
        name=call.tool[:1000], arguments_digest=arguments_digest, arguments=arguments, outcome=outcome,
        error_code=code, duration=max((finished - call.created_at) / timedelta(seconds=1), 0.0),
        result_size=result_size(result), background_call=call.id, task=call.task,
        trace_id=trace_id_of(params))
