"""``ServerContext``: what a handler gets to talk back while its request runs.

Methods that do I/O work from both kinds of handler: in ``async def`` code they return an
awaitable, in plain ``def`` code (which runs on a worker thread) they block until done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation

from . import logging_levels
from .client_capabilities import (
    MissingRequiredClientCapabilityError,
    declares,
    require_client_capability,
    revision_has,
)
from .deprecations import deprecated_feature
from .elicitation import check_action, check_form_answer, check_requested_schema
from .errors import ValidationError
from .input_required import InputRequiredResult
from .outgoing import DeliveryError

if TYPE_CHECKING:
    from .server import Server
    from .session import ServerSession


class ServerContext(Mapping):
    """The request being served, its cancellation token, and the user's ``server_context``.

    Reading it like a dict reads the user-defined context, with the request's ``_meta`` under
    ``"_meta"`` when that context is a dict (or unset).
    """

    # A background call's context answers its input requests through its task (see
    # mcp_server.background.execute); None here, read on every call without a failed lookup.
    task_input: Any = None

    def __init__(self, server: Server, session: ServerSession, *, request_id: Any,
                 method: str, params: dict | list, message: dict | None = None,
                 cancellation: Cancellation | None = None, user_context: Any = None):
        self.server = server
        self.session = session
        self.request_id = request_id
        self.method = method
        self.params = params
        self.message = message
        self.cancellation = cancellation or Cancellation(request_id)
        raw_meta = params.get("_meta") if isinstance(params, dict) else None
        self.meta: dict = raw_meta if isinstance(raw_meta, dict) else {}
        self.context = _merge_meta(user_context, raw_meta)
        # What instrumentation and around_request see about this request.
        self.instrumentation: dict[str, Any] = {"method": method}
        # input_required (SEP-2322): the client's answers to this handler's earlier input requests
        # and its own state, plaintext; set by mcp_server.mrtr before each run of the handler.
        self.input_responses: dict[str, Any] | None = None
        self.request_state: str | None = None
        self._loop = asyncio.get_running_loop()

    # The user-defined context, read as a mapping.
    def __getitem__(self, key: str) -> Any:
        if not isinstance(self.context, dict):
            raise KeyError(key)
        return self.context[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.context) if isinstance(self.context, dict) else iter(())

    def __len__(self) -> int:
        return len(self.context) if isinstance(self.context, dict) else 0

    @property
    def principal(self) -> Any:
        """Who sent this request (``mcp_server.auth.Principal``: ``user``, ``scopes``,
        ``client_id``), on an authenticated transport; None where nobody authenticated (stdio)."""
        return self.session.principal

    @property
    def client_info(self) -> dict | None:
        return self.session.client_info

    @property
    def client_capabilities(self) -> dict:
        envelope = self.session.envelope  # a modern request declares them itself
        if envelope is not None:
            return envelope.client_capabilities
        return self.session.client_capabilities or {}

    @property
    def protocol_version(self) -> str | None:
        return self.session.protocol_version

    def input_response(self, key: Any) -> Any:
        """The client's answer to the input request ``key`` (any key, compared as a string)."""
        return (self.input_responses or {}).get(str(key))

    @property
    def is_modern(self) -> bool:
        """Whether this request is of the 2026-07-28 lifecycle; then ``client_info``,
        ``client_capabilities`` and ``protocol_version`` come from its envelope (MOD-09)."""
        return self.session.is_modern

    def require_client_capability(self, *path: str) -> None:
        """Raise -32021 with ``data.requiredCapabilities`` unless the client declared the
        capability, e.g. ``require_client_capability("elicitation", "form")`` (MOD-10)."""
        if not path or not all(isinstance(part, str) and part for part in path):
            raise ValueError(f"name a capability, such as ('sampling',), not {path!r}")
        if not declares(self.client_capabilities, path):
            raise MissingRequiredClientCapabilityError(path)

    @property
    def progress_token(self) -> Any:
        return self.meta.get("progressToken")

    # Cancellation.
    def cancelled(self) -> bool:
        return self.cancellation.cancelled

    def raise_if_cancelled(self) -> None:
        self.cancellation.raise_if_cancelled()

    # Notifications to the requesting client.
    def report_progress(self, progress: float, total: float | None = None,
                        message: str | None = None) -> Any:
        """Send ``notifications/progress``; does nothing when the client sent no progress token."""
        token = self.progress_token
        if token is None:
            return self._io(_done(False))
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return self._io(self._send(methods.NOTIFICATIONS_PROGRESS, params))

    @deprecated_feature("logging", "on a 2026-07-28 request it sends only at or above the "
                        "request's own logLevel")
    def notify_log_message(self, data: Any, level: str = "info", logger: str | None = None) -> Any:
        """Send ``notifications/message`` if ``level`` passes the level the client set."""
        if not logging_levels.is_level(level):
            raise ValueError(f"unknown log level {level!r}; use one of {logging_levels.LEVELS}")
        if not logging_levels.passes(level, self.session.log_level):
            return self._io(_done(False))
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        return self._io(self._send(methods.NOTIFICATIONS_MESSAGE, params))

    def notify_resources_updated(self, uri: str) -> Any:
        if self.session.is_modern:
            # A 2026-07-28 request has no session to tell: whoever subscribed to ``uri`` hears of
            # it instead, on every process (listen streams, and handshake-era subscribers).
            return self._io(_done(self.server.notify_resources_updated(uri)))
        return self._io(self._send(methods.NOTIFICATIONS_RESOURCES_UPDATED, {"uri": uri},
                                   related=False))

    def notify_elicitation_complete(self, elicitation_id: str) -> Any:
        """Tell the client a URL-mode elicitation finished (SEP-1036); not sent (False) to a
        session whose revision predates URL mode, as its wire has no such notification."""
        if not revision_has(self.protocol_version, "elicitation.url"):
            return self._io(_done(False))
        return self._io(self._send(methods.NOTIFICATIONS_ELICITATION_COMPLETE,
                                   {"elicitationId": elicitation_id}, related=False))

    # The response stream of the request being served.
    def close_sse_stream(self, retry_ms: int = 1000) -> Any:
        """End this request's SSE stream now, while the handler goes on (SEP-1699 polling).

        The stream gets a last event carrying ``retry: retry_ms``; the client reconnects after
        that many milliseconds with ``GET`` and ``Last-Event-ID`` (to any process) and receives
        what the handler sends from now on, the result included, from the event store. Returns
        True when a stream was closed; False where there is none to close (stdio, JSON responses,
        a revision before 2025-11-25, whose clients do not expect it, or a stream already gone).
        """
        if isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0:
            raise ValueError(f"retry_ms must be a non-negative integer, not {retry_ms!r}")
        return self._io(self.session.close_request_stream(self.request_id, retry_ms))

    # Requests to the client, tied to the request being served (SEP-2260). Each waits at most
    # ``timeout`` seconds (default: the transport's server_to_client_request_timeout).
    @deprecated_feature("roots", "take paths as tool arguments or configuration instead")
    def list_roots(self, timeout: float | None = None) -> Any:
        """``roots/list``: the client's roots, as ``{"roots": [{"uri", "name"?}]}``."""
        self._require(methods.ROOTS_LIST, "roots")
        return self._request(methods.ROOTS_LIST, None, timeout)

    @deprecated_feature("sampling", "call a model provider's API from the server instead")
    def create_sampling_message(
        self, messages: list, max_tokens: int, *, system_prompt: str | None = None,
        model_preferences: dict | None = None, include_context: str | None = None,
        temperature: float | None = None, stop_sequences: list[str] | None = None,
        metadata: dict | None = None, tools: list[dict] | None = None,
        tool_choice: dict | None = None, timeout: float | None = None,
    ) -> Any:
        """``sampling/createMessage``: ask the client's model for a completion.

        ``include_context`` ("thisServer", "allServers") is soft-deprecated but passed through.
        """
        self._require(methods.SAMPLING_CREATE_MESSAGE, "sampling")
        if tools is not None or tool_choice is not None:
            self._require(methods.SAMPLING_CREATE_MESSAGE, "sampling.tools")
        params = InputRequiredResult.sampling(  # the one builder of its params
            messages, max_tokens, system_prompt=system_prompt, model_preferences=model_preferences,
            include_context=include_context, temperature=temperature, stop_sequences=stop_sequences,
            metadata=metadata, tools=tools, tool_choice=tool_choice)["params"]
        return self._request(methods.SAMPLING_CREATE_MESSAGE, params, timeout)

    def create_form_elicitation(self, message: str, requested_schema: dict,
                                timeout: float | None = None) -> Any:
        """``elicitation/create`` in form mode; returns ``{"action", "content"?}``.

        ``requested_schema`` must be flat: an object of primitive fields (see ``EnumSchema``). An
        ``accept`` whose content does not match it raises ``ElicitationContentError`` (-32602).
        """
        self._require(methods.ELICITATION_CREATE, "elicitation.form")
        check_requested_schema(requested_schema, self.protocol_version)
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        if self.protocol_version is not None and self.protocol_version < "2025-11-25":
            del params["mode"]  # modes arrived with 2025-11-25
        return self._io(self._form_elicitation(params, requested_schema, timeout))

    async def _form_elicitation(self, params: dict, requested_schema: dict, timeout: float | None) -> Any:
        answer = await self._ask(methods.ELICITATION_CREATE, params, timeout)
        return check_form_answer(answer, requested_schema)

    def create_url_elicitation(self, message: str, url: str, elicitation_id: str,
                               timeout: float | None = None) -> Any:
        """``elicitation/create`` in URL mode: the user completes it out of band (SEP-1036)."""
        self._require(methods.ELICITATION_CREATE, "elicitation.url")
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        return self._io(self._url_elicitation(params, timeout))

    async def _url_elicitation(self, params: dict, timeout: float | None) -> Any:
        return check_action(await self._ask(methods.ELICITATION_CREATE, params, timeout))

    def ping(self, timeout: float | None = None) -> Any:
        """``ping`` the client; returns ``{}``."""
        return self._io(self._ping(timeout))

    async def _ping(self, timeout: float | None) -> dict:
        result = await self.session.request(
            methods.PING, None, timeout=timeout, cancellation=self.cancellation
        )
        if not isinstance(result, dict):
            raise ValidationError(f"the client answered ping with {result!r}, not an object")
        return result

    def _request(self, method: str, params: dict | None, timeout: float | None) -> Any:
        return self._io(self._ask(method, params, timeout))

    def _ask(self, method: str, params: dict | None, timeout: float | None) -> Coroutine:
        return self.session.request(method, params, related_request_id=self.request_id, timeout=timeout,
                                    cancellation=self.cancellation)

    def _require(self, method: str, capability: str) -> None:
        if self.session.requests_refused:
            raise DeliveryError(f"{method}: {self.session.requests_refused}")
        require_client_capability(self.client_capabilities, self.protocol_version, method, capability)

    async def _send(self, method: str, params: dict, *, related: bool = True) -> bool:
        message = jsonrpc.notification(method, params)
        related_id = self.request_id if related else None
        return await self.session.send(message, related_request_id=related_id)

    def _io(self, coroutine: Coroutine) -> Any:
        """Awaitable on the event loop's thread; blocking on any other thread."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return coroutine
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __repr__(self) -> str:
        return f"<ServerContext {self.method} id={self.request_id!r}>"


async def _done(value: Any) -> Any:
    return value


def _merge_meta(user_context: Any, meta: Any) -> Any:
    if meta is None:
        return user_context
    if user_context is None:
        return {"_meta": meta}
    if isinstance(user_context, dict):
        return {**user_context, "_meta": meta}
    return user_context
