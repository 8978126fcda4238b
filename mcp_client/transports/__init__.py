"""The client's transports: stdio (a subprocess) and Streamable HTTP (httpx)."""

from __future__ import annotations

import shlex
from typing import Any


def transport_for(target: Any) -> Any:
    """What ``Client`` and ``AsyncClient`` are given, as a transport: an ``http://`` or ``https://``
    URL is Streamable HTTP (``HTTPTransport(url)``), another string the command line of a stdio
    server, split as a shell splits it (``"python manage.py mcp_stdio"``), and a transport is
    used as it is (for options: ``HTTPTransport(url, headers=...)``, ``StdioTransport(...)``)."""
    if isinstance(target, bytes | bytearray):
        raise TypeError("give the server as a str (a URL or a command line) or a transport, not bytes")
    if not isinstance(target, str):
        return target
    if target.startswith(("http://", "https://")):
        from .http import HTTPTransport

        return HTTPTransport(target)
    words = shlex.split(target)
    if not words:
        raise ValueError("the server is an empty string: give a URL, a command line or a transport")
    from .stdio import StdioTransport

    return StdioTransport(words[0], words[1:])
