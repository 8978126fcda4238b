"""Hooks into daphne (Twisted) for the MCP endpoint; each does nothing when daphne is not the
server. ``mcp_server.asgi.get_asgi_application()`` and ``mcp_urlpatterns()`` install them (a
project's ASGI module calls nothing); ``mcp_server.asgi`` exports them too."""

from __future__ import annotations

import functools
import inspect
import io
import logging
import sys
from typing import Any

from ..settings import mcp_settings
from .send_window import MAX_BUFFERED_BYTES_KEY, SEND_WINDOW_KEY, SendWindow

logger = logging.getLogger("mcp_server.http")


def skip_daphne_form_parsing() -> None:
    """Under daphne, stop Twisted from parsing each POST body's Content-Type for a form upload.

    Twisted parses the ``Content-Type`` of every POST with the ``email`` package to fill
    ``request.args`` with form fields, which daphne never reads: it hands the raw body to the
    application (Django parses its own forms). That parse is about a tenth of the CPU of an MCP
    ``tools/call``. Twisted's ``Request`` takes ``parsePOSTFormSubmission=False`` to skip it;
    daphne builds its requests without arguments, so its request class is given that default.
    Call it from the project's ASGI module; it does nothing when daphne is not the server.
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.WebRequest, "_mcp_skips_form_parsing", False):
        return
    from twisted.web.http import Request

    if "parsePOSTFormSubmission" not in inspect.signature(Request.__init__).parameters:
        return  # a Twisted without the switch

    class WebRequest(module.WebRequest):
        _mcp_skips_form_parsing = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parsePOSTFormSubmission", False)
            super().__init__(*args, **kwargs)

    module.WebRequest = WebRequest


def send_daphne_writes_at_once() -> None:
    """Under daphne, turn Nagle's algorithm off on every connection it accepts (``TCP_NODELAY``).

    Twisted leaves it on. A response written in more than one piece (an SSE event, then the next;
    the last chunk of a chunked body) then waits, piece after piece, for the client's ACK of the
    one before, which a client delays up to 40 ms: a tail of tens of milliseconds on small
    requests that uvicorn, whose asyncio transports turn Nagle off, does not have. Call it from the
    project's ASGI module; it does nothing when daphne is not the server.
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.HTTPFactory, "_mcp_sends_at_once", False):
        return
    build_protocol = module.HTTPFactory.buildProtocol

    @functools.wraps(build_protocol)
    def buildProtocol(factory: Any, addr: Any) -> Any:
        protocol = build_protocol(factory, addr)
        if protocol is not None:
            protocol.makeConnection = functools.partial(_make_connection_with_nodelay, protocol,
                                                        protocol.makeConnection)
        return protocol

    module.HTTPFactory.buildProtocol = buildProtocol
    module.HTTPFactory._mcp_sends_at_once = True


def _make_connection_with_nodelay(protocol: Any, make_connection: Any, transport: Any) -> None:
    # Called once: the protocol's own makeConnection is put back, so nothing of this stays with
    # the connection (an open stream's keeps it for hours).
    del protocol.makeConnection
    set_nodelay = getattr(transport, "setTcpNoDelay", None)
    if set_nodelay is not None:  # a TCP connection (not a UNIX socket's)
        try:
            set_nodelay(True)
        except OSError as error:  # the connection is already gone: nothing to speed up
            logger.debug("TCP_NODELAY not set: %s", error)
    make_connection(transport)


# How long a refused upload is still read (and dropped) after its 413, so that a client that sends
# its whole body before reading the answer gets to read it; bounded, so one that never stops
# sending cannot hold the connection.
REFUSED_BODY_LINGER_SECONDS = 5.0


