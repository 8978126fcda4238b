"""The per-request integration style (HTTP-02): a Django view hands its request to a transport and
gets the status, headers and body back, as the Ruby SDK's ``handle_request`` returns them.

The response is gathered whole before it is returned, so this style suits a transport whose
responses end (a stateless one, or JSON responses): a GET stream that never ends belongs on the
mounted endpoint (``as_asgi()``) instead.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.http import HttpRequest

    from .transport import StreamableHTTPTransport

Reply = tuple[int, list[tuple[str, str]], bytes]


def scope_of(request: HttpRequest) -> dict[str, Any]:
    """The ASGI HTTP scope of a Django request: its own under ASGI, one built from ``META`` under WSGI."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and scope.get("type") == "http":
        return scope
    meta = request.META
    named = {name[5:]: value for name, value in meta.items() if name.startswith("HTTP_")}
    named.update({name: meta[name] for name in ("CONTENT_TYPE", "CONTENT_LENGTH") if meta.get(name)})
    headers = [(name.replace("_", "-").lower().encode("latin-1"), str(value).encode("latin-1"))
               for name, value in named.items()]
    client = (meta["REMOTE_ADDR"], int(meta.get("REMOTE_PORT") or 0)) if meta.get("REMOTE_ADDR") else None
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(),
            "query_string": meta.get("QUERY_STRING", "").encode("latin-1"), "root_path": "",
            "headers": headers, "client": client,
            "server": (request.get_host().rsplit(":", 1)[0], int(request.get_port()))}


async def handle_request(transport: StreamableHTTPTransport, request: HttpRequest) -> Reply:
    """Serve one Django request with ``transport``: ``(status, headers, body)``."""
    body = request.body  # read by Django already (or now, under WSGI)
    delivered = False
    finished = asyncio.Event()
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            # The client is there until the response is complete: a disconnect would cancel it.
            await finished.wait()
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend((name.decode("latin-1"), value.decode("latin-1"))
                           for name, value in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    await transport.as_asgi()(scope_of(request), receive, send)
    return status, headers, b"".join(chunks)
