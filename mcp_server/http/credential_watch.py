"""Streams that must not outlive their credential.

A GET stream or a ``subscriptions/listen`` stream is authenticated once, when it opens, and may
then stay open for hours. One opened with a credential the resource server checked (a bearer
token, say) ends, cleanly, so that its client authenticates again and resumes:

- when the credential expires (``Principal.expires_at``: a token's ``exp``, the expiry of a
  token of the demo's authorization server), at that moment;
- when the credential is no longer accepted (revoked, its user deactivated): the request's
  credential is checked again, by the same authentication classes, every
  ``stream_credential_check_interval`` seconds (None: never; the stream then ends at its expiry
  alone). An introspected token's answer is kept up to ``INTROSPECTION["CACHE_SECONDS"]``, which
  adds to that delay; a JWT cannot be revoked before its ``exp``, so it ends there.

A check that cannot be made (the introspection endpoint or the database does not answer) keeps
the stream until the next one; the expiry still ends it. Streams of the Django session cookie
alone (no resource server) carry no expiry and are not watched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from .errors import HTTPError

if TYPE_CHECKING:
    from .request import Request
    from .transport import StreamableHTTPTransport

logger = logging.getLogger("mcp_server.http")


def refuse_if_expired(transport: StreamableHTTPTransport, request: Request, request_id: Any = None) -> None:
    """401 ``invalid_token`` for a stream whose credential has expired already (a JWT accepted
    within its clock-skew leeway, say): it would end as soon as it opened, and the client would
    open it again at once, over and over, instead of authenticating again."""
    principal = request.principal
    expires_at = getattr(principal, "expires_at", None)
    if transport.resource_server is not None and expires_at is not None and expires_at <= time.time():
        refused = transport.resource_server.refusal(request, 401, "invalid_token", "The access token expired")
        refused.request_id = request_id
        raise refused


# What a stream with nothing to watch runs in: shared, so that it holds nothing of its own for as
# long as it is open.
_UNWATCHED: contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()


def ending_when_credential_lapses(transport: StreamableHTTPTransport, request: Request,
                                  end: Callable[[], Any]) -> contextlib.AbstractAsyncContextManager[None]:
    """Run the block (a stream) and call ``end`` once the request's credential lapses meanwhile."""
    watch = CredentialWatch(transport, request)
    return _watching(watch, end) if watch.watches else _UNWATCHED


@contextlib.asynccontextmanager
async def _watching(watch: CredentialWatch, end: Callable[[], Any]) -> AsyncIterator[None]:
    request = watch.request
    watcher = asyncio.ensure_future(watch.until_lapsed())

    def lapsed(task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is None:
            logger.info("%s %s: a stream ends, as its credential %s", request.method, request.path,
                        task.result())
            end()

    watcher.add_done_callback(lapsed)
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


class CredentialWatch:
    """When a stream's credential lapses: at its expiry, or at a check that refuses it."""

    def __init__(self, transport: StreamableHTTPTransport, request: Request):
        self.resource_server = transport.resource_server
        self.request = request
        self.principal = request.principal
        self.interval = transport.options.stream_credential_check_interval
        self.expires_at: float | None = getattr(self.principal, "expires_at", None)

    @property
    def watches(self) -> bool:
        """Whether there is anything to watch: a credential checked by the resource server, with
        an expiry or checked again."""
        return self.resource_server is not None and self.principal is not None \
            and (self.expires_at is not None or self.interval is not None)

    async def until_lapsed(self) -> str:
        """Wait until the credential lapses; why it did."""
        while True:
            now = time.time()
            if self.expires_at is not None and self.expires_at <= now:
                return "expired"
            # One of the two is set (``watches``): the wait is finite.
            waits = [self.expires_at - now] if self.expires_at is not None else []
            if self.interval is not None:
                waits.append(self.interval)
            await asyncio.sleep(min(waits))
            if self.interval is not None and (self.expires_at is None or time.time() < self.expires_at) \
                    and not await self._still_accepted():
                return "is no longer accepted"

    async def _still_accepted(self) -> bool:
        """The request's credential checked again, as when it came; it may now say another expiry."""
        assert self.resource_server is not None
        try:
            principal = await self.resource_server.authenticate(self.request)
        except HTTPError as refused:
            # 503: it cannot be checked now, and the stream goes on (until its expiry at most).
            return refused.status == 503
        except Exception as exc:  # a store that failed (the database): the same, checked again later
            logger.warning("%s %s: the credential of a stream could not be checked: %s",
                           self.request.method, self.request.path, exc)
            return True
        if principal is None or not _same_holder(principal, self.principal):
            return False
        if principal.expires_at is not None:
            self.expires_at = principal.expires_at
        return True


def _same_holder(principal: Any, before: Any) -> bool:
    return (principal.user_id, principal.client_id, principal.subject) == \
        (before.user_id, before.client_id, before.subject)
