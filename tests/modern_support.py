"""Helpers of the 2026-07-28 tests: enveloped requests, and replies checked against the schema."""

from __future__ import annotations

import json
from typing import Any

import httpx

from .http_support import ASGIReply, call_asgi
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

MODERN = "2026-07-28"
CLIENT = {"name": "modern-test", "version": "1.0"}


def envelope(capabilities: dict | None = None, *, log_level: str | None = None,
             client_info: dict | None = CLIENT, version: str = MODERN) -> dict:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": version,
                            "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
    if client_info is not None:
        meta["io.modelcontextprotocol/clientInfo"] = client_info
    if log_level is not None:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    return meta


def modern_request(method: str, request_id: Any = 1, *, meta: dict | None = None,
                   **params: Any) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": meta if meta is not None else envelope()}}


NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


def modern_headers(message: dict | None = None, **extra: str) -> dict:
    """The headers a conforming client sends with ``message`` (SEP-2243)."""
    headers = {"host": "127.0.0.1", "content-type": "application/json",
               "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN}
    if message is not None and "method" in message:
        headers["mcp-method"] = message["method"]
        name_param = NAME_PARAMS.get(message["method"])
        if name_param is not None:
            headers["mcp-name"] = str(message["params"][name_param])
    headers.update(extra)
    return {k: v for k, v in headers.items() if v is not None}


class Reply:
    """One HTTP reply of the modern path: status, and the JSON-RPC messages, each checked."""

    def __init__(self, raw: ASGIReply, method: str | None):
        self.raw = raw
        self.status: int = raw.start["status"]
        self.content_type = (raw.header(b"content-type") or b"").decode()
        self.messages: list[dict] = []
        if self.content_type == "text/event-stream":
            self.messages = sse_messages(raw.body.decode())
        elif raw.body:
            self.messages.append(json.loads(raw.body))
        for message in self.messages:
            check_server_message(message, MODERN, method if "method" not in message else None)

    @property
    def response(self) -> dict:
        return self.messages[-1]

    @property
    def result(self) -> dict:
        assert "result" in self.response, self.response
        return self.response["result"]

    @property
    def error(self) -> dict:
        assert "error" in self.response, self.response
        return self.response["error"]

    @property
    def notifications(self) -> list[dict]:
        return [m for m in self.messages if "method" in m]


async def post(app: Any, message: Any, headers: dict | None = None, *, raw: bytes | None = None,
               method: str = "POST") -> Reply:
    """POST ``message`` with the headers of a conforming client (``headers`` on top of them)."""
    base = modern_headers(message if isinstance(message, dict) else None)
    merged = {**base, **(headers or {})}
    merged = {k: v for k, v in merged.items() if v is not None}
    body = raw if raw is not None else json.dumps(message).encode()
    reply = await call_asgi(app, method, merged, [body])
    return Reply(reply, message.get("method") if isinstance(message, dict) else None)


def sse_messages(text: str) -> list[dict]:
    """The JSON-RPC messages of an SSE body (data lines of each event; comments skipped)."""
    found, data = [], []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line == "":
            if data:
                found.append(json.loads("\n".join(data)))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        found.append(json.loads("\n".join(data)))
    return found


def post_over_http(url: str, method: str, request_id: Any = 1, meta: dict | None = None, *,
                   extra_headers: dict | None = None, **params: Any) -> tuple[int, list[dict]]:
    """One modern request to a running server: its status and every message of its response,
    the request and each message checked against the schema."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method,
               "params": {**params, "_meta": meta or envelope()}}
    check_client_message(message, MODERN)
    headers = {k: v for k, v in modern_headers(message).items() if k not in ("host", "content-type")}
    headers.update(extra_headers or {})
    response = httpx.post(url, json=message, headers=headers, timeout=PATIENCE)
    assert "mcp-session-id" not in response.headers
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = sse_messages(response.text)
    else:
        messages = [response.json()]
    for item in messages:
        check_server_message(item, MODERN, method if "method" not in item else None)
    return response.status_code, messages
