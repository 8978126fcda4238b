"""Fair share: what one client may hold at once, so that it cannot lock out the others.

Past a limit the client gets HTTP 429 with a JSON-RPC error body and a ``Retry-After``; the limits
themselves are options of the transport (``MCP_SERVER`` settings, docs/production.md, "Limits").
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from mcp_protocol.errors import INVALID_REQUEST, RATE_LIMITED

from ..telemetry import metrics
from .errors import HTTPError

if TYPE_CHECKING:
    from .request import Request
    from .shared_state import SharedState
    from .transport import StreamableHTTPTransport


TOO_MANY = "Too Many Requests: "


def too_many(message: str, retry_after: float) -> HTTPError:
    """429 Too Many Requests, saying when trying again may succeed."""
    seconds = max(1, math.ceil(retry_after))
    return HTTPError(429, f"{TOO_MANY}{message}", data={"retryAfter": seconds},
                     headers=[(b"retry-after", str(seconds).encode())])


def fair_share_headers(response: dict) -> list[tuple[bytes, bytes]] | None:
    """The ``Retry-After`` of a JSON-RPC response that is a fair-share refusal made below the
    transport (a background call past its principal's share: ``TooManyBackgroundCalls``; a rate
    limit of the middleware: ``RateLimitedError``), to send
    with 429 where the response is still undecided; None for any other response."""
    error = response.get("error")
    if not isinstance(error, dict) or error.get("code") not in (INVALID_REQUEST, RATE_LIMITED) \
            or not str(error.get("message", "")).startswith(TOO_MANY):
        return None
    data = error.get("data")
    seconds = data.get("retryAfter") if isinstance(data, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        return None
    return [(b"retry-after", str(seconds).encode())]


def check_progress_token(params: object, request_id: object, limit: int | None) -> None:
    """Refuse (400, -32600) a request whose progress token is longer than ``limit`` characters:
    every progress notification of a request carries (and stores) its token, so a long one would
    be copied into each of them."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if limit is not None and token is not None and not isinstance(token, bool) \
            and len(str(token)) > limit:
        raise HTTPError(400, f"Invalid Request: _meta.progressToken is longer than {limit} characters",
                        request_id=request_id)


def principal_of(request: Request) -> str:
    """Who a new session is counted against, and bound to: the Django user, else the OAuth client
    and subject of its token (see :func:`token_key`), else the client's address."""
    if request.user is not None:
        return f"user:{request.user.pk}"
    if request.principal is not None:
        return token_key(request.principal)
    client = request.client
    return f"address:{client[0] if client else ''}"[:255]


def token_key(principal: Any) -> str:
    """A principal with no user, as its OAuth client id and token subject (hashed: fixed length).

    A principal counted in a fair share of a group (``Principal.fair_share``) has the group's
    prefix before it, ``share:<group>/token:<own>``: its sessions are counted with the group's
    (:func:`counted_with`) and stay bound to the principal itself (the whole key)."""
    seen = f"{principal.client_id or ''}\x00{principal.subject or ''}\x00{principal.method}"
    own = "token:" + _digest(seen, 40)
    share = principal.fair_share
    return f"share:{_digest(share, 24)}/{own}" if share else own


def is_token_key(key: str) -> bool:
    """Whether ``key`` (a session's principal) names a principal with no user."""
    return key.startswith(("token:", "share:"))


def counted_with(key: str) -> dict[str, str]:
    """The lookup of the sessions counted in the same fair share as the principal ``key``."""
    if key.startswith("share:"):
        return {"principal__startswith": key.split("/", 1)[0] + "/"}
    return {"principal": key}


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


class StreamSlots:
    """At most ``limit`` streams of one owner open at once, in every process: the listening
    streams of a session, or the listen streams of a principal (each kind under its ``prefix``).

    Each open stream holds one of the owner's ``limit`` slots, a shared-state key with a time to
    live renewed while the stream lives: a process that dies holding one frees it when the key
    expires, with no count to repair. Taking a slot tries them in order (``limit`` is small).
    """

    def __init__(self, state: SharedState, limit: int | None, ttl: float, prefix: str = "slot"):
        self.state = state
        self.limit = limit
        self.ttl = ttl
        self.prefix = prefix

    def _key(self, owner: str, slot: int) -> str:
        return f"{self.prefix}:{owner}:{slot}"

    async def take(self, owner: str, token: str) -> int | None:
        """The slot now held with ``token`` (-1 without a limit), or None when all are taken."""
        if self.limit is None:
            return -1
        for slot in range(self.limit):
            if await self.state.add(self._key(owner, slot), token, self.ttl):
                return slot
        return None

    async def renew(self, owner: str, slot: int, token: str) -> None:
        if slot >= 0:
            await self.state.set(self._key(owner, slot), token, self.ttl)

    async def give_back(self, owner: str, slot: int, token: str) -> None:
        if slot >= 0:
            await self.state.delete(self._key(owner, slot), expected=token)


def check_limits(**limits: int | None) -> None:
    """Each limit is a positive integer, or None for no limit."""
    for name, value in limits.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ValueError(f"{name} must be a positive integer or None, not {value!r}")


async def admit_principal(transport: StreamableHTTPTransport, principal: str, session_id: str,
                          count: int | None, request_id: object) -> None:
    """A new session was stored, and its principal now has ``count`` (its counter, moved as the
    session was stored, so sessions made at the same time on other processes are seen): past the
    limit, expired sessions go first, and if the database still counts too many, this one is
    removed and refused."""
    limit = transport.options.max_sessions_per_principal
    if limit is None or count is None or count <= limit:
        return
    await transport.reap()
    if await transport.sessions.count_principal(principal) > limit:
        await transport.sessions.delete(session_id, ended=False)
        metrics.refused("sessions_per_principal", 429)
        raise _too_many_sessions(transport, request_id)


def _too_many_sessions(transport: StreamableHTTPTransport, request_id: object) -> HTTPError:
    error = too_many(f"{transport.options.max_sessions_per_principal} sessions are open for this client, the "
                     "most allowed; end one (DELETE) or let one expire", transport.reap_interval)
    error.request_id = request_id
    return error
