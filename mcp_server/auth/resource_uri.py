"""The endpoint's resource URI (RFC 8707, the MCP spec's canonical server URI), as the resource
server advertises it and as the local authorization server's tokens are bound to it."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from ..http.request import Request

DEFAULT_PORTS = {"http": 80, "https": 443}


def request_uri(request: Request) -> str:
    """Where the request came to: its scheme, Host and path."""
    host = request.header("host") or "localhost"
    return f"{request.scheme}://{host}{request.path}"


def canonical(uri: str) -> str:
    """A resource URI for comparison: scheme and host in lower case, no default port, no
    trailing slash."""
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return uri
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")
