"""Who calls an exposed tool, and the tool errors that refuse a call.

A refusal the caller can act on (a permission it lacks, a budget spent, a query that took too
long) is a tool error (``isError: true``): the model reads it and may try otherwise. Arguments
that name what the tool does not offer are JSON-RPC -32602 instead
(:func:`mcp_server.errors.invalid_params`), as for any malformed call.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol.content import Text

from ..primitives.tool_response import ToolResponse


class Refused(Exception):
    """A call this tool will not serve; its message is the tool error the client reads."""


def refusal(exc: Refused) -> ToolResponse:
    return ToolResponse([Text(str(exc))], error=True)


def user_of(server_context: Any) -> Any:
    """The Django user behind the request (its principal's ``user``), active; else Refused."""
    principal = getattr(server_context, "principal", None) if server_context is not None else None
    user = getattr(principal, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        raise Refused("This tool acts for a signed-in Django user, and this request has none "
                      "(authenticate the MCP endpoint with a session, or a token that names a user).")
    if not user.is_active:
        raise Refused(f"The user {user.get_username()!r} is inactive.")
    return user
