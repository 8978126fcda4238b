"""Under daphne, forget a request as soon as its application instance ends.

daphne keeps every request it served in ``Server.connections`` (its application future, its input
queue, its headers, a task, a timer) until ``application_checker`` walks the whole dict, once a
second. At a thousand requests a second a process carries up to a thousand finished requests:
they outlive the young collections, are promoted to the oldest generation, and make the full
collections that follow both more frequent and longer, and the walk reaps them all in one burst.
Both show in the latency tail of an otherwise idle server (docs/performance.md, "The tail at
concurrency 1"). With this hook a request that ended cleanly is removed when its application
instance ends; one that failed or was cancelled is still left to daphne's checker, which logs it
and answers the client as daphne always did.
"""

from __future__ import annotations

import functools
import sys
from typing import Any


def reap_finished_daphne_requests() -> None:
    """Install the hook (once per process; nothing when daphne is not the server)."""
    server_module = sys.modules.get("daphne.server")
    if server_module is None or getattr(server_module.Server, "_mcp_reaps_at_once", False):
        return
    server_class = server_module.Server
    # Looked up at each call: daphne_memory.lean_daphne_request_queues() may replace it beneath.
    server_class._mcp_create_application = server_class.create_application

    def create_and_watch(self: Any, protocol: Any, scope: dict) -> Any:
        queue = self._mcp_create_application(protocol, scope)
        details = self.connections.get(protocol)
        instance = details.get("application_instance") if details is not None else None
        if instance is not None:
            instance.add_done_callback(functools.partial(_reap, self.connections, protocol))
        return queue

    server_class.create_application = create_and_watch
    server_class._mcp_reaps_at_once = True


def _reap(connections: dict[Any, dict], protocol: Any, ended: Any) -> None:
    """What daphne's checker does for an instance that ended cleanly, done now."""
    if ended.cancelled() or ended.exception() is not None:
        return  # daphne's checker logs it and answers the client, as it always did
    details = connections.get(protocol)
    if details is None or details.get("application_instance") is not ended:
        return
    if details.get("disconnected"):
        del connections[protocol]
    else:
        # A connection still open (a WebSocket, or a request whose transport lingers): daphne's
        # checker removes it once it disconnects, as it does after reaping the instance itself.
        del details["application_instance"]
