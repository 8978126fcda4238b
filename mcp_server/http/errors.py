"""HTTP failures, each answered with a status and a JSON-RPC error body."""

from __future__ import annotations

import math
from typing import Any

from mcp_protocol import jsonrpc
from mcp_protocol.errors import INTERNAL_ERROR, INVALID_REQUEST


class HTTPError(Exception):
    def __init__(self, status: int, message: str, *, code: int = INVALID_REQUEST,
                 data: Any = None, headers: list[tuple[bytes, bytes]] | None = None,
                 request_id: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.data = data
        self.headers = headers or []
        self.request_id = request_id

    def body(self) -> bytes:
        error = jsonrpc.error_response(self.request_id, self.code, self.message, self.data)
        return jsonrpc.encode(error).encode("utf-8")


def internal_error() -> HTTPError:
    return HTTPError(500, "Internal server error", code=INTERNAL_ERROR)


def unavailable(retry_after: float, store: str = "the shared state", request_id: Any = None) -> HTTPError:
    """503: a store every process shares (Redis, the database) does not answer."""
    return HTTPError(503, f"Service Unavailable: {store} does not answer; try again later",
                     code=INTERNAL_ERROR, headers=[(b"retry-after", b"%d" % max(1, math.ceil(retry_after)))],
                     request_id=request_id)
