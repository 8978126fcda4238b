"""A call refused for its scopes before anything runs: the step-up challenge of the HTTP endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry.guard import USES, InsufficientScopeError, usable, used_by

if TYPE_CHECKING:
    from .request import Request
    from .transport import StreamableHTTPTransport


async def check_call_scopes(transport: StreamableHTTPTransport, request: Request, incoming: Any) -> None:
    """Over HTTP, before anything runs: a call the principal lacks scopes for gets 403
    ``insufficient_scope`` with the scopes it needs (a step-up challenge)."""
    if incoming.method not in USES:
        return
    server = transport.server
    user_id = request.user.pk if request.user is not None else None
    used = used_by(await server.registry_for(user_id), incoming.method, incoming.params)
    if used is None:
        return
    kind, key, primitive = used
    try:
        await usable(server, primitive, kind, key, request.principal, user_id)
    except InsufficientScopeError as refused:
        challenges = transport.challenges
        error = challenges.insufficient_scope(request, set(refused.scopes) | challenges.required_scopes)
        error.request_id = incoming.id
        raise error from None
