"""Fair share of background calls: whom a call counts against, what of it is stored, and whether
its principal may have one more in flight.

A background call holds a place in the workers' queue and a row in the database until it ends,
so one client must not take them all: at most ``MAX_BACKGROUND_CALLS_PER_PRINCIPAL`` calls of a
principal are queued or running at once (tasks included), counted on the ``ToolCall`` rows that
every process sees, and a call's record keeps only the arguments its tool declares, within
``MAX_BACKGROUND_CALL_BYTES``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from mcp_protocol.errors import InvalidParamsError

from ..errors import TooManyBackgroundCalls
from ..http.limits import token_key
from ..settings import mcp_settings
from ..telemetry import metrics
from . import records

if TYPE_CHECKING:
    from ..primitives.tool import Tool
    from ..session import ServerSession

# Seconds a refused client is told to wait: a background call runs for seconds at least, so one
# sooner would most likely be refused again.
RETRY_AFTER = 5
# Whom a call counts against where the transport knows no principal: stdio's one client, or
# code calling the server in process.
IN_PROCESS = "local"


def principal_key_of(session: ServerSession) -> str:
    """The session's principal as the fair-share limits count it: the transport's key (the Django
    user, else the token's client and subject, else the client address), else what the session
    says of its user and token."""
    if session.principal_key:
        return session.principal_key
    if session.user_id is not None:
        return f"user:{session.user_id}"
    if session.principal is not None:
        return token_key(session.principal)
    return IN_PROCESS


def _limit(name: str) -> int | None:
    value = getattr(mcp_settings, name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ImproperlyConfigured(f"MCP_SERVER[{name!r}] must be a positive integer or None, not {value!r}")
    return value


def calls_per_principal() -> int | None:
    return _limit("MAX_BACKGROUND_CALLS_PER_PRINCIPAL")


def stored_parts(tool: Tool, arguments: dict, params: Any) -> tuple[dict, dict]:
    """What a call's record keeps: the arguments its tool's input schema declares (others are
    dropped, and the tool never sees them), and the request's params without its arguments.
    Refused (-32602) when they take more than ``MAX_BACKGROUND_CALL_BYTES`` as stored."""
    kept = tool.input_schema.declared(arguments)
    others = {key: value for key, value in params.items() if key != "arguments"} \
        if isinstance(params, dict) else {}
    limit = _limit("MAX_BACKGROUND_CALL_BYTES")
    if limit is not None:
        size = _stored_bytes(kept) + _stored_bytes(others)
        if size > limit:
            raise InvalidParamsError(
                f"Invalid params: a background call's arguments and params may take at most {limit} "
                f"bytes as stored (MAX_BACKGROUND_CALL_BYTES); these take {size}",
                data={"maxBytes": limit, "bytes": size})
    return kept, others


def _stored_bytes(value: Any) -> int:
    # As the row keeps it (CompactJSONEncoder): no spaces, no \u escapes.
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


async def check_share(principal_key: str) -> None:
    """Raise :class:`TooManyBackgroundCalls` when the principal has its share in flight now."""
    limit = calls_per_principal()
    if limit is not None and await records.in_flight(principal_key) >= limit:
        metrics.refused("background_calls_per_principal", 429)
        raise TooManyBackgroundCalls(limit, RETRY_AFTER)


async def admit(**fields: Any) -> Any:
    """Store a new call (its ``ToolCall``) unless its principal has its share in flight then."""
    limit = calls_per_principal()
    call = await records.admit(limit, **fields)
    if call is None:
        assert limit is not None
        metrics.refused("background_calls_per_principal", 429)
        raise TooManyBackgroundCalls(limit, RETRY_AFTER)
    return call
