"""What can go wrong on the client side, each as its own exception class."""

from __future__ import annotations

from typing import Any

from mcp_protocol.cancellation import CancelledError

__all__ = [
    "AlreadyConnectedError",
    "BadRequestError",
    "CancelledError",
    "ClientError",
    "ConnectionClosedError",
    "ForbiddenError",
    "NotConnectedError",
    "NotFoundError",
    "PaginationLimitError",
    "ServerError",
    "ServerRequestError",
    "SessionExpiredError",
    "TransportError",
    "UnauthorizedError",
    "ValidationError",
]


class ClientError(Exception):
    """Base class of the client's own errors."""


class ServerError(ClientError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, message: str, code: int, data: Any = None):
        super().__init__(f"{message} (code {code})")
        self.message = message
        self.code = code
        self.data = data


class ValidationError(ClientError):
    """The server's answer does not have the shape the protocol (or the tool's schema) requires."""


class TransportError(ClientError):
    """The bytes did not get there, or came back unreadable: timeouts, bad framing, oversize."""


class ConnectionClosedError(TransportError):
    """The server went away (its process exited, or the connection closed) mid-conversation."""


class NotConnectedError(ClientError):
    """A request was made before ``connect()``."""


class AlreadyConnectedError(ClientError):
    """``connect()`` was called again, asking for another connection than the one the client has
    (another ``mode``, say): ``close()`` first, or give the mode to the constructor."""


class PaginationLimitError(ClientError):
    """A server kept offering new cursors past ``max_pages``."""


class ServerRequestError(Exception):
    """Raise from an ``on_sampling`` / ``on_elicitation`` handler to answer with this error.

    ``code=-1`` is the specification's "user rejected" for sampling.
    """

    def __init__(self, message: str, code: int = -32603, data: Any = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data


class HTTPStatusError(TransportError):
    def __init__(self, status: int, message: str, body: str = ""):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


class BadRequestError(HTTPStatusError):
    pass


class UnauthorizedError(HTTPStatusError):
    pass


class ForbiddenError(HTTPStatusError):
    pass


class NotFoundError(HTTPStatusError):
    pass


class SessionExpiredError(NotFoundError):
    """HTTP 404 for the session the client held: it expired or was deleted; connect again."""


class UnprocessableError(HTTPStatusError):
    pass
