"""The era lock of a connection that carries many requests (stdio): MOD-13, STDIO-03.

The first successful era-distinctive message locks the connection: ``initialize`` to the
handshake era, ``server/discover`` or an enveloped request to the 2026-07-28 one. A locked era
never changes; a message of the other era is refused with the code MOD-13 gives it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc, methods
from mcp_protocol.envelope import is_enveloped, parse_envelope
from mcp_protocol.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError

from .. import dispatch
from . import requests

if TYPE_CHECKING:
    from ..server import Server
    from ..session import ServerSession

LEGACY = "legacy"
MODERN = "modern"


class EraLock:
    """Which lifecycle a connection speaks: None until the first era-distinctive success."""

    def __init__(self) -> None:
        self.era: str | None = None

    def lock(self, era: str) -> None:
        if self.era is None:
            self.era = era


async def handle_json(server: Server, text: str | bytes, session: ServerSession,
                      lock: EraLock) -> str | None:
    """One line of a connection: a message or a batch, answered under the era lock."""
    try:
        payload = jsonrpc.decode(text)
    except jsonrpc.DecodeError as refused:
        return jsonrpc.encode(refused.response())
    if isinstance(payload, list):
        if not payload:
            answer: Any = jsonrpc.error_response(None, INVALID_REQUEST, "Invalid Request: empty batch")
        else:
            answers = await asyncio.gather(*(handle_message(server, m, session, lock) for m in payload))
            responses = [a for a in answers if a is not None]
            answer = None if not responses else responses[0] if len(responses) == 1 else responses
    else:
        answer = await handle_message(server, payload, session, lock)
    if answer is None:
        return None
    failures: list[tuple[BaseException, dict]] = []
    encoded = dispatch.encode_answer(server, answer, payload, failures)
    for exc, context in failures:
        await server.report_exception_async(exc, context)
    return encoded


async def handle_message(server: Server, message: Any, session: ServerSession,
                         lock: EraLock) -> dict | None:
    incoming = jsonrpc.classify(message)
    if incoming.kind != "request":
        return await dispatch.handle_message(server, message, session)
    method, request_id = incoming.method, incoming.id
    if is_enveloped(incoming.params):
        if lock.era == LEGACY:
            return jsonrpc.error_response(
                request_id, INVALID_REQUEST, "Invalid Request: this connection already negotiated "
                "the legacy lifecycle (initialize); requests must not carry the _meta envelope")
        try:
            envelope = parse_envelope(incoming.params)
        except MCPError as exc:
            return jsonrpc.error_from(request_id, exc)
        modern = requests.new_session(server, envelope, session.outbound, listen_supported=False,
                                      in_flight=session.in_flight)
        response = await requests.serve(server, message, modern)
        _lock_on_success(lock, MODERN, response)
        return response
    if lock.era == MODERN:
        if method == methods.INITIALIZE:
            return jsonrpc.error_response(
                request_id, METHOD_NOT_FOUND, "Method not found: this connection uses the "
                "2026-07-28 lifecycle, which has no initialize", method)
        return jsonrpc.error_response(
            request_id, INVALID_PARAMS, "Invalid params: this connection uses the 2026-07-28 "
            "lifecycle; every request needs the io.modelcontextprotocol/* _meta envelope")
    response = await dispatch.handle_message(server, message, session)
    if method == methods.INITIALIZE:
        _lock_on_success(lock, LEGACY, response)
    elif method == methods.SERVER_DISCOVER and lock.era is None:
        _lock_on_success(lock, MODERN, response)
    return response


def _lock_on_success(lock: EraLock, era: str, response: dict | None) -> None:
    if response is not None and "result" in response:
        lock.lock(era)
