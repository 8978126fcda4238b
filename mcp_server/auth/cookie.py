"""``SessionAuthentication``: the Django session cookie's user (Django's session, not an MCP one), the
endpoint's default.

Mounted inside :func:`mcp_server.asgi.session_auth` (as the demo project does), the user is
already in ``scope["user"]``, resolved only for requests that carry the cookie. Mounted without
it, the cookie is read here, on a worker thread (the session store and the user are queries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..invoke import run_in_thread
from .base import BaseAuthentication, Principal

if TYPE_CHECKING:
    from ..http.request import Request


class SessionAuthentication(BaseAuthentication):
    method = "session"

    async def authenticate(self, request: Request) -> Principal | None:
        user = request.user
        if user is None and "user" not in request.scope:
            session_key = _session_key(request.header("cookie"))
            if session_key:
                user = await run_in_thread(_user_of_session, session_key)
        return Principal(user=user, method=self.method) if user is not None else None


def _session_key(cookie: str | None) -> str | None:
    if not cookie:
        return None
    from django.conf import settings
    from django.http.cookie import parse_cookie

    return parse_cookie(cookie).get(settings.SESSION_COOKIE_NAME)


class _SessionHolder:
    """What ``django.contrib.auth.get_user`` reads of a request: its session."""

    def __init__(self, session: Any):
        self.session = session


def _user_of_session(session_key: str) -> Any:
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import get_user

    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(_SessionHolder(store))
    return user if getattr(user, "is_authenticated", False) else None
