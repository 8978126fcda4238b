"""Running a handler that may answer ``input_required`` (SEP-2322), in either era.

The ``tools/call``, ``prompts/get`` and ``resources/read`` handlers call :func:`run_rounds` around
the user's code and :func:`wire_result` on what comes back.

- Before the first run, ``params.inputResponses`` and ``params.requestState`` become
  ``ctx.input_responses`` and ``ctx.request_state``; the state is opened (fail closed) first.
- On a 2026-07-28 request, an :class:`InputRequiredResult` goes back to the client: every
  embedded request must be one the envelope's capabilities declare (else -32021), and the state
  is sealed. The server keeps nothing between rounds.
- On a handshake-era session the client cannot answer one, so the legacy shim does it in place
  of the client's driver: each embedded request becomes a real server-to-client request tied to
  this request (SEP-2260), and the handler runs again with the answers and its raw state, which
  never leaves the process and so is not sealed (MRTR-11). With the shim off, it is an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp_protocol import methods
from mcp_protocol.errors import (
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    InvalidParamsError,
    MCPError,
)

from .client_capabilities import client_declares, require_client_capability
from .elicitation import ACTIONS, check_action, check_form_answer, check_requested_schema
from .errors import ClientCapabilityError
from .input_required import InputRequiredResult, capabilities_object, required_capability
from .request_state import InvalidRequestStateError, RequestStateKeysMissing

if TYPE_CHECKING:
    from .context import ServerContext

# Form elicitation carries "mode" from this revision on; an older client's schema has no such key.
_MODES_SINCE = "2025-11-25"


def binding(ctx: ServerContext) -> dict[str, Any]:
    """What a sealed state is bound to: the method, its target, and the arguments."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    if ctx.method == methods.RESOURCES_READ:
        return {"method": ctx.method, "target": str(params.get("uri")), "arguments": {}}
    arguments = params.get("arguments")
    return {"method": ctx.method, "target": str(params.get("name")),
            "arguments": arguments if arguments is not None else {}}


