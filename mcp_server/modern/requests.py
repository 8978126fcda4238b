"""Serving one modern request through the same method table as the handshake era."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc
from mcp_protocol.cancellation import Cancellation
from mcp_protocol.envelope import Envelope
from mcp_protocol.errors import METHOD_NOT_FOUND

from .. import dispatch
from ..ports import Outbound
from .request_session import ModernSession
from .results import REMOVED_METHODS, stamp_response

__all__ = ["REMOVED_METHODS", "new_session", "serve", "stamp_response"]

if TYPE_CHECKING:
    from ..server import Server


def new_session(server: Server, envelope: Envelope, outbound: Outbound | None, *,
                listen_supported: bool,
                in_flight: dict[Any, Cancellation] | None = None) -> ModernSession:
    return ModernSession(server, envelope, outbound=outbound, listen_supported=listen_supported,
                         in_flight=in_flight)


async def serve(server: Server, message: dict, session: ModernSession,
                incoming: jsonrpc.Incoming | None = None) -> dict | None:
    """The response to one enveloped request (None when it was cancelled).

    Methods the revision removed get -32601 before any handler runs (MOD-07); every other
    result is stamped with ``resultType`` and, where cacheable, cache hints (MOD-08, CACHE-03).
    ``incoming`` is ``message`` classified, when the transport did that already.
    """
    method = message.get("method")
    if method in REMOVED_METHODS:
        await server.instrument_async({"method": "unsupported_method", "duration": 0.0})
        return jsonrpc.error_response(
            message.get("id"), METHOD_NOT_FOUND,
            f"Method not found: {method} is not part of protocol revision "
            f"{session.protocol_version}", method,
        )
    if incoming is None:
        response = await dispatch.handle_message(server, message, session)
    else:  # classified by the transport already
        response = await dispatch.handle_incoming(server, incoming, session)
    return stamp_response(server, method, response)
