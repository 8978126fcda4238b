"""Authentication of the MCP endpoint: classes named in settings, and the principal they find.

Classes are imported lazily (``mcp_server.auth.JWTAuthentication`` loads PyJWT on first use), so
a project with the default session authentication never imports what it does not use.
"""

from typing import Any

from .base import AuthenticationFailed, AuthenticationUnavailable, BaseAuthentication, Principal

_LAZY = {
    "SessionAuthentication": ".cookie",
    "JWTAuthentication": ".jwt_tokens",
    "IntrospectionAuthentication": ".introspection",
    "DRFAuthentication": ".drf",
    "ResourceServer": ".resource_server",
}

__all__ = ["AuthenticationFailed", "AuthenticationUnavailable", "BaseAuthentication", "Principal",
           *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module, __name__), name)
