"""The state of one client connection, as the dispatcher sees it."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from mcp_protocol import methods
from mcp_protocol.cancellation import Cancellation
from mcp_protocol.envelope import Envelope

from .client_capabilities import require_client_capability
from .outgoing import DeliveryError, PendingRequests
from .ports import Outbound

if TYPE_CHECKING:
    from .server import Server


# How long a server-to-client request waits for the client, unless the call says otherwise.
DEFAULT_REQUEST_TIMEOUT = 600.0


class ServerSession:
    """Client identity, negotiated revision, log level and in-flight requests of one session."""

    # Why requests to the client are impossible on this session (stateless HTTP, say), or None.
    requests_refused: str | None = None
    # The 2026-07-28 envelope of the request this session stands for; None in the handshake era.
    envelope: Envelope | None = None
    # Whether the transport serves subscriptions/listen streams (stdio does not: MOD-03).
    listen_supported: bool = True
    # The pk of the Django user this session acts for (restricted registry entries: see
    # mcp_server.registry); None is anonymous. An HTTP session's is its owner's.
    user_id: Any = None
    # Who sent the request being served (mcp_server.auth.Principal: user, scopes, client id), on
    # an authenticated transport; None otherwise (stdio, anonymous HTTP).
    principal: Any = None
    # Whom fair-share limits count this session's requests against, as its transport knows it
    # ("user:<pk>", "token:<hash>", "address:<ip>": see mcp_server.http.limits.principal_of);
    # None where the transport knows none (stdio, in process).
    principal_key: str | None = None

    def act_for(self, principal: Any) -> None:
        """Serve requests of ``principal``: its user's restrictions apply (``user_id``)."""
        self.principal = principal
        if principal is not None and principal.user_id is not None:
            self.user_id = principal.user_id

    @property
    def is_modern(self) -> bool:
        """Whether this serves a request of the 2026-07-28 lifecycle (MOD-09)."""
        return self.envelope is not None

    def __init__(self, server: Server, *, outbound: Outbound | None = None,
                 session_id: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
                 pending: PendingRequests | None = None):
        self.server = server
        self.outbound = outbound
        self.id = session_id
        self.request_timeout = request_timeout
        self.pending = pending if pending is not None else PendingRequests()
        self.initialized = False
        self.protocol_version: str | None = None
        self.client_info: dict | None = None
        self._client_capabilities: dict | None = None
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.in_flight: dict[Any, Cancellation] = {}

    @property
    def client(self) -> dict | None:
        """``{name, version}`` of the client, as sent in ``initialize``."""
        return self.client_info

    @property
    def client_capabilities(self) -> dict | None:
        """This session's client capabilities, else the server-wide ones (``server.session``,
        which stdio and in-process calls initialize), as a stateless request has no session."""
        if self._client_capabilities is not None:
            return self._client_capabilities
        default = getattr(self.server, "session", None)
        return None if default is None or default is self else default._client_capabilities

    @client_capabilities.setter
    def client_capabilities(self, capabilities: dict | None) -> None:
        self._client_capabilities = capabilities

    async def set_log_level(self, level: str) -> None:
        self.log_level = level

    async def subscribe(self, uri: str) -> None:
        self.subscriptions.add(uri)

    async def unsubscribe(self, uri: str) -> None:
        self.subscriptions.discard(uri)

    def begin_request(self, request_id: Any) -> Cancellation | None:
        """Register an in-flight request; None when that id is in flight already."""
        if request_id in self.in_flight:
            return None
        cancellation = Cancellation(request_id)
        self.in_flight[request_id] = cancellation
        return cancellation

    def end_request(self, request_id: Any, cancellation: Cancellation) -> None:
        if self.in_flight.get(request_id) is cancellation:
            del self.in_flight[request_id]

    def cancel_request(self, request_id: Any, reason: str | None = None) -> bool:
        cancellation = self.in_flight.get(request_id)
        return cancellation.cancel(reason) if cancellation is not None else False

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        """Send to the client; False when there is no transport or delivery failed."""
        if self.outbound is None:
            return False
        try:
            return await self.outbound.send(message, related_request_id=related_request_id)
        except Exception as exc:
            # A broken stream must not raise into the handler (NOTIF-06): report it and say so.
            is_notification = "id" not in message
            await self.server.report_exception_async(
                exc, {"notification": message.get("method")} if is_notification else {"request": message}
            )
            return False

    async def close_request_stream(self, request_id: Any, retry_ms: int) -> bool:
        """End the response stream of ``request_id`` early, if the transport has such streams
        (Streamable HTTP's ``close_stream``); False otherwise."""
        close = getattr(self.outbound, "close_stream", None)
        if close is None:
            return False
        return await close(request_id, retry_ms=retry_ms)

    async def request(self, method: str, params: dict | None = None, *,
                      related_request_id: Any = None, timeout: float | None = None,
                      cancellation: Cancellation | None = None) -> Any:
        """Send a request to the client and wait for its result (see :mod:`mcp_server.outgoing`)."""
        if self.outbound is None or self.requests_refused:
            raise DeliveryError(
                f"{method}: {self.requests_refused or 'this session has no transport to reach the client'}"
            )
        return await self.pending.request(
            self.send, method, params,
            timeout=timeout if timeout is not None else self.request_timeout,
            cancellation=cancellation, related_request_id=related_request_id, owner=self.id,
        )

    def resolve_response(self, message: dict) -> bool:
        """A client's answer to one of this session's requests; False for an unknown id."""
        return self.pending.resolve(message, self.id)

    async def list_roots(self, timeout: float | None = None) -> Any:
        """``roots/list`` not tied to any client request; prefer ``ServerContext.list_roots``."""
        warnings.warn(
            "list_roots without a related request is deprecated (SEP-2260): call it on the "
            "ServerContext of the request being served",
            DeprecationWarning, stacklevel=2,
        )
        # The same check as ServerContext.list_roots (ROOT-02): never ask a client without roots.
        require_client_capability(self.client_capabilities or {}, self.protocol_version,
                                  methods.ROOTS_LIST, "roots")
        return await self.request(methods.ROOTS_LIST, timeout=timeout)
