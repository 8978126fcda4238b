"""Under daphne, what Twisted does for every request and nobody uses, spared. Each hook does
nothing when daphne is not the server, and runs once per process; ``install_daphne_hooks``
(``mcp_server.asgi``) installs them with the others.

- ``twisted.web.http`` read through Twisted's deprecation proxy (:func:`read_twisted_web_directly`);
- an access-log line made for a Twisted log that daphne discards
  (:func:`skip_discarded_twisted_access_lines`);
- a connection's idle timer cancelled and made anew for each request (:func:`keep_daphne_idle_timers`).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from typing import Any


def read_twisted_web_directly() -> None:
    """Under daphne, let its modules read ``twisted.web.http`` itself rather than through Twisted's
    deprecation proxy.

    Twisted wraps ``twisted.web.http`` in a module proxy (``twisted.python.deprecate``) that warns
    of a few deprecated names; every attribute read through it runs Python code, about thirty
    times a plain read. daphne reads ``http.Request`` through it three times a request (its
    ``__init__``, ``write`` and ``finish``), none of them a deprecated name. Once per process;
    nothing when daphne is not the server, or Twisted no longer wraps the module.
    """
    for name in ("daphne.http_protocol", "daphne.server"):
        module = sys.modules.get(name)
        proxy = getattr(module, "http", None)
        # (isinstance would be fooled: the proxy answers __class__ with the module's.)
        if proxy is None or type(proxy) is types.ModuleType:
            continue
        with contextlib.suppress(AttributeError):  # not the proxy it was: left as it is
            module.http = object.__getattribute__(proxy, "_module")


def skip_discarded_twisted_access_lines() -> None:
    """Under daphne, make no Twisted access-log line for a request when Twisted's log goes nowhere.

    Twisted's ``HTTPFactory`` formats an Apache-style line for every request it finishes (client
    address, escaped request line, referrer, user agent) and writes it to Twisted's log, a few
    percent of a request's CPU. daphne, below verbosity 2, sends Twisted's log nowhere (its own
    access log, ``--access-log``, is written apart), so the line is made for nothing; from
    verbosity 2 it is made as before. Once per process; nothing when daphne is not the server.
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.HTTPFactory, "_mcp_skips_discarded_lines", False):
        return
    twisted_log = module.HTTPFactory.log

    @functools.wraps(twisted_log)
    def log(factory: Any, request: Any) -> None:
        # daphne's server.run() sends Twisted's log to a function that drops it below verbosity 2.
        if getattr(factory.server, "verbosity", 2) > 1:
            twisted_log(factory, request)

    module.HTTPFactory.log = log
    module.HTTPFactory._mcp_skips_discarded_lines = True


def keep_daphne_idle_timers() -> None:
    """Under daphne, leave a connection's idle timer running while it serves a request, rather than
    cancel it and make another for each request.

    Twisted stops a connection's idle timeout (daphne's is twelve hours) once a request's body
    has arrived, and starts a new one once it is answered: a timer cancelled and another made,
    through the reactor's heap of timers and asyncio's beneath it, about a twentieth of a small
    request's instructions. Here the timer stays while a request is in the connection, the idle
    timeout marked off (``timeOut`` None, as Twisted marks it); the answer puts the timeout back
    and moves the timer later, which costs Twisted an attribute. A timer that fires while a
    request is served does nothing, and the answer starts a new one. A connection lost cancels
    its timer as before, and so does a stop with no request in the connection (a switch to
    HTTP/2).
    """
    if "daphne.http_protocol" not in sys.modules:
        return
    from twisted.web.http import HTTPChannel

    if getattr(HTTPChannel, "_mcp_keeps_idle_timers", False):
        return
    set_timeout, timeout_connection = HTTPChannel.setTimeout, HTTPChannel.timeoutConnection
    connection_lost = HTTPChannel.connectionLost

    @functools.wraps(set_timeout)
    def setTimeout(channel: Any, period: float | None) -> float | None:
        if period is None and channel.timeOut is not None and channel.requests:
            previous, channel.timeOut = channel.timeOut, None
            return previous
        return set_timeout(channel, period)

    @functools.wraps(timeout_connection)
    def timeoutConnection(channel: Any) -> None:
        if channel.timeOut is None:  # the timer left running fired while a request was served
            return
        timeout_connection(channel)

    @functools.wraps(connection_lost)
    def connectionLost(channel: Any, reason: Any) -> None:
        set_timeout(channel, None)  # Twisted's own: the timer cancelled, requests or not
        connection_lost(channel, reason)

    HTTPChannel.setTimeout, HTTPChannel.timeoutConnection = setTimeout, timeoutConnection
    HTTPChannel.connectionLost = connectionLost
    HTTPChannel._mcp_keeps_idle_timers = True
