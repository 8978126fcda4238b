"""Running one tool for the Try it page, as an MCP client of the server would.

The call goes through the server's own dispatch on a session of its own whose user is the
logged-in one, so what holds over MCP holds here: a disabled tool, or one restricted to a
permission the user lacks, is "not found"; arguments are checked; a background tool runs as a
background call (with its record). What the tool sends while it runs comes out as events, in the
order sent, then how the call ended.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from mcp_protocol import methods
from mcp_protocol.versions import LATEST_HANDSHAKE_VERSION

from ..server import Server
from ..session import ServerSession

REQUESTS_REFUSED = ("Try it in admin cannot answer requests to the client (elicitation, sampling, "
                    "roots): call this tool from an MCP client to answer them")
CLIENT_INFO = {"name": "django-admin-try-it", "version": "1"}
# Messages a page has not read yet; past this, further ones are dropped (progress is lossy anyway)
# rather than held without bound for a page that stopped reading.
MAX_QUEUED = 1000
REQUEST_ID = 1

# Runs the page stopped waiting for, kept until they end (each was told to cancel).
_abandoned: set[asyncio.Task] = set()


class PageOutbound:
    """Where the session's messages go: a queue the page's stream reads."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict] = asyncio.Queue(MAX_QUEUED)

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True


class TryItSession(ServerSession):
    """A session of one Try it run: initialized on the latest handshake revision, every log level
    let through, and no way to answer the tool's requests to the client."""

    requests_refused = REQUESTS_REFUSED

    def __init__(self, server: Server, user_id: Any):
        super().__init__(server, outbound=PageOutbound())
        self.user_id = user_id
        self.initialized = True
        self.protocol_version = LATEST_HANDSHAKE_VERSION
        self.client_info = dict(CLIENT_INFO)
        self.client_capabilities = {}
        self.log_level = "debug"


def event_of(message: dict) -> tuple[str, Any]:
    """A message the tool sent, as an event of the page: progress, a log message, or another
    notification (its method and params)."""
    params = message.get("params") or {}
    if message.get("method") == methods.NOTIFICATIONS_PROGRESS:
        return "progress", {key: params[key] for key in ("progress", "total", "message") if key in params}
    if message.get("method") == methods.NOTIFICATIONS_MESSAGE:
        return "log", {key: params.get(key) for key in ("level", "logger", "data")}
    return "notification", {"method": message.get("method"), "params": params}


async def run(server: Server, name: str, arguments: dict, user_id: Any, *,
              keepalive: float = 15.0) -> AsyncIterator[tuple[str, Any]]:
    """Call the tool ``name`` as the user ``user_id``; yields ``(kind, data)`` events: "progress",
    "log", "notification" while it runs ("keepalive", with None, every ``keepalive`` seconds of
    silence), then one of "result" (the tool's result), "error" (the JSON-RPC error) or
    "cancelled". Closing the iterator early cancels the call."""
    session = TryItSession(server, user_id)
    queue = session.outbound.queue
    message = {"jsonrpc": "2.0", "id": REQUEST_ID, "method": methods.TOOLS_CALL, "params": {
        "name": name, "arguments": arguments, "_meta": {"progressToken": uuid.uuid4().hex}}}
    call = asyncio.ensure_future(server.handle_async(message, session))
    getter: asyncio.Future | None = None
    finished = False
    try:
        while True:
            if getter is None or getter.done():
                getter = asyncio.ensure_future(queue.get())
            done, _pending = await asyncio.wait({getter, call}, timeout=keepalive,
                                                return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield event_of(getter.result())
                continue
            if call in done:
                getter.cancel()
                break
            yield "keepalive", None  # the same getter waits on
        while not queue.empty():  # what the tool sent before it returned comes first
            yield event_of(queue.get_nowait())
        finished = True
        response = call.result()
        if response is None:
            yield "cancelled", None
        elif "error" in response:
            yield "error", response["error"]
        else:
            yield "result", response["result"]
    finally:
        if getter is not None:
            getter.cancel()
        if not finished:
            # The page went away (or stopped it): the tool is told, as a client's cancel would.
            session.cancel_request(REQUEST_ID, "the Try it page stopped waiting")
            if not call.done():
                _abandoned.add(call)
                call.add_done_callback(_abandoned.discard)
