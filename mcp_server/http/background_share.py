"""A call of a background tool, refused over HTTP before anything runs while its principal has its
share of background calls in flight (``MAX_BACKGROUND_CALLS_PER_PRINCIPAL``): 429 with a
``Retry-After``, the fair-share answer of :mod:`.limits`.

This is a count, taken before the request is served; the call's record is admitted again, exactly,
when it is made (``mcp_server.background.admission``), so a call that raced past this count gets
the same refusal as a JSON-RPC error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_protocol import jsonrpc, methods

from .. import ports
from ..errors import TooManyBackgroundCalls
from ..registry.guard import registry_seen_by
from .errors import HTTPError

if TYPE_CHECKING:
    from .request import Request
    from .transport import StreamableHTTPTransport


async def check_background_share(transport: StreamableHTTPTransport, request: Request,
                                 incoming: jsonrpc.Incoming, principal_key: str) -> None:
    """429 for a ``tools/call`` of a background tool when ``principal_key`` has its share in flight."""
    if incoming.kind != "request" or incoming.method != methods.TOOLS_CALL:
        return
    params = incoming.params if isinstance(incoming.params, dict) else {}
    name = params.get("name")
    tool = transport.server.known_tool(name) if isinstance(name, str) else None
    background = ports.implementation(ports.BackgroundCalls)
    if tool is None or not tool.background or background is None:
        return
    try:
        await background.check_share(principal_key)
    except TooManyBackgroundCalls as refused:
        if not await _visible(transport, request, name):
            return  # a tool hidden from this client is "not found", as the handler says
        raise HTTPError(429, refused.message, data=refused.data, request_id=incoming.id,
                        headers=[(b"retry-after", str(refused.retry_after).encode())]) from None


async def _visible(transport: StreamableHTTPTransport, request: Request, name: str) -> bool:
    principal = request.principal
    user_id = principal.user_id if principal is not None else None
    return name in (await registry_seen_by(transport.server, principal, user_id)).tools
