"""``InputRequiredResult``: a handler asks the client for input instead of calling it (SEP-2322).

A ``tools/call``, ``prompts/get`` or ``resources/read`` handler returns one when it needs an
elicitation, a sampling completion or the client's roots before it can finish. The request is then
re-issued with the answers, and the handler runs again from the start, reading them from
``server_context.input_responses`` and its own echoed ``server_context.request_state``.

The builders give the embedded requests the same shapes (and checks) as the live requests of
:class:`~mcp_server.ServerContext`; an elicitation form's schema is checked by the same rules as
``create_form_elicitation`` and may use the :class:`~mcp_server.elicitation.EnumSchema` builders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_protocol import methods
from mcp_protocol.content import to_wire

from .elicitation import check_requested_schema

# The requests a server may embed (MRTR-01).
INPUT_REQUEST_METHODS = (
    methods.ELICITATION_CREATE, methods.SAMPLING_CREATE_MESSAGE, methods.ROOTS_LIST,
)
INPUT_REQUIRED = "input_required"


class InputRequiredResult:
    """What a handler returns to ask for input: ``input_requests``, ``request_state``, or both.

    ``input_requests`` maps a key of the handler's choice to ``{"method", "params"}``; the answer to
    each comes back under the same key. ``request_state`` is a string only this server reads back;
    on the wire it is sealed (see :class:`~mcp_server.request_state.RequestStateSecurity`), and
    the handler always sees the plaintext. A result with only ``request_state`` tells the client to
    retry later (load shedding).
    """

    __slots__ = ("input_requests", "request_state")

    def __init__(self, input_requests: Mapping[Any, Mapping] | None = None,
                 request_state: str | None = None):
        if request_state is not None and not isinstance(request_state, str):
            raise TypeError(f"request_state must be a string, not {type(request_state).__name__}")
        if input_requests is not None and not isinstance(input_requests, Mapping):
            raise TypeError("input_requests must be a mapping of key to {method, params}")
        requests = {str(key): _check_entry(str(key), entry)
                    for key, entry in (input_requests or {}).items()}
        if not requests and request_state is None:
            raise ValueError("an InputRequiredResult needs input_requests or a request_state")
        self.input_requests: dict[str, dict] = requests
        self.request_state = request_state

    def to_wire(self, request_state: str | None = None) -> dict[str, Any]:
        """The ``InputRequiredResult`` of the 2026-07-28 wire, with ``request_state`` (sealed)."""
        result: dict[str, Any] = {"resultType": INPUT_REQUIRED}
        if self.input_requests:
            result["inputRequests"] = self.input_requests
        if request_state is not None:
            result["requestState"] = request_state
        return result

    # Builders of the embedded requests (ELI-08) ---------------------------------------------------
    @staticmethod
    def form_elicitation(message: str, requested_schema: dict) -> dict[str, Any]:
        """An ``elicitation/create`` in form mode; the schema follows ``create_form_elicitation``'s
        rules (flat, primitive fields; :class:`EnumSchema` builders for choices)."""
        check_requested_schema(requested_schema)
        return {"method": methods.ELICITATION_CREATE,
                "params": {"mode": "form", "message": message, "requestedSchema": requested_schema}}

    @staticmethod
    def url_elicitation(message: str, url: str, elicitation_id: str | None = None) -> dict[str, Any]:
        """An ``elicitation/create`` in URL mode (SEP-1036). Without ``elicitation_id``, the legacy
        shim makes one up when it sends the request; the modern wire sends it as given."""
        params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if elicitation_id is not None:
            params["elicitationId"] = elicitation_id
        return {"method": methods.ELICITATION_CREATE, "params": params}

    @staticmethod
    def sampling(messages: list, max_tokens: int, *, system_prompt: str | None = None,
                 model_preferences: dict | None = None, include_context: str | None = None,
                 temperature: float | None = None, stop_sequences: list[str] | None = None,
                 metadata: dict | None = None, tools: list[dict] | None = None,
                 tool_choice: dict | None = None) -> dict[str, Any]:
        """A ``sampling/createMessage``, with the arguments of ``create_sampling_message``."""
        params: dict[str, Any] = {"messages": [to_wire(m) for m in messages], "maxTokens": max_tokens}
        optional = {
            "systemPrompt": system_prompt, "modelPreferences": model_preferences,
            "includeContext": include_context, "temperature": temperature,
            "stopSequences": stop_sequences, "metadata": metadata, "tools": tools,
            "toolChoice": tool_choice,
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        return {"method": methods.SAMPLING_CREATE_MESSAGE, "params": params}

    @staticmethod
    def list_roots() -> dict[str, Any]:
        """A ``roots/list``."""
        return {"method": methods.ROOTS_LIST, "params": {}}

    def __repr__(self) -> str:
        return (f"<InputRequiredResult {sorted(self.input_requests)} "
                f"state={'yes' if self.request_state is not None else 'no'}>")


def _check_entry(key: str, entry: Any) -> dict:
    if not isinstance(entry, Mapping):
        raise TypeError(f"input request {key!r} must be a mapping with method and params")
    method = entry.get("method")
    if method not in INPUT_REQUEST_METHODS:
        raise ValueError(f"input request {key!r}: method must be one of "
                         f"{', '.join(INPUT_REQUEST_METHODS)}, not {method!r}")
    params = entry.get("params", {})
    if not isinstance(params, Mapping):
        raise TypeError(f"input request {key!r}: params must be an object")
    return {"method": method, "params": dict(params)}


def required_capability(entry: dict) -> str:
    """The client capability an embedded request needs (MRTR-04), as a dotted path."""
    method, params = entry["method"], entry["params"]
    if method == methods.ELICITATION_CREATE:
        return "elicitation.url" if params.get("mode") == "url" else "elicitation.form"
    if method == methods.SAMPLING_CREATE_MESSAGE:
        tools = params.get("tools") is not None or params.get("toolChoice") is not None
        return "sampling.tools" if tools else "sampling"
    return "roots"


def capabilities_object(paths: list[str]) -> dict[str, Any]:
    """``["elicitation.url", "sampling"]`` as a ClientCapabilities object."""
    capabilities: dict[str, Any] = {}
    for path in paths:
        head, _, sub = path.partition(".")
        section = capabilities.setdefault(head, {})
        if sub:
            section[sub] = {}
    return capabilities
