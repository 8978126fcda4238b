"""The client's side of ``subscriptions/listen`` (SEP-2575, 2026-07-28): list changes and resource
updates on a modern connection reach the same callbacks as on the handshake era's GET stream.

One listen stream at a time carries what the application asked for: the list flags of the
callbacks registered (``on_list_changed``, ``on_notification``) that the server declared, and the
URIs given to ``subscribe_resource``. When that changes, a new stream is opened and, once the
server acknowledged it, the old one is ended (a notification sent in between may come twice, never
not at all). A stream that drops, or that the server ends, is opened again after a bounded,
growing wait; ``max_retries`` drops in a row, each before the stream had proved itself, give up
with a :class:`ListenError` for ``on_subscription_error`` callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from mcp_protocol import methods
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.envelope import SUBSCRIPTION_ID_KEY
from mcp_protocol.errors import INTERNAL_ERROR
from mcp_protocol.subscriptions import LIST_FLAGS, RESOURCE_SUBSCRIPTIONS, declared

from .errors import ClientError, HTTPStatusError, ServerError
from .ports import ListenPort

logger = logging.getLogger("mcp_client")

DEFAULT_MAX_RETRIES = 6
DEFAULT_MAX_BACKOFF = 8.0
FIRST_BACKOFF = 0.5
# How long a stream must stay open (or deliver something) to count as held: its drop then starts
# a fresh series of retries rather than counting towards max_retries.
HELD_AFTER = 30.0
# How long subscribe_resource waits for the server to acknowledge the stream naming the URI.
ACKNOWLEDGE_TIMEOUT = 30.0


class ListenError(ClientError):
    """The listen stream could not be opened or kept open: the server refused it, or it dropped
    ``max_retries`` times in a row. ``attempts`` is how many times it was tried."""

    def __init__(self, message: str, attempts: int = 0):
        super().__init__(message)
        self.attempts = attempts


class _Superseded(Exception):
    """A stream ended before its acknowledgement (replaced, or the client closed)."""


class _Stream:
    """One wanted filter, held open across reconnections (each a new ``subscriptions/listen``
    request, so a new subscription id)."""

    def __init__(self, owner: Subscriptions, requested: dict):
        self.owner = owner
        self.requested = requested
        self.request_id: str | None = None
        self.honoured: dict | None = None  # the last acknowledgement's filter
        self.acknowledged = asyncio.get_running_loop().create_future()  # the first one
        self.ended = False
        self.heard_at = 0.0  # when the current request was acknowledged or last delivered
        self.delivered = False
        self.task = asyncio.get_running_loop().create_task(self._hold())

    async def _hold(self) -> None:
        owner, client = self.owner, self.owner.client
        failures, backoff = 0, FIRST_BACKOFF
        while not self.ended:
            self.request_id = f"listen-{uuid.uuid4().hex}"
            self.heard_at, self.delivered = 0.0, False
            owner.ids[self.request_id] = self
            params = {"notifications": self.requested}
            try:
                await client.request(methods.SUBSCRIPTIONS_LISTEN, params, request_id=self.request_id)
                reason: BaseException | str = "the server ended it"
            except Exception as exc:  # any end of the request is a drop to count
                reason = exc
            finally:
                owner.ids.pop(self.request_id, None)
            if self.ended:
                return
            held = self.heard_at and (self.delivered or time.monotonic() - self.heard_at >= HELD_AFTER)
            failures, backoff = (1, FIRST_BACKOFF) if held else (failures + 1, backoff)
            if failures > owner.max_retries or (self.honoured is None and _refused(reason)):
                self._give_up(reason, failures)
                return
            logger.info("the listen stream ended (%s); opening it again in %.1f s", reason, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, owner.max_backoff)

    def _give_up(self, reason: BaseException | str, attempts: int) -> None:
        error = ListenError(f"the listen stream (subscriptions/listen) could not be kept open: "
                            f"{reason} ({attempts} attempt{'s' if attempts != 1 else ''} in a row)",
                            attempts)
        self.ended = True
        if not self.acknowledged.done():
            self.acknowledged.set_exception(error)
            self.acknowledged.exception()  # retrieved: a waiter may have gone
        self.owner.failed(self, error)

    def acknowledge(self, honoured: dict) -> None:
        self.honoured = honoured
        self.heard_at = time.monotonic()
        if not self.acknowledged.done():
            self.acknowledged.set_result(honoured)

    def end(self) -> None:
        """Stop holding the stream: cancel its request and close it (HTTP) or tell the server
        (``notifications/cancelled``, stdio)."""
        self.ended = True
        if not self.acknowledged.done():
            self.acknowledged.set_exception(_Superseded())
            self.acknowledged.exception()  # retrieved: nobody may be waiting
        request_id, self.request_id = self.request_id, None
        self.task.cancel()
        if request_id is not None and request_id in self.owner.ids:
            self.owner.close_request(request_id)


class Subscriptions:
    """The listen stream of one :class:`~mcp_client.AsyncClient` in the 2026-07-28 era."""

    def __init__(self, client: ListenPort, *, max_retries: int = DEFAULT_MAX_RETRIES,
                 max_backoff: float = DEFAULT_MAX_BACKOFF):
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"listen_max_retries must be a non-negative integer, not {max_retries!r}")
        if isinstance(max_backoff, bool) or not isinstance(max_backoff, int | float) or max_backoff <= 0:
            raise ValueError(f"listen_max_backoff must be a positive number of seconds, not {max_backoff!r}")
        self.client = client
        self.max_retries = max_retries
        self.max_backoff = float(max_backoff)
        self.uris: list[str] = []
        self.ids: dict[str, _Stream] = {}  # open request id -> its stream
        self.active: _Stream | None = None  # the stream whose notifications are delivered
        self.pending: _Stream | None = None  # a stream opened for a new filter, not yet acknowledged
        self.error_callbacks: list[Callable] = []

    # What is wanted ------------------------------------------------------------------------------
    def wanted(self) -> dict:
        """The filter to ask for: what the application listens to and the server declared."""
        capabilities = self.client.server_capabilities
        requested: dict[str, Any] = {}
        for flag, (capability, feature, method) in LIST_FLAGS.items():
            if self.client.listens_to(method) and declared(capabilities, capability, feature):
                requested[flag] = True
        if self.uris and declared(capabilities, "resources", "subscribe"):
            requested[RESOURCE_SUBSCRIPTIONS] = list(self.uris)
        return requested

    @property
    def listening(self) -> dict | None:
        """The acknowledged filter of the stream in use, None when none is open."""
        return self.active.honoured if self.active is not None and not self.active.ended else None

    # Opening and ending --------------------------------------------------------------------------
    async def refresh(self, *, strict: bool = False) -> None:
        """Bring the stream in line with :meth:`wanted`: open one for a new filter and, once it
        is acknowledged, end the old one; end it when nothing is wanted. Waits (bounded) for the
        acknowledgement; ``strict`` raises when the stream cannot be opened, otherwise that is
        logged and its retries go on in the background."""
        requested = self.wanted()
        current = self.pending or self.active
        if current is not None and not current.ended and current.requested == requested:
            stream = current
        elif not requested:
            self.stop_streams()
            return
        else:
            if self.pending is not None:
                self.pending.end()
            stream = self.pending = _Stream(self, requested)
        try:
            while True:
                try:
                    await asyncio.wait_for(asyncio.shield(stream.acknowledged), ACKNOWLEDGE_TIMEOUT)
                    return
                except _Superseded:
                    # Replaced by a later filter (which holds this one's wishes too), or closed.
                    replacement = self.pending or self.active
                    if replacement is None or replacement is stream:
                        return
                    stream = replacement
        except (ClientError, TimeoutError) as exc:
            if strict:
                if isinstance(exc, TimeoutError):
                    raise ListenError(f"the server did not acknowledge the listen stream within "
                                      f"{ACKNOWLEDGE_TIMEOUT:g} s") from None
                raise
            logger.warning("the listen stream is not open yet: %s", exc)

    async def subscribe(self, uri: str, cancellation: Cancellation | None = None,
                        meta: dict | None = None) -> dict:
        """``subscribe_resource`` in the 2026-07-28 era: the URI joins the stream's filter; returns
        once the server acknowledged it (an empty result, as ``resources/subscribe`` gives)."""
        _no_meta(meta)
        if not declared(self.client.server_capabilities, "resources", "subscribe"):
            raise ClientError("the server does not support resource subscriptions "
                              "(its capabilities declare no resources.subscribe)")
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        if uri in self.uris:
            return {}
        self.uris.append(uri)
        try:
            await _cancellable(self.refresh(strict=True), cancellation)
            honoured = (self.active.honoured or {}) if self.active is not None else {}
            if uri not in honoured.get(RESOURCE_SUBSCRIPTIONS, ()):
                raise ListenError(f"the server did not acknowledge the subscription to {uri!r}: "
                                  f"it agreed to {honoured!r}")
        except BaseException:
            self.uris.remove(uri)
            with contextlib.suppress(ClientError):
                await self.refresh()
            raise
        return {}

    async def unsubscribe(self, uri: str, cancellation: Cancellation | None = None,
                          meta: dict | None = None) -> dict:
        _no_meta(meta)
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        if uri in self.uris:
            self.uris.remove(uri)
            await _cancellable(self.refresh(), cancellation)
        return {}

    def close_request(self, request_id: str) -> None:
        if not self.client.end_stream(request_id):
            # One channel for everything (stdio): the server is told which subscription ends.
            self.client.spawn(self._cancel(request_id))

    async def _cancel(self, request_id: str) -> None:
        with contextlib.suppress(ClientError):
            await self.client.notify(methods.NOTIFICATIONS_CANCELLED, {"requestId": request_id})

    def stop_streams(self) -> None:
        for stream in (self.pending, self.active):
            if stream is not None:
                stream.end()
        self.pending = self.active = None

    def stop(self) -> None:
        """End every stream and forget the subscriptions (``close()``): nothing is waited for, so
        a server that never ends a stream cannot hold ``close()`` up."""
        self.stop_streams()
        self.uris.clear()

    def failed(self, stream: _Stream, error: ListenError) -> None:
        logger.error("%s", error)
        if stream is self.pending:
            self.pending = None
        if stream is self.active:
            self.active = None
        for callback in list(self.error_callbacks):
            try:
                result = callback(error)
                if inspect.isawaitable(result):
                    self.client.spawn(result)
            except Exception:
                logger.exception("an on_subscription_error callback failed")

    # What arrives -------------------------------------------------------------------------------
    def received(self, message: dict) -> dict | None:
        """A notification on its way to the callbacks: the acknowledgement and the server's end of
        a subscription are taken here (None), a notification of a stream no longer in use is
        dropped (None), and one of the stream in use loses its subscription id, so that the
        callbacks see what they see in the handshake era."""
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if method == methods.NOTIFICATIONS_CANCELLED and params.get("requestId") in self.ids:
            # On stdio a server ends a subscription so (the stream is then opened again).
            self.client.fail_request(ListenError("the server cancelled the subscription"),
                                     params["requestId"])
            return None
        if SUBSCRIPTION_ID_KEY not in meta:
            return message
        stream = self.ids.get(meta[SUBSCRIPTION_ID_KEY])
        if method == methods.NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED:
            if stream is not None and not stream.ended:
                honoured = params.get("notifications")
                stream.acknowledge(honoured if isinstance(honoured, dict) else {})
                self._switch_to(stream)
            return None
        if stream is None or stream is not self.active or stream.ended:
            return None
        stream.delivered = True
        rest = {key: value for key, value in meta.items() if key != SUBSCRIPTION_ID_KEY}
        plain = {key: value for key, value in params.items() if key != "_meta"}
        if rest:
            plain["_meta"] = rest
        return {**message, "params": plain}

    def _switch_to(self, stream: _Stream) -> None:
        if stream is self.pending:
            previous, self.active, self.pending = self.active, stream, None
            if previous is not None and previous is not stream:
                previous.end()


def _no_meta(meta: dict | None) -> None:
    if meta:
        raise ValueError("meta= cannot be sent with a resource subscription in the 2026-07-28 era: "
                         "the URI joins the listen stream's filter, which carries no per-URI _meta")


async def _cancellable(waiting: Coroutine[Any, Any, None], cancellation: Cancellation | None) -> None:
    """Wait for ``waiting``; a cancel of ``cancellation`` (from any thread) raises CancelledError."""
    if cancellation is None:
        await waiting
        return
    loop = asyncio.get_running_loop()
    task = loop.create_task(waiting)
    unhook = cancellation.on_cancel(lambda token: loop.call_soon_threadsafe(task.cancel))
    try:
        await task
    except asyncio.CancelledError:
        if not cancellation.cancelled:
            raise
        raise CancelledError(None, cancellation.reason) from None
    finally:
        unhook()


def _refused(reason: BaseException | str) -> bool:
    """The server refused the listen request itself (a JSON-RPC error other than an internal one,
    an HTTP client error): asking again will not help."""
    if isinstance(reason, ServerError):
        return reason.code != INTERNAL_ERROR
    return isinstance(reason, HTTPStatusError) and 400 <= reason.status < 500 \
        and reason.status not in (408, 429)
