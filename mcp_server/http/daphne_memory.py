"""Under daphne, what it keeps for each open request, made smaller: an open GET stream holds its
request for hours, and ten thousand of them are ten thousand of each.

- A lean input queue (:func:`lean_daphne_request_queues`): daphne hands each request's messages to
  its application through an ``asyncio.Queue``, about 3 KiB (three deques and an ``Event``); a
  :class:`~.mailbox.Mailbox` does the same in a few hundred bytes.
- A request object without a full ``__dict__`` (:func:`slim_daphne_requests`): Python keeps an
  instance's attributes in a compact array shared in shape by every instance of its class, up to
  30 names; daphne's ``WebRequest`` and Twisted's ``Request`` set 32 on a request that is
  answered, and the 31st turns its attributes into a dict of its own, about 1.3 KiB more. The
  attributes set on every request are given slots instead.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any

from .mailbox import Mailbox

# Attributes daphne's WebRequest and Twisted's Request set on every request they answer (daphne's
# own, then the response's), kept in slots.
REQUEST_SLOTS = ("_disconnected", "_response_started", "application_queue", "chunked", "clean_headers",
                 "client_addr", "client_scheme", "code", "code_message", "finished", "query_string",
                 "request_start", "root_path", "sentLength", "server", "server_addr", "startedWriting")


def lean_daphne_request_queues() -> None:
    """Under daphne, each request's messages wait in a :class:`~.mailbox.Mailbox` rather than an
    ``asyncio.Queue`` (once per process; nothing when daphne is not the server). daphne's request
    (and its WebSocket protocol) only put into it, and test that it is there; the application
    gets them with ``receive()``."""
    server_module = sys.modules.get("daphne.server")
    if server_module is None or getattr(server_module.Server, "_mcp_lean_queues", False):
        return
    server_class = server_module.Server
    if getattr(server_class, "_mcp_reaps_at_once", False):
        server_class._mcp_create_application = create_application  # beneath the reaping hook
    else:
        server_class.create_application = create_application
    server_class._mcp_lean_queues = True


def create_application(self: Any, protocol: Any, scope: dict) -> Mailbox | None:
    """daphne's ``Server.create_application``, with a :class:`~.mailbox.Mailbox` for its queue."""
    # Make sure the protocol has not had another application made for it (as daphne asserts).
    assert "application_instance" not in self.connections[protocol]
    queue = Mailbox()
    scope.setdefault("asgi", {"version": "3.0"})
    application_instance = self.application(scope=scope, receive=queue.get,
                                            send=functools.partial(self.handle_reply, protocol))
    if protocol not in self.connections:
        return None
    self.connections[protocol]["application_instance"] = asyncio.ensure_future(
        application_instance, loop=asyncio.get_event_loop())
    return queue


def slim_daphne_requests() -> None:
    """Under daphne, keep the attributes every request gets in slots (once per process; nothing
    when daphne is not the server). A slot has no class default to fall back on: the names that
    have one (Twisted's ``code = 200``, say) are given it as the request is made."""
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.WebRequest, "_mcp_slim", False):
        return
    base = module.WebRequest
    missing = object()
    defaults = [(name, value) for name in REQUEST_SLOTS
                if (value := getattr(base, name, missing)) is not missing]

    class WebRequest(base):
        __slots__ = REQUEST_SLOTS
        _mcp_slim = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            for name, value in defaults:
                setattr(self, name, value)
            super().__init__(*args, **kwargs)

    module.WebRequest = WebRequest
