"""A handshake-era session served over Streamable HTTP: its state in the database, its streams
anywhere; each request gets its own view of the stored session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..session import ServerSession
from .event_store import request_key
from .session_store import SessionRecord

if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport


class HTTPServerSession(ServerSession):
    """One request's view of a stored session; what it changes is written back."""

    def __init__(self, transport: StreamableHTTPTransport, record: SessionRecord,
                 outbound: Any, principal: Any = None):
        super().__init__(
            transport.server, outbound=outbound, session_id=record.id,
            request_timeout=transport.options.server_to_client_request_timeout,
            pending=transport.runtime.pending,
        )
        self.transport = transport
        self.record = record
        self.initialized = True
        self.protocol_version = record.protocol_version
        self.client_info = record.client_info
        self.client_capabilities = record.client_capabilities
        self.log_level = record.log_level or None
        self.principal = principal
        self.principal_key = record.principal

    @property
    def user_id(self) -> Any:  # type: ignore[override]
        return self.record.owner_id

    async def set_log_level(self, level: str) -> None:
        self.log_level = level
        await self.transport.sessions.update(self.record, log_level=level)

    async def subscribe(self, uri: str) -> None:
        await self.transport.subscriptions.add(self.record.id, uri)

    async def unsubscribe(self, uri: str) -> None:
        await self.transport.subscriptions.remove(self.record.id, uri)

    # In-flight requests are known to the whole process, so a cancel routed here finds them.
    def begin_request(self, request_id: Any):  # type: ignore[override]
        cancellation = super().begin_request(request_id)
        if cancellation is not None:
            self.transport.runtime.in_flight[(self.record.id, request_key(request_id))] = cancellation
        return cancellation

    def end_request(self, request_id: Any, cancellation: Any) -> None:
        super().end_request(request_id, cancellation)
        self.transport.runtime.in_flight.pop((self.record.id, request_key(request_id)), None)
