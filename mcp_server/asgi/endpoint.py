"""The ASGI applications of the endpoint: the default server over Streamable HTTP, the session
cookie's user, and the OAuth Protected Resource Metadata (RFC 9728) of the endpoint."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from asgiref.sync import markcoroutinefunction

# The layers here pass a request on without a coroutine of their own (their __call__ returns the
# next application's): an open stream would keep each for as long as it is open.


class _LazyEndpoint:
    """Builds the default transport on the first request, after every ``mcp.py`` has run."""

    def __init__(self) -> None:
        self._app: Any = None
        self._server: Any = None
        self._get_transport: Any = None

    @markcoroutinefunction
    def __call__(self, scope: dict, receive: Any, send: Any) -> Awaitable[None]:
        get_transport = self._get_transport
        if get_transport is None:  # imported here once: the site module needs Django set up
            from ..site import get_transport

            self._get_transport = get_transport
        transport = get_transport()
        if self._app is None or self._server is not transport.server:
            self._app, self._server = transport.as_asgi(), transport.server
        return self._app(scope, receive, send)


def streamable_http_app() -> Any:
    """The ASGI application serving the default server over Streamable HTTP."""
    return _LazyEndpoint()


class SessionAuth:
    """Channels' ``AuthMiddlewareStack`` around ``app``, for the requests that need it.

    The user of a Django session cookie owns the MCP sessions it opens. Resolving that user costs
    a cookie parse, a session lookup and a worker-thread hop for the database, on every request:
    most MCP clients send no cookie at all, so a request without the session cookie goes straight
    to ``app`` (as the stack would leave it: no authenticated user), and only one with the cookie
    goes through the stack.
    """

    def __init__(self, app: Any):
        from channels.auth import AuthMiddlewareStack

        self.app = app
        self.with_user = AuthMiddlewareStack(app)
        self._marker: bytes | None = None

    @property
    def marker(self) -> bytes:
        """``<SESSION_COOKIE_NAME>=``, read once (settings are loaded by the first request)."""
        if self._marker is None:
            from django.conf import settings

            self._marker = settings.SESSION_COOKIE_NAME.encode("latin-1") + b"="
        return self._marker

    @markcoroutinefunction
    def __call__(self, scope: dict, receive: Any, send: Any) -> Awaitable[None]:
        marker = self.marker
        for name, value in scope.get("headers", ()):
            if name == b"cookie" and marker in value:
                return self.with_user(scope, receive, send)
        return self.app(scope, receive, send)


def session_auth(app: Any) -> Any:
    """``app`` with the user of a Django session cookie in ``scope["user"]`` when one is sent."""
    return SessionAuth(app)


def protected_resource_metadata_app(mcp_path: str = "/mcp") -> Any:
    r"""The ASGI application serving the endpoint's OAuth Protected Resource Metadata (RFC 9728);
    mount it at ``/.well-known/oauth-protected-resource`` and every path below it::

        re_path(r"^\.well-known/oauth-protected-resource(?:/.*)?$", protected_resource_metadata_app()),
    """
    from ..auth.metadata import ProtectedResourceMetadata
    from ..site import get_transport

    return ProtectedResourceMetadata(get_transport, mcp_path)


