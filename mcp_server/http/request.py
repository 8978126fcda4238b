"""An HTTP request to the endpoint, as the transport and authentication read it."""

from __future__ import annotations

from typing import Any


class Request:
    """The parts of an ASGI HTTP scope the transport reads (header names in lower case)."""

    __slots__ = ("client", "headers", "method", "path", "principal", "scheme", "scope", "user")

    def __init__(self, scope: dict):
        self.scope = scope
        self.method: str = scope["method"]
        self.path: str = scope.get("path", "")
        self.scheme: str = scope.get("scheme", "http")
        self.client = scope.get("client")
        raw = scope.get("headers", ())
        if not isinstance(raw, list | tuple):
            raw = list(raw)
        # One comprehension (this runs for every request); a name sent twice, which it would
        # keep once, is joined as a comma-separated list instead.
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in raw}
        if len(headers) != len(raw):
            headers = {}
            for name, value in raw:
                key = name.decode("latin-1").lower()
                text = value.decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers: dict[str, str] = headers
        user = scope.get("user")
        self.user = user if user is not None and getattr(user, "is_authenticated", False) else None
        # Who sent it (mcp_server.auth.Principal), set by the endpoint once authenticated.
        self.principal: Any = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name)
