"""The MCP endpoint for a project's ASGI router.

    application = ProtocolTypeRouter({"http": URLRouter([
        path("mcp", streamable_http_app()),
        re_path(r"", get_asgi_application()),
    ])})
"""

from __future__ import annotations

from typing import Any


class _LazyEndpoint:
    """Builds the default transport on the first request, after every ``mcp.py`` has run."""

    def __init__(self) -> None:
        self._app: Any = None
        self._server: Any = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        from .site import get_transport

        transport = get_transport()
        if self._app is None or self._server is not transport.server:
            self._app, self._server = transport.as_asgi(), transport.server
        await self._app(scope, receive, send)


def streamable_http_app() -> Any:
    """The ASGI application serving the default server over Streamable HTTP."""
    return _LazyEndpoint()
