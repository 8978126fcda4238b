"""What an authentication class of the endpoint is, and what it hands on.

An authentication class is named in ``MCP_SERVER["AUTHENTICATION_CLASSES"]`` by import string, as
in DRF's ``DEFAULT_AUTHENTICATION_CLASSES``. The endpoint tries them in order: the first that
returns a :class:`Principal` wins; ``None`` means "no credential of my kind here"; raising
:class:`AuthenticationFailed` refuses the request (401, or 403 for ``insufficient_scope``).
``authenticate`` may be ``async def`` (awaited on the event loop) or a plain function (run on a
worker thread, so it may use the ORM).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..http.request import Request


@dataclass(frozen=True)
class Principal:
    """Who sent a request: the Django user (if any), the token's scopes and OAuth client."""

    user: Any = None                     # a Django user, or None for a client acting for itself
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    # When the credential stops being valid (seconds since the epoch), None if it does not say.
    expires_at: float | None = None
    # Claims of a JWT, or the fields of an introspection answer, as the class read them.
    claims: Mapping[str, Any] = field(default_factory=dict)
    # The class that authenticated the request, for logs and instrumentation ("jwt", "session").
    method: str = ""
    # For a principal with no user: the group whose fair share (MAX_SESSIONS_PER_PRINCIPAL) it is
    # counted in, when it is not its own, as an authentication class decides (the clients
    # registered from one address, say); the session stays bound to the principal itself.
    fair_share: str | None = None

    @property
    def user_id(self) -> Any:
        return getattr(self.user, "pk", None) if self.user is not None else None

    @property
    def subject(self) -> str | None:
        """The token's ``sub``, when the class read one."""
        sub = self.claims.get("sub")
        return sub if isinstance(sub, str) else None

    def has_scopes(self, required: frozenset[str] | set[str] | list[str] | tuple[str, ...]) -> bool:
        return set(required) <= self.scopes

    def to_record(self) -> dict[str, Any]:
        """What a background call keeps of it (JSON): not the user (the call's ``owner`` is) and,
        of the claims, only the subject; a token's other claims may say more than a row should."""
        return {"scopes": sorted(self.scopes), "client_id": self.client_id, "expires_at": self.expires_at,
                "subject": self.subject, "method": self.method}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], user: Any = None) -> Principal:
        """The principal :meth:`to_record` kept, acting for ``user``."""
        subject = record.get("subject")
        return cls(user=user, scopes=frozenset(record.get("scopes") or ()), client_id=record.get("client_id"),
                   expires_at=record.get("expires_at"), claims={"sub": subject} if subject else {},
                   method=record.get("method") or "")


class AuthenticationFailed(Exception):  # DRF's name, which users know
    """A credential was sent and is not good: the request is refused with a Bearer challenge.

    ``error`` is the RFC 6750 code (``invalid_token``, ``insufficient_scope``, ``invalid_request``);
    ``description`` goes into the challenge's ``error_description`` and must tell nothing an
    attacker could use (not which of signature, audience or expiry failed, say).
    """

    def __init__(self, error: str = "invalid_token", description: str = "The access token is not valid",
                 *, scopes: frozenset[str] | None = None):
        super().__init__(description)
        self.error = error
        self.description = description
        self.scopes = scopes  # for insufficient_scope: the scopes the request needs


class AuthenticationUnavailable(Exception):
    """The credential cannot be checked now (the JWKS or introspection endpoint does not answer):
    the request gets 503 with Retry-After, not a challenge that would send the client to log in."""


class BaseAuthentication:
    """Subclass and implement ``authenticate`` (sync or async)."""

    def authenticate(self, request: Request) -> Principal | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def authenticate_header(self, request: Request) -> str | None:
        """The ``WWW-Authenticate`` scheme this class asks for when no credential was sent."""
        return None
