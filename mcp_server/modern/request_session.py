"""The per-request session of a modern (2026-07-28) request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol.cancellation import Cancellation
from mcp_protocol.envelope import Envelope

from .. import logging_levels
from ..ports import Outbound
from ..session import ServerSession

if TYPE_CHECKING:
    from ..server import Server

# What a modern handler gets when it asks the client something directly (MOD-12).
REQUESTS_REFUSED = (
    "server-to-client requests are not part of the 2026-07-28 lifecycle (SEP-2575); declare what the "
    "handler needs as parameters instead, e.g. Annotated[dict, Resolve(fn)] where fn returns "
    "Elicit(message, schema) (mcp_server.asks), which works in either era"
)


class ModernSession(ServerSession):
    """One modern request's view of its client, built from the envelope and nothing else.

    The envelope always wins and nothing is inferred from earlier requests (MOD-09): each request
    gets a new instance. Its messages go to ``outbound``, the request's own response (an SSE
    stream on HTTP, stdout on stdio). ``in_flight`` lets a transport whose client cancels with
    ``notifications/cancelled`` (stdio) find the request; HTTP cancels by disconnecting instead.
    """

    requests_refused = REQUESTS_REFUSED

    def __init__(self, server: Server, envelope: Envelope, *, outbound: Outbound | None,
                 listen_supported: bool, in_flight: dict[Any, Cancellation] | None = None):
        super().__init__(server, outbound=outbound, request_timeout=None)
        self.envelope = envelope
        self.initialized = True
        self.protocol_version = envelope.protocol_version
        self.client_info = envelope.client_info
        self.client_capabilities = envelope.client_capabilities
        # MOD-11: log notifications only at or above the envelope's level, for this request only;
        # no level (or an unknown one) means none at all.
        level = envelope.log_level
        self.log_level = level if logging_levels.is_level(level) else None
        self.listen_supported = listen_supported
        if in_flight is not None:
            self.in_flight = in_flight

