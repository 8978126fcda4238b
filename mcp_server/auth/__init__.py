"""Authentication of the MCP endpoint: classes named in settings, and the principal they find."""

from .base import AuthenticationFailed, BaseAuthentication, Principal

__all__ = ["AuthenticationFailed", "BaseAuthentication", "Principal"]
