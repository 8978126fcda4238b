"""The state of one client connection, as the dispatcher sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from mcp_protocol.cancellation import Cancellation

if TYPE_CHECKING:
    from .server import Server


class Outbound(Protocol):
    """Where a session's outgoing messages go; each transport supplies one."""

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool: ...


class ServerSession:
    """Client identity, negotiated revision, log level and in-flight requests of one session."""

    def __init__(self, server: Server, *, outbound: Outbound | None = None,
                 session_id: str | None = None):
        self.server = server
        self.outbound = outbound
        self.id = session_id
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
        return await self.outbound.send(message, related_request_id=related_request_id)
