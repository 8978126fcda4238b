"""JSON-RPC and MCP error codes, and the exception that carries one onto the wire."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Not allocated by the specification; the same value the official Python SDK uses.
REQUEST_TIMEOUT = -32001
HEADER_MISMATCH = -32020  # SEP-2243
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021  # SEP-2575
UNSUPPORTED_PROTOCOL_VERSION = -32022  # SEP-2575
URL_ELICITATION_REQUIRED = -32042  # SEP-1036
# Not allocated by the specification, which names no code for a rate limit: ours, in the
# implementation-defined server-error range, with ``data.retryAfter`` (seconds); HTTP 429 with it.
RATE_LIMITED = -32029
USER_REJECTED = -1  # a user declined a sampling request


class MCPError(Exception):
    """An error that is sent to the peer as a JSON-RPC error object, exactly as given.

    Raise it (or a subclass) from a handler to answer with a specific code, message and data.
    """

    code: int = INTERNAL_ERROR
    default_message: str = "Internal error"

    def __init__(self, message: str | None = None, *, code: int | None = None, data: Any = None):
        self.message = message if message is not None else self.default_message
        if code is not None:
            self.code = code
        self.data = data
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(MCPError):
    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequestError(MCPError):
    code = INVALID_REQUEST
    default_message = "Invalid Request"


class MethodNotFoundError(MCPError):
    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParamsError(MCPError):
    code = INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(MCPError):
    code = INTERNAL_ERROR
    default_message = "Internal error"


class RequestTimeoutError(MCPError):
    """A request to the peer got no answer in time."""

    code = REQUEST_TIMEOUT
    default_message = "Request timed out"


class URLElicitationRequiredError(MCPError):
    """The request needs the user to complete one or more URL-mode elicitations first."""

    code = URL_ELICITATION_REQUIRED
    default_message = "URL elicitation required"

    def __init__(self, elicitations: list[dict[str, Any]], message: str | None = None):
        for elicitation in elicitations:
            missing = {"mode", "elicitationId", "url", "message"} - set(elicitation)
            if missing or elicitation.get("mode") != "url":
                raise ValueError(
                    "each elicitation needs mode='url', elicitationId, url and message; "
                    f"missing or wrong: {sorted(missing) or ['mode']}"
                )
        self.elicitations = list(elicitations)
        super().__init__(message, data={"elicitations": self.elicitations})
