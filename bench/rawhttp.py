"""A small HTTP/1.1 client on asyncio streams, for the benchmark's drivers.

It does not use the MCP SDK (nor any HTTP library), so that the load it puts on the machine is
small and the same for both servers: keep-alive connections, Content-Length and chunked bodies.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

ACCEPT_BOTH = "application/json, text/event-stream"
PROTOCOL_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
# The per-request envelope of the 2026-07-28 lifecycle (SEP-2575): no session, no initialize.
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
               "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0"}}
INITIALIZE = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
               "clientInfo": {"name": "bench", "version": "1.0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_echo(request_id: int, message: str = "hello", *, modern: bool = False) -> dict:
    params: dict[str, Any] = {"name": "echo", "arguments": {"message": message}}
    if modern:
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def messages(self) -> list[Any]:
        """The JSON-RPC messages of a JSON body or of the ``data:`` lines of an SSE body."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            return [json.loads(line[5:]) for line in self.body.decode().splitlines()
                    if line.startswith("data:") and line[5:].strip()]
        return [json.loads(self.body)] if self.body else []


class Connection:
    """One keep-alive connection to ``host:port``; reconnects when the server closed it."""

    def __init__(self, host: str, port: int, path: str = "/mcp"):
        self.host, self.port, self.path = host, port, path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    def _head(self, method: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"{method} {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def request(self, method: str, headers: dict[str, str] | None = None,
                      body: bytes = b"") -> Response:
        if self.writer is None:
            await self.open()
        self.writer.write(self._head(method, headers or {}, body))
        status, response_headers = await self.read_head()
        data = await self._read_body(response_headers)
        if response_headers.get("connection", "").lower() == "close":
            self.close()
        return Response(status, response_headers, data)

    async def send_head(self, method: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Send a request and read only the head of the response (a stream stays open)."""
        if self.writer is None:
            await self.open()
        self.writer.write(self._head(method, headers, b""))
        return await self.read_head()

    async def read_head(self) -> tuple[int, dict[str, str]]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _read_body(self, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    return b"".join(chunks)
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        data = await self.reader.read()
        self.close()
        return data


def post_headers(session_id: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
        headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
    return headers


async def open_session(connection: Connection) -> str:
    """initialize + notifications/initialized; returns the session id."""
    answer = await connection.request("POST", post_headers(), json.dumps(INITIALIZE).encode())
    session_id = answer.headers.get("mcp-session-id")
    if answer.status != 200 or not session_id:
        raise RuntimeError(f"initialize failed: {answer.status} {answer.body[:200]!r}")
    note = await connection.request("POST", post_headers(session_id), json.dumps(INITIALIZED).encode())
    if note.status != 202:
        raise RuntimeError(f"notifications/initialized failed: {note.status} {note.body[:200]!r}")
    return session_id


async def echo(connection: Connection, session_id: str | None, request_id: int = 1, *,
               modern: bool = False) -> str:
    """One tools/call of echo; returns the echoed text (raises on anything else). ``modern``:
    a 2026-07-28 request (the envelope and the standard headers, no session)."""
    headers = post_headers(session_id)
    if modern:
        headers.update({"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call",
                        "Mcp-Name": "echo"})
    answer = await connection.request("POST", headers,
                                      json.dumps(call_echo(request_id, modern=modern)).encode())
    responses = [m for m in answer.messages() if isinstance(m, dict) and m.get("id") == request_id]
    if answer.status != 200 or not responses or "result" not in responses[0]:
        raise RuntimeError(f"tools/call failed: {answer.status} {answer.body[:300]!r}")
    return responses[0]["result"]["content"][0]["text"]


async def delete_session(connection: Connection, session_id: str) -> None:
    answer = await connection.request("DELETE", {"Mcp-Session-Id": session_id,
                                                 "MCP-Protocol-Version": PROTOCOL_VERSION})
    if answer.status != 200:
        raise RuntimeError(f"DELETE failed: {answer.status} {answer.body[:200]!r}")
