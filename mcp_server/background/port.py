"""Background calls as the engine and the Streamable HTTP transport reach them: the
implementation of :class:`mcp_server.ports.BackgroundCalls` that ``site.install`` registers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..http.event_store import request_key
from . import records

if TYPE_CHECKING:
    from ..context import ServerContext
    from ..http.transport import StreamableHTTPTransport
    from ..primitives.tool import Tool


class BackgroundCallPort:
    """Each part loads on first use: a process that never makes a background call (a management
    command, say) never loads the web side of one."""

    async def call(self, ctx: ServerContext, tool: Tool, arguments: dict) -> Any:
        from .launch import call_in_background

        return await call_in_background(ctx, tool, arguments)

    async def cancel_request(self, transport: StreamableHTTPTransport, session_id: str,
                             request_key: str) -> None:
        from .launch import cancel_call_of_request

        await cancel_call_of_request(transport, session_id, request_key)

    async def settle_stopped_request(self, transport: StreamableHTTPTransport, session_id: str,
                                     request_id: Any) -> bool:
        from .recovery import settle_stopped_request

        return await settle_stopped_request(transport, session_id, request_id)

    async def ended_cancelled(self, session_id: str, request_id: Any) -> bool:
        call = await records.of_request(session_id, request_key(request_id))
        return call is not None and call.state == records.State.CANCELLED

    async def check_share(self, principal_key: str) -> None:
        from .admission import check_share

        await check_share(principal_key)