def receive(ctx: ServerContext) -> None:
    """Read the retry's ``inputResponses`` and ``requestState`` (params-level, not ``_meta``)."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    if "inputResponses" in params:
        ctx.input_responses = checked_input_responses(params["inputResponses"])
    if "requestState" in params:
        # Only states this server sealed are accepted, whatever the era: a state the client made
        # up (or any state, when no key is configured) is refused, never handed over as given.
        security = ctx.server.request_state_security
        if security is None:
            raise InvalidRequestStateError()
        ctx.request_state = security.open(params["requestState"], **binding(ctx))


def checked_input_responses(responses: Any) -> dict[str, dict]:
    """A client's ``inputResponses`` (a retry's, or ``tasks/update``'s), refused with -32602 unless
    it maps each key to a result object, and each elicitation result to an answer a user can give."""
    if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
        raise InvalidParamsError(
            "Invalid params: inputResponses must be an object mapping each key to a result object"
        )
    for key, response in responses.items():
        # Only an elicitation's result has an action.
        if "action" in response and response["action"] not in ACTIONS:
            raise InvalidParamsError(f"Invalid params: inputResponses[{key!r}].action must be one of "
                                     f"{list(ACTIONS)}, not {response['action']!r}")
    return responses


async def run_rounds(ctx: ServerContext, invoke: Callable[[], Awaitable[Any]]) -> Any:
    """Run the handler (``invoke``) until it returns something other than input_required.

    On a modern request an :class:`InputRequiredResult` is returned as it is, for
    :func:`wire_result`; on a handshake-era session the shim fulfils it (or refuses it).
    """
    receive(ctx)
    value = await invoke()
    if isinstance(value, InputRequiredResult):
        # CFG-05: the handler asked for input (returned to a modern client, or fulfilled by the
        # shim on a handshake-era session).
        ctx.instrumentation["input_required"] = True
    # A task's questions go on its record (the Tasks extension), whatever the era.
    task_input = getattr(ctx, "task_input", None)
    if not isinstance(value, InputRequiredResult) or (ctx.session.is_modern and task_input is None):
        return value
    server = ctx.server
    if task_input is None and not server.input_required_legacy_shim:
        raise MCPError(
            "input_required results require the 2026-07-28 stateless lifecycle; this session uses "
            f"protocol revision {ctx.protocol_version}", code=INTERNAL_ERROR,
        )
    rounds = 0
    while isinstance(value, InputRequiredResult):
        if rounds >= server.input_required_max_rounds:
            raise MCPError(
                f"input_required: the handler still asks for input after {rounds} rounds "
                "(input_required_max_rounds)", code=INTERNAL_ERROR,
            )
        rounds += 1
        ctx.input_responses = await (task_input or fulfil_live)(ctx, value)
        ctx.request_state = value.request_state
        value = await invoke()
    return value


def wire_result(ctx: ServerContext, value: InputRequiredResult) -> dict[str, Any]:
    """The 2026-07-28 ``InputRequiredResult``: capabilities checked, state sealed."""
    check_declared(ctx, value)
    sealed = None
    if value.request_state is not None:
        security = ctx.server.request_state_security
        if security is None:
            raise RequestStateKeysMissing()
        sealed = security.seal(value.request_state, **binding(ctx))
    return value.to_wire(sealed)


def check_declared(ctx: ServerContext, value: InputRequiredResult) -> None:
    """-32021 naming each capability an embedded request needs that the envelope lacks."""
    envelope = ctx.session.envelope
    declared = envelope.client_capabilities if envelope is not None else {}
    missing: list[str] = []
    for entry in value.input_requests.values():
        capability = required_capability(entry)
        if capability not in missing and not client_declares(declared, capability):
            missing.append(capability)
    if missing:
        raise MCPError(
            f"Missing required client capabilities: {', '.join(missing)}",
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            data={"requiredCapabilities": capabilities_object(missing)},
        )


# The legacy shim -------------------------------------------------------------------------------
async def fulfil_live(ctx: ServerContext, value: InputRequiredResult) -> dict[str, Any] | None:
    """Ask the client each embedded request, one after the other; the answers by key."""
    if not value.input_requests:
        return None  # state only: "try again", which the shim does at once
    session = ctx.session
    if session.requests_refused:
        raise MCPError(f"input_required cannot be fulfilled here: {session.requests_refused}",
                       code=INTERNAL_ERROR)
    missing: list[str] = []
    for entry in value.input_requests.values():
        capability = required_capability(entry)
        try:
            require_client_capability(ctx.client_capabilities, ctx.protocol_version,
                                      entry["method"], capability)
        except ClientCapabilityError:
            if capability not in missing:
                missing.append(capability)
    if missing:
        # -32021 belongs to the modern wire; a handshake-era client gets -32603 naming them.
        raise MCPError(
            "input_required needs client capabilities this session did not declare: "
            + ", ".join(missing), code=INTERNAL_ERROR,
        )
    return {key: await _ask(ctx, entry) for key, entry in value.input_requests.items()}


async def _ask(ctx: ServerContext, entry: dict) -> Any:
    method, params = entry["method"], dict(entry["params"])
    schema = None
    if method == methods.ELICITATION_CREATE and params.get("mode") == "url":
        # A live URL elicitation needs an id the completion notification can name.
        params.setdefault("elicitationId", str(uuid.uuid4()))
    elif method == methods.ELICITATION_CREATE:
        schema = check_requested_schema(params.get("requestedSchema"), ctx.protocol_version)
        if ctx.protocol_version is not None and ctx.protocol_version < _MODES_SINCE:
            params.pop("mode", None)
    answer = await ctx.session.request(
        method, params or None, related_request_id=ctx.request_id, cancellation=ctx.cancellation,
    )
    if method != methods.ELICITATION_CREATE:
        return answer
    return check_form_answer(answer, schema) if schema is not None else check_action(answer)
