"""``DRFAuthentication``: a Django REST framework authentication class, used as it is.

A DRF class named in ``AUTHENTICATION_CLASSES`` is wrapped in this automatically. Its
``authenticate(request)`` gets a DRF ``Request`` over a Django ``HttpRequest`` built from the ASGI
scope (headers, path, client; no body: the endpoint's body is JSON-RPC, not a form), and runs on a
worker thread, so its ORM queries work. DRF's ``AuthenticationFailed`` becomes a 401 challenge.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from .base import AuthenticationFailed, BaseAuthentication, Principal

if TYPE_CHECKING:
    from ..http.request import Request


class DRFAuthentication(BaseAuthentication):
    method = "drf"

    def __init__(self, backend: Any):
        """``backend``: a DRF authentication class (or an instance of one)."""
        self.backend = backend() if isinstance(backend, type) else backend

    def authenticate(self, request: Request) -> Principal | None:
        from django.contrib.auth.models import AnonymousUser
        from django.core.handlers.asgi import ASGIRequest
        from rest_framework import exceptions
        from rest_framework.request import Request as DRFRequest

        scope = {"path": request.path, "root_path": "", "query_string": b"", **request.scope}
        http_request = ASGIRequest(scope, io.BytesIO())
        # What Django's middleware would have set (DRF's SessionAuthentication reads it).
        http_request.user = request.user or AnonymousUser()
        drf_request = DRFRequest(http_request, authenticators=[self.backend])
        try:
            found = self.backend.authenticate(drf_request)
        except (exceptions.AuthenticationFailed, exceptions.PermissionDenied):
            # PermissionDenied: DRF's SessionAuthentication refusing a request without a CSRF token.
            raise AuthenticationFailed() from None
        if found is None:
            return None
        user, auth = found
        if user is not None and not getattr(user, "is_authenticated", False):
            user = None
        return Principal(user=user, scopes=_scopes_of(auth), client_id=_client_id_of(auth),
                         method=f"{self.method}:{type(self.backend).__name__}")

    def authenticate_header(self, request: Request) -> str | None:
        """The DRF class's own challenge (``Token``, ``Basic realm="api"``), when it has one."""
        header = getattr(self.backend, "authenticate_header", None)
        try:
            return header(None) if header is not None else None
        except Exception:  # a class whose challenge needs the DRF request: it has none here
            return None


def _scopes_of(auth: Any) -> frozenset[str]:
    """The scopes of an OAuth token object (django-oauth-toolkit's ``AccessToken.scope``)."""
    scope = getattr(auth, "scope", None)
    return frozenset(scope.split()) if isinstance(scope, str) else frozenset()


def _client_id_of(auth: Any) -> str | None:
    client_id = getattr(getattr(auth, "application", None), "client_id", None)
    return client_id if isinstance(client_id, str) else None
