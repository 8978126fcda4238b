"""One HTTP response written as Server-Sent Events."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_protocol import sse

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


class SSEResponse:
    """Writes events one at a time; after the client is gone every write returns False."""

    def __init__(self, send: Callable[[dict], Awaitable[Any]],
                 headers: list[tuple[bytes, bytes]] | None = None):
        self._send = send
        self._headers = SSE_HEADERS + list(headers or [])
        self._lock = asyncio.Lock()
        self.started = False
        self.closed = False

    async def _write(self, chunk: bytes, more: bool = True) -> bool:
        async with self._lock:
            if self.closed:
                return False
            try:
                if not self.started:
                    self.started = True
                    await self._send({"type": "http.response.start", "status": 200,
                                      "headers": self._headers})
                await self._send({"type": "http.response.body", "body": chunk, "more_body": more})
            except Exception:  # the connection is gone
                self.closed = True
                return False
            if not more:
                self.closed = True
            return True

    async def event(self, data: str, event_id: str | None = None,
                    retry_ms: int | None = None) -> bool:
        return await self._write(sse.event(data, event_id=event_id, retry_ms=retry_ms))

    async def comment(self, text: str) -> bool:
        return await self._write(sse.comment(text))

    async def finish(self) -> None:
        await self._write(b"", more=False)

    def disconnected(self) -> None:
        self.closed = True
