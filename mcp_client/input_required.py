"""Driving ``input_required`` results of the 2026-07-28 lifecycle (SEP-2322, MRTR-12 to MRTR-16).

A ``tools/call``, ``prompts/get`` or ``resources/read`` may be answered with
``resultType: "input_required"``: the server needs answers (``inputRequests``: elicitations,
sampling, roots) and/or gives back an opaque ``requestState``. The driver answers each input
request through the handler registered for its method (``on_elicitation``, ``on_sampling``,
``on_roots``: the same handlers that answer a live handshake-era request), then re-issues the
original request, with a fresh id, the answers as ``inputResponses`` and the state byte for byte,
until the result is complete. Every leg counts against ``max_rounds``; a leg with no input
requests (the server saying "not yet") is retried after a backoff. When no handler fits, or the
server still asks after ``max_rounds`` legs, :class:`InputRequiredError` hands the driving to the
caller, who retries with ``input_responses=`` and ``request_state=``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_protocol import methods

from .errors import ClientError, ValidationError
from .handlers import run_handler

COMPLETE = "complete"
INPUT_REQUIRED = "input_required"
# The Tasks extension (SEP-2663): a tools/call answered with a task handle (call_tool drives it).
TASK = "task"
RESULT_TYPES = (COMPLETE, INPUT_REQUIRED, TASK)
# The requests that may be answered with input_required (SEP-2322), and the ones a server may embed.
DRIVEN_METHODS = (methods.TOOLS_CALL, methods.PROMPTS_GET, methods.RESOURCES_READ)
INPUT_METHODS = (methods.ELICITATION_CREATE, methods.SAMPLING_CREATE_MESSAGE, methods.ROOTS_LIST)
DEFAULT_MAX_ROUNDS = 10
# Backoff before re-issuing after a leg that carried only requestState (MRTR-14).
BACKOFF_FIRST = 0.05
BACKOFF_CAP = 0.25
sleep = asyncio.sleep  # the backoff's wait (a name of its own, so a test can record the delays)


class InputRequiredError(ClientError):
    """The server needs input the client did not give automatically: no handler is registered for
    one of ``input_requests`` (manual driving), or it kept asking past ``input_required_max_rounds``.

    ``input_requests`` (key to ``{"method", "params"}``), ``request_state`` (opaque, or None) and
    the whole ``result`` are those of the last answer. To drive by hand, answer each request and
    call again with ``input_responses={key: result}`` and ``request_state=``.
    """

    def __init__(self, method: str, result: dict, reason: str):
        super().__init__(f"{method}: the server needs input from the client "
                         f"(resultType input_required): {reason}")
        self.method = method
        self.result = result
        self.reason = reason
        self.input_requests: dict[str, dict] = dict(result.get("inputRequests") or {})
        self.request_state: str | None = result.get("requestState")


def result_type(method: str, result: Any) -> str:
    """``resultType`` of a modern result: missing means complete (MRTR-16); a value this client
    does not know, or input_required where the protocol allows none, is an invalid answer."""
    kind = result.get("resultType", COMPLETE) if isinstance(result, dict) else COMPLETE
    if kind not in RESULT_TYPES:
        raise ValidationError(f"the server answered {method} with an unknown resultType {kind!r}")
    if kind == INPUT_REQUIRED and method not in DRIVEN_METHODS:
        raise ValidationError(f"the server answered {method} with input_required, which only "
                              f"{', '.join(DRIVEN_METHODS)} may have")
    if kind == TASK and method != methods.TOOLS_CALL:
        raise ValidationError(f"the server answered {method} with a task, which only tools/call may have")
    return kind


def retry_params(params: dict | None, input_responses: Mapping | None,
                 request_state: str | None) -> dict:
    """The original ``params`` with the answers and the state as params-level fields; nothing of
    an earlier leg is carried that this one did not get (SEP-2322: no state, no ``requestState``)."""
    retry = dict(params or {})
    if input_responses is not None:
        if not isinstance(input_responses, Mapping):
            raise TypeError("input_responses must map each input request's key to its result")
        retry["inputResponses"] = dict(input_responses)
    if request_state is not None:
        if not isinstance(request_state, str):
            raise TypeError(f"request_state must be the server's string, not {type(request_state).__name__}")
        retry["requestState"] = request_state
    return retry


def _input_requests(method: str, result: dict) -> dict[str, dict]:
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is None and state is None:
        raise ValidationError(f"the server's input_required answer to {method} has neither "
                              f"inputRequests nor requestState: {result!r}")
    if state is not None and not isinstance(state, str):
        raise ValidationError(f"requestState must be a string: {state!r}")
    if requests is None:
        return {}
    if not isinstance(requests, dict):
        raise ValidationError(f"inputRequests must be an object: {requests!r}")
    for key, entry in requests.items():
        if not isinstance(entry, dict) or entry.get("method") not in INPUT_METHODS \
                or not isinstance(entry.get("params", {}), dict):
            raise ValidationError(f"input request {key!r} must be one of {', '.join(INPUT_METHODS)} "
                                  f"with object params: {entry!r}")
    return requests


async def _answer(handlers: Mapping[str, Callable], entry: dict) -> dict:
    response = await run_handler(handlers[entry["method"]], entry.get("params") or {})
    if not isinstance(response, dict):
        raise TypeError(f"the {entry['method']} handler must return a result object (a dict), "
                        f"not {type(response).__name__}")
    return response


async def drive(method: str, params: dict | None, *, send: Callable[[dict], Awaitable[Any]],
                handlers: Mapping[str, Callable], max_rounds: int,
                input_responses: Mapping | None = None, request_state: str | None = None) -> Any:
    """Send ``method`` with ``params`` (``send`` issues one request, a fresh id each time) and
    answer ``input_required`` results until the complete result, which is returned."""
    result = await send(retry_params(params, input_responses, request_state))
    rounds = 0
    delay = BACKOFF_FIRST
    while result_type(method, result) == INPUT_REQUIRED:
        requests = _input_requests(method, result)
        rounds += 1
        if rounds > max_rounds:
            raise InputRequiredError(method, result, f"still asking after {max_rounds} rounds "
                                                     "(input_required_max_rounds)")
        unanswerable = sorted({entry["method"] for entry in requests.values()} - set(handlers))
        if unanswerable:
            raise InputRequiredError(method, result, f"no handler for {', '.join(unanswerable)}; "
                                     "answer input_requests and retry with input_responses= and "
                                     "request_state=")
        # One after the other: an elicitation may put a question to a person.
        responses = {key: await _answer(handlers, entry) for key, entry in requests.items()}
        if requests:
            delay = BACKOFF_FIRST
        else:  # "not yet": retry, but do not hammer a server that sheds load
            await sleep(delay)
            delay = min(delay * 2, BACKOFF_CAP)
        result = await send(retry_params(params, responses or None, result.get("requestState")))
    return result
