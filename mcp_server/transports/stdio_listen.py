"""``subscriptions/listen`` over stdio (2026-07-28, SEP-2575): every subscription shares the one
channel, so each notification it delivers carries its request's id as
``io.modelcontextprotocol/subscriptionId``, and the acknowledgement comes first per subscription.

A subscription lives until the client sends ``notifications/cancelled`` naming its request (which
gets no response, as for any cancelled request) or stdin closes. Nothing is stored: a client that
connects again sends its ``subscriptions/listen`` again, as the specification says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.cancellation import Cancellation
from mcp_protocol.envelope import SUBSCRIPTION_ID_KEY, Envelope
from mcp_protocol.errors import INVALID_REQUEST, MCPError

from .. import ports
from ..modern.listen_filter import LISTENABLE, TASK_IDS, ListenFilter, honour, parse_requested

if TYPE_CHECKING:
    from ..server import Server
    from ..session import ServerSession


def stamped(message: dict, request_id: Any) -> dict:
    """``message`` with the subscription's id in its ``params._meta`` (the caller's dicts untouched)."""
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), SUBSCRIPTION_ID_KEY: request_id}
    return {**message, "params": params}


class StdioListens:
    """The listen subscriptions of one stdio connection; ``write`` puts one message on stdout."""

    def __init__(self, server: Server, session: ServerSession, write: Callable[[dict], bool]):
        self.server = server
        self.session = session
        self._write = write
        # Offered from any thread (a broadcast from a worker thread, say): the table is guarded.
        self._lock = threading.Lock()
        self._subscriptions: dict[Any, ListenFilter] = {}

    def __len__(self) -> int:
        return len(self._subscriptions)

    async def open(self, message: dict, envelope: Envelope, principal: Any = None) -> dict | None:
        """Acknowledge ``message`` (a ``subscriptions/listen`` request) and start delivering; None
        (the request stays open) or the JSON-RPC error that refuses it."""
        request_id = message["id"]
        try:
            requested = parse_requested(message.get("params"))
            if TASK_IDS in requested:
                # The tasks the caller may see, as the Tasks extension says (with none installed, none).
                task_filter = ports.implementation(ports.ListenTaskFilter)
                requested[TASK_IDS] = [] if task_filter is None else await task_filter.visible_task_ids(
                    requested[TASK_IDS], envelope, principal)
        except MCPError as error:
            return jsonrpc.error_from(request_id, error)
        if request_id in self.session.in_flight:
            return jsonrpc.error_response(request_id, INVALID_REQUEST, "Invalid Request: a request "
                                          f"with id {request_id!r} is in flight already")
        honoured = honour(requested, self.server.capabilities_for(envelope.protocol_version))
        acknowledgement = jsonrpc.notification(methods.NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED, {
            "notifications": honoured.wire, "_meta": {SUBSCRIPTION_ID_KEY: request_id}})
        # Registered under the lock the acknowledgement is written in: no notification of this
        # subscription can be written before it.
        with self._lock:
            if not self._write(acknowledgement):
                return None  # stdout is gone: nobody is left to deliver to
            self._subscriptions[request_id] = honoured
        cancellation = Cancellation(request_id)
        cancellation.on_cancel(lambda _cancelled: self._close(request_id))
        self.session.in_flight[request_id] = cancellation
        return None

    def _close(self, request_id: Any) -> None:
        with self._lock:
            self._subscriptions.pop(request_id, None)
        self.session.in_flight.pop(request_id, None)

    def offer(self, message: dict) -> bool:
        """Deliver ``message`` to each subscription whose filter honours it; True if any did."""
        if message.get("method") not in LISTENABLE:
            return False
        delivered = False
        with self._lock:
            for request_id, honoured in list(self._subscriptions.items()):
                if honoured.wants(message):
                    delivered = self._write(stamped(message, request_id)) or delivered
        return delivered