def refuse_oversized_daphne_bodies(path: str = "/mcp", max_bytes: int | None = None) -> None:
    """Under daphne, refuse a request body to ``path`` as soon as it passes ``max_bytes``.

    daphne (Twisted) holds a whole request body, in memory or a temporary file, before the
    application sees a byte of it, so the endpoint's own 413 would come after the upload was
    taken in. With this hook the 413 goes out when the Content-Length says too much, or when the
    chunks received pass the limit: what follows is dropped and the connection closed. Requests
    to other paths (the admin) are untouched. ``max_bytes`` defaults to
    ``MCP_SERVER["MAX_REQUEST_BYTES"]``. Call it from the project's ASGI module; it does nothing
    when daphne is not the server.
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.WebRequest, "_mcp_limits_bodies", False):
        return
    from urllib.parse import unquote_to_bytes, urlsplit

    from mcp_protocol import jsonrpc
    from mcp_protocol.errors import INVALID_REQUEST

    endpoint = path.encode("utf-8")

    def limit() -> int:
        if max_bytes is not None:
            return max_bytes
        return mcp_settings.MAX_REQUEST_BYTES

    class WebRequest(module.WebRequest):
        _mcp_limits_bodies = True
        _mcp_body_limit: int | None = None
        _mcp_body_bytes = 0
        _mcp_body_refused = False

        def gotLength(self, length: int | None) -> None:
            # The request target: self.path is only set once the body is in. (A Twisted without
            # it leaves the limit to the endpoint, which applies it as the body is handed on.)
            target = getattr(self.channel, "_path", b"")
            if target.startswith(b"http"):
                target = urlsplit(target).path  # absolute form
            if unquote_to_bytes(target.split(b"?", 1)[0]) == endpoint:
                self._mcp_body_limit = limit()
                if length is not None and length > self._mcp_body_limit:
                    self.content = io.BytesIO()
                    self.refuse_oversized_body()
                    return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._mcp_body_refused:
                return
            if self._mcp_body_limit is not None:
                self._mcp_body_bytes += len(data)
                if self._mcp_body_bytes > self._mcp_body_limit:
                    self.content.close()
                    self.content = io.BytesIO()
                    self.refuse_oversized_body()
                    return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            if not self._mcp_body_refused:  # a refused body was answered when it was refused
                super().requestReceived(command, path, version)

        def refuse_oversized_body(self) -> None:
            """Answer 413 now, drop the rest of the body, and close the connection."""
            from twisted.internet import reactor  # daphne's, installed by the time bodies arrive

            self._mcp_body_refused = True
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after the answer
            channel = self.channel
            if channel.requests[:1] != [self]:
                # An earlier pipelined request still owns the connection's output.
                channel.transport.abortConnection()
                return
            message = f"Payload Too Large: the body exceeds {self._mcp_body_limit} bytes"
            body = jsonrpc.encode(jsonrpc.error_response(None, INVALID_REQUEST, message)).encode()
            channel.transport.write(
                b"HTTP/1.1 413 Content Too Large\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            channel.transport.loseWriteConnection()
            closer = reactor.callLater(REFUSED_BODY_LINGER_SECONDS, channel.transport.abortConnection)
            self.notifyFinish().addBoth(lambda _: closer.active() and closer.cancel())

    module.WebRequest = WebRequest


def cut_off_slow_daphne_readers() -> None:
    """Under daphne, apply :class:`SendWindow` to the responses that carry one.

    Such a response's window becomes the producer of its connection: Twisted pauses it when the
    socket's buffer fills and resumes it when the client has read it. The bytes written while
    paused are counted; past the response's limit the window closes until the next resume. Call
    it from the project's ASGI module; it does nothing when daphne is not the server.

    The request keeps nothing of it: the window comes with each of the response's messages, and
    the connection holds it as its producer. (An attribute set on a request grows Twisted's
    request ``__dict__`` past its size, about 1.5 KiB more for each open stream.)
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.WebRequest, "_mcp_cuts_off_slow_readers", False):
        return

    class WebRequest(module.WebRequest):
        _mcp_cuts_off_slow_readers = True

        def handle_reply(self, message: dict) -> None:
            window: SendWindow | None = message.get(SEND_WINDOW_KEY)
            if window is not None:
                if message["type"] == "http.response.start":
                    if not self.finished and self.channel is not None:
                        window.attach(self._mcp_cut_off, int(message.get(MAX_BUFFERED_BYTES_KEY, 0)))
                        # Straight to the connection: Request.registerProducer would set two
                        # attributes on the request.
                        self.channel.registerProducer(window, True)
                elif window.attached:
                    window.written(len(message.get("body", b"")))
                    if not message.get("more_body", False):
                        window.detach()
                        self._mcp_unregister()
            super().handle_reply(message)

        def _mcp_cut_off(self) -> None:
            """The window's client read nothing for too long (the window is detached)."""
            self._mcp_unregister()
            if self.channel is not None and self.channel.transport is not None:
                self.channel.transport.abortConnection()

        def _mcp_unregister(self) -> None:
            if self.channel is not None:
                self.channel.unregisterProducer()

    module.WebRequest = WebRequest


