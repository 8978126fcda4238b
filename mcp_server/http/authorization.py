"""Which session a request names, and whether its sender may use it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..invoke import call_user_code
from .errors import HTTPError
from .limits import is_token_key, token_key
from .request import Request
from .session_store import SessionRecord

if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport


def session_id_of(request: Request) -> str:
    """The session a request names; 400 when it names none."""
    session_id = request.header("mcp-session-id")
    if not session_id:
        raise HTTPError(400, "Bad Request: Missing session ID (the Mcp-Session-Id header)")
    return session_id


def session_not_found() -> HTTPError:
    return HTTPError(404, "Session not found")


async def session_of(transport: StreamableHTTPTransport, request: Request) -> SessionRecord:
    record = await transport.sessions.load(session_id_of(request))
    if record is None:
        raise session_not_found()
    return record


async def authorize(transport: StreamableHTTPTransport, request: Request,
                    record: SessionRecord) -> None:
    """A session belongs to the principal who opened it (its user; without one, its token's client
    and subject), keeps its Origin, and passes the validator."""
    check_owner(request, record)
    if transport.options.session_request_validator is not None:
        await check_validator(transport, request, record)


def check_owner(request: Request, record: SessionRecord) -> None:
    """:func:`authorize` but the validator: the session's principal and Origin."""
    if record.owner_id is not None and (request.user is None or request.user.pk != record.owner_id):
        raise HTTPError(403, "Forbidden: this session belongs to another user")
    if is_token_key(record.principal) and (
            request.user is not None or request.principal is None
            or token_key(request.principal) != record.principal):
        raise HTTPError(403, "Forbidden: this session belongs to another client")
    origin = request.header("origin")
    if record.origin and origin and origin != record.origin:
        raise HTTPError(403, "Forbidden: the Origin differs from the one that opened the session")


async def check_validator(transport: StreamableHTTPTransport, request: Request,
                          record: SessionRecord) -> None:
    """The session request validator's word (configured: ``session_request_validator``)."""
    # A plain function runs on a worker thread, so it may use the ORM; async def is awaited.
    allowed = await call_user_code(transport.options.session_request_validator, request, record.id)
    if not allowed:
        raise HTTPError(403, "Forbidden: the session request validator refused this request")
