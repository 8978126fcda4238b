"""OAuth 2.0 Protected Resource Metadata (RFC 9728) of the MCP endpoint, as an ASGI application.

Served at ``/.well-known/oauth-protected-resource`` followed by the endpoint's path (RFC 9728
3.1; ``/.well-known/oauth-protected-resource/mcp`` for ``/mcp``) and at the root form, where MCP
clients look for it when a 401 carries no ``resource_metadata``. Readable from any origin:
browser-based clients fetch it cross-origin, and it holds nothing secret.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..http.checks import check_host
from ..http.errors import HTTPError
from ..http.request import Request
from .resource_server import WELL_KNOWN

if TYPE_CHECKING:
    from ..http.transport import StreamableHTTPTransport

CORS = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-methods", b"GET, OPTIONS"),
        (b"access-control-allow-headers", b"mcp-protocol-version")]
# Clients and proxies may keep the document this long (seconds); it changes with the settings.
MAX_AGE = 300


class ProtectedResourceMetadata:
    """The metadata of the endpoint ``transport()`` returns (it is asked at each request, so a
    transport built after the settings changed is the one described); ``mcp_path``: the path of
    that endpoint (when the ``RESOURCE`` setting does not name it)."""

    def __init__(self, transport: Callable[[], StreamableHTTPTransport], mcp_path: str = "/mcp"):
        self.transport = transport
        self.mcp_path = "/" + mcp_path.strip("/")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        request = Request(scope)
        try:
            status, body, headers = self.answer(request)
        except HTTPError as error:
            status, body, headers = error.status, error.body(), []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *CORS, *headers]})
        await send({"type": "http.response.body", "body": body})

    def answer(self, request: Request) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        if request.method == "OPTIONS":
            return 204, b"", []
        if request.method not in ("GET", "HEAD"):
            raise HTTPError(405, f"Method not allowed: {request.method}", headers=[(b"allow", b"GET")])
        transport = self.transport()
        host = check_host(request, transport.allowed_hosts) or "localhost"
        suffix = request.path.removeprefix(WELL_KNOWN).rstrip("/")
        resource_server = transport.challenges
        if resource_server.resource:
            resource = resource_server.resource
            served = urlsplit(resource).path.rstrip("/")
        else:
            served = self.mcp_path
            resource = f"{request.scheme}://{host}{self.mcp_path}"
        if suffix not in ("", served):
            raise HTTPError(404, f"Not Found: no protected resource at {suffix!r}")
        body = json.dumps(resource_server.metadata(resource)).encode()
        return 200, (b"" if request.method == "HEAD" else body), [
            (b"cache-control", b"public, max-age=%d" % MAX_AGE)]