def drain_daphne_on_shutdown() -> None:
    """Under daphne, drain before the process exits (see ``mcp_server.http.drain``).

    daphne stops the reactor on SIGTERM, and its "before shutdown" trigger cancels every
    application instance at once: the calls in flight are lost. With this hook that trigger first
    stops accepting connections (idle ones are closed, as uvicorn closes them, and busy ones once
    their response is out, so that a load balancer sends what follows elsewhere), drains
    (streams end with a retry hint, calls finish, up to ``DRAIN_TIMEOUT``), and only then cancels
    what is left (:func:`cancel_applications`); Twisted waits for the Deferred it returns. A drain
    that fails is logged (daphne sends Twisted's own log nowhere below ``-v 2``) and the shutdown
    goes on. Call it from the project's ASGI module; it does nothing when daphne is not the server.
    """
    server_module = sys.modules.get("daphne.server")
    protocol_module = sys.modules.get("daphne.http_protocol")
    if server_module is None or protocol_module is None \
            or getattr(server_module.Server, "_mcp_drains", False):
        return
    import weakref

    from .drain import drain

    server_class = server_module.Server
    listen_success = server_class.listen_success
    factory_class = protocol_module.HTTPFactory
    build_protocol = factory_class.buildProtocol
    connections: weakref.WeakSet[Any] = weakref.WeakSet()

    def remember_connection(self: Any, addr: Any) -> Any:
        protocol = build_protocol(self, addr)
        connections.add(protocol)
        return protocol

    def remember_port(self: Any, port: Any) -> Any:
        self.__dict__.setdefault("_mcp_ports", []).append(port)
        return listen_success(self, port)

    def drain_then_kill(self: Any) -> Any:
        import asyncio

        from twisted.internet import defer

        def stop_accepting() -> None:
            for port in self.__dict__.get("_mcp_ports", []):
                port.stopListening()
            for protocol in list(connections):
                channel = getattr(protocol, "_channel", protocol)  # HTTP/1.1 (not HTTP/2)
                if not isinstance(getattr(channel, "requests", None), list):
                    continue
                if channel.requests:
                    channel.persistent = False  # closed once its response is out
                elif channel.transport is not None:
                    channel.transport.loseConnection()

        def failed(failure: Any) -> None:
            logger.error("the drain failed; the shutdown goes on",
                         exc_info=(failure.type, failure.value, failure.getTracebackObject()))

        drain.on_start(stop_accepting)
        drained = defer.Deferred.fromFuture(asyncio.ensure_future(drain.wait()))
        drained.addErrback(failed)
        drained.addCallback(lambda _: defer.Deferred.fromFuture(asyncio.ensure_future(
            cancel_applications(self.connections))))
        drained.addErrback(failed)
        return drained

    factory_class.buildProtocol = remember_connection
    server_class.listen_success = remember_port
    server_class.kill_all_applications = drain_then_kill
    server_class._mcp_drains = True

    class WebRequest(protocol_module.WebRequest):
        def process(self) -> None:
            if drain.draining and self.channel is not None:
                self.channel.persistent = False  # answered 503 by the application, then closed
            super().process()

    protocol_module.WebRequest = WebRequest


async def cancel_applications(connections: dict[Any, dict]) -> int:
    """Cancel the application instances of daphne's ``connections`` still running (after the
    drain), and wait up to ``CANCEL_GRACE`` seconds for them to end; returns how many there were.

    daphne's own ``kill_all_applications`` is not used: it fails (KeyError) on a connection whose
    instance it already reaped (a kept-alive connection between requests), and waits without a
    bound for instances that do not end when cancelled.
    """
    import asyncio

    from .drain import CANCEL_GRACE

    left = [details.get("application_instance") for details in list(connections.values())]
    running = [instance for instance in left if instance is not None and not instance.done()]
    for instance in running:
        instance.cancel()
    if running:
        _done, pending = await asyncio.wait(running, timeout=CANCEL_GRACE)
        if pending:
            logger.warning("%d application instances did not end within %g s of their cancellation",
                           len(pending), CANCEL_GRACE)
    logger.info("cancelled %d application instances left after the drain", len(running))
    return len(running)
