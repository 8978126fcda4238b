"""What the endpoint writes, as JSON text: a response JSON cannot carry (a result holding NaN or
an infinity, or an object the encoder refuses) is answered with -32603 for its request, its id
kept, and reported to the exception reporter; not answered 500 with no id, nor lost from a stream
that then ends unanswered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol import jsonrpc

from ..ports import awaited_sizes, note_encoded

if TYPE_CHECKING:
    from ..server import Server


def encode(server: Server, message: Any) -> str:
    """The JSON text of ``message``, or of what stands in for it (:func:`stand_in`)."""
    try:
        text = jsonrpc.encode(message)
    except (TypeError, ValueError) as exc:
        return jsonrpc.encode(stand_in(server, message, exc))
    if awaited_sizes:
        note_encoded(message, text)
    return text


def stand_in(server: Server, message: Any, exc: BaseException) -> dict:
    """The -32603 that answers in place of the response ``message``, which could not be encoded
    (``exc``, reported); ``exc`` again when ``message`` is no response (it is not sent)."""
    replacement = jsonrpc.in_place_of_unencodable(message)
    if replacement is None:
        raise exc
    server.report_exception(exc, {"response": {"id": replacement["id"]}})
    return replacement
