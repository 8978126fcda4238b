"""Exceptions raised by server code and the JSON-RPC errors they become."""

from __future__ import annotations

import math
from typing import Any

from mcp_protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RATE_LIMITED,
    InvalidParamsError,
    MCPError,
    MethodNotFoundError,
    RequestTimeoutError,
    URLElicitationRequiredError,
)

__all__ = [
    "ClientCapabilityError",
    "MCPError",
    "MethodAlreadyDefinedError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ResourceNotFoundError",
    "SchemaValidationError",
    "URLElicitationRequiredError",
    "ValidationError",
]

# What a request that needed the database gets while it does not answer (a restart, a failover):
# the HTTP transport's 503 says the same, and on a response stream already open, its JSON-RPC error.
DATABASE_UNAVAILABLE = "Service Unavailable: the database does not answer; try again later"


class ResourceNotFoundError(InvalidParamsError):
    """A ``resources/read`` for a URI nobody serves: -32602 carrying the URI (SEP-2164)."""

    def __init__(self, uri: str, params: Any = None):
        self.uri = uri
        self.params = params
        super().__init__(f"Resource not found: {uri}", data={"uri": uri})


class MethodAlreadyDefinedError(ValueError):
    """A custom method would replace a built-in or already defined method."""

    def __init__(self, method_name: str):
        self.method_name = method_name
        super().__init__(f"Method {method_name!r} is already defined")


class MissingCapabilityError(MethodNotFoundError):
    """An incoming method whose capability the server did not declare."""

    def __init__(self, method: str, capability: str):
        super().__init__(
            f"Method not found: {method} (server capability {capability!r} is not declared)",
            data={"method": method, "missingCapability": capability},
        )


class ClientCapabilityError(MCPError):
    """A server-to-client request the client did not declare it can answer."""

    def __init__(self, method: str, capability: str, protocol_version: str | None = None):
        self.method = method
        self.capability = capability
        # Set when the negotiated revision predates the capability, whatever the client declared.
        self.protocol_version = protocol_version
        missing = "which the client did not declare" if protocol_version is None else \
            f"which protocol revision {protocol_version} does not have"
        super().__init__(f"{method} needs the client capability {capability!r}, {missing}",
                         code=INTERNAL_ERROR)


class ValidationError(ValueError):
    """A peer's answer that does not have the shape the protocol requires."""


class SchemaValidationError(ValueError):
    """Data that does not conform to a tool's output schema."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


def invalid_params(message: str, data: Any = None) -> MCPError:
    return MCPError(message, code=INVALID_PARAMS, data=data)


class TooManyBackgroundCalls(MCPError):
    """A principal has its share of background calls in flight (``MAX_BACKGROUND_CALLS_PER_PRINCIPAL``):
    -32600 with ``data.retryAfter``, the body of the HTTP endpoint's 429 (which sends it before
    anything runs) and the error of a call refused anywhere else."""

    def __init__(self, limit: int, retry_after: int):
        self.limit = limit
        self.retry_after = retry_after
        super().__init__(f"Too Many Requests: {limit} background calls of this client are queued or "
                         "running, the most allowed; wait for one to end, or cancel one",
                         code=INVALID_REQUEST, data={"retryAfter": retry_after})


class RateLimitedError(MCPError):
    """A call past a rate limit (``mcp_server.middleware.RateLimitMiddleware``): -32029, our code
    (the specification names none), with ``data.retryAfter`` in whole seconds; over HTTP, 429 and
    ``Retry-After`` where the response's status is still undecided."""

    def __init__(self, what: str, retry_after: float):
        self.retry_after = seconds = max(1, math.ceil(retry_after))
        super().__init__(f"Too Many Requests: the rate limit of {what} is reached; try again in {seconds} s",
                         code=RATE_LIMITED, data={"retryAfter": seconds})


class AnsweredElsewhere(Exception):
    """Raised by a handler whose response went out by another way (a background call's worker
    wrote it on the request's stream), or which, cancelled there, has none: the dispatcher sends
    nothing more for the request."""
