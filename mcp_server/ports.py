"""The small interfaces through which lower floors reach what upper floors implement.

The engine (sessions, handlers, dispatch) and the transports never import background calls or an
extension: they call the ports below. What implements a port is registered once per process by
the composition root (``site.install``, run by the app's ``ready()``); a port with nothing
registered is simply absent (:func:`implementation` returns None), and its callers say what that
means for them. ``docs/architecture.md`` draws the floors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from mcp_protocol.envelope import Envelope

    from .context import ServerContext
    from .http.transport import StreamableHTTPTransport
    from .primitives.tool import Tool

Port = TypeVar("Port")


class Outbound(Protocol):
    """Where a session's outgoing messages go; each transport supplies one.

    ``related_request_id`` names the client request a message belongs to (SEP-2260), so that a
    transport with several streams can put it on that request's stream.
    """

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool: ...


class NotificationRoute(Protocol):
    """A transport as ``Server.notify_*`` sees it: it carries server-wide notifications.

    Transports whose ``broadcast_group`` is the same reach the same clients (one is used); None
    (or no such attribute) means a transport of its own.
    """

    def broadcast(self, message: dict, *, level: str | None = None) -> bool: ...

    def notify_resource_updated(self, uri: str) -> bool: ...


class BackgroundCalls(Protocol):
    """Tools marked ``background=True``, as the engine and the Streamable HTTP transport reach
    them (``mcp_server.background`` implements it). Absent, a background tool cannot be called."""

    async def call(self, ctx: ServerContext, tool: Tool, arguments: dict) -> Any:
        """Run a call of ``tool`` whose arguments were checked: its result (or the task that
        stands for it); raises as the call ends."""
        ...

    async def cancel_request(self, transport: StreamableHTTPTransport, session_id: str,
                             request_key: str) -> None:
        """A session's ``notifications/cancelled`` for one of its requests: the background
        call it started, if any, is cancelled wherever it runs."""
        ...

    async def settle_stopped_request(self, transport: StreamableHTTPTransport, session_id: str,
                                     request_id: Any) -> bool:
        """The process serving a request died: whether its client gets an error for it now
        (False when a worker answers it, or it runs again)."""
        ...

    async def ended_cancelled(self, session_id: str, request_id: Any) -> bool:
        """Whether the request was a background call that ended cancelled (it has no response)."""
        ...

    async def check_share(self, principal_key: str) -> None:
        """Raise :class:`~mcp_server.errors.TooManyBackgroundCalls` when ``principal_key`` has
        its share of background calls in flight: the HTTP endpoint's answer (429) before anything
        runs. A count, not a reservation: the call is admitted again when its record is made."""
        ...


class ListenTaskFilter(Protocol):
    """The ``taskIds`` of a ``subscriptions/listen`` filter, as the Tasks extension honours them."""

    async def visible_task_ids(self, task_ids: list[str], envelope: Envelope, principal: Any) -> list[str]:
        """The ids whose tasks the caller may see; raises -32021 when the request does not
        declare the extension."""
        ...


class RegistryContributor(Protocol):
    """What an extension adds to the default server's registry (the Skills extension's files):
    :meth:`server_built` registers what code would (it runs each time the default server is
    built), :meth:`stored_entries` what administrators defined, read into each registry snapshot
    (``registry/overlay.py``) on a worker thread."""

    def server_built(self, server: Any) -> None:
        """The default server was just built: register onto it."""
        ...

    def stored_entries(self, server: Any) -> dict[str, dict[str, tuple[Any, Any]]]:
        """kind (``"resources"``) -> key -> (primitive, the admin row whose restrictions apply)."""
        ...


class RequestObserver(Protocol):
    """Sees every request the dispatcher serves, in either era and on any transport: telemetry and
    the audit trail implement it. Both methods run in the task that runs the handler, so a context
    variable set by :meth:`request_started` is seen by the handler and is gone after it. Observers
    nest: they start in the order they were added and finish in the reverse order, so one added
    after the telemetry's sees its span current in both methods.

    An observer that watches notifications too has a ``notification_started(session, method,
    params)`` method (optional): it returns a function of no arguments, called once the
    notification was handled."""

    def request_started(self, ctx: ServerContext) -> Any:
        """The handler is about to run; the value returned comes back to :meth:`request_finished`."""
        ...

    def request_finished(self, state: Any, ctx: ServerContext, response: dict | None,
                         error: BaseException | None, duration: float) -> None:
        """The handler ended: ``response`` is what the client gets (None when it gets nothing:
        cancelled, or answered elsewhere), ``error`` what the handler raised, ``duration`` seconds.
        Must not raise, and must not wait for I/O: queue it."""
        ...


class TokenBuckets(Protocol):
    """Token buckets every process shares (the rate-limit middleware's): Redis, or Django's cache.
    The composition root registers the one the settings choose (``RATE_LIMIT_STORE``)."""

    async def take(self, buckets: list[tuple[str, int, float]]) -> float:
        """Take one token from each bucket ``(key, capacity, period)`` (refilled at ``capacity``
        tokens per ``period`` seconds), all or none, atomically: 0.0 when taken, else the seconds
        until every one of them has a token again."""
        ...


_implementations: dict[type, Any] = {}
_observers: list[RequestObserver] = []


def register(port: type[Port], implementation: Port) -> None:
    """Make ``implementation`` what answers ``port`` in this process (the last one wins)."""
    _implementations[port] = implementation


def implementation(port: type[Port]) -> Port | None:
    """What answers ``port``, or None when nothing was registered."""
    return _implementations.get(port)


def add_observer(observer: RequestObserver) -> None:
    """Make ``observer`` see every request served in this process (once; adding it again is a no-op)."""
    if observer not in _observers:
        _observers.append(observer)


def remove_observer(observer: RequestObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def observers() -> list[RequestObserver]:
    """The observers in the order they were added (the same list each time: read, never edit)."""
    return _observers


# The size of a response as a transport sent it, for an observer that records it (the audit
# trail's result size, which would cost it as much to encode once more as the rest of its row):
# id(response) -> UTF-8 bytes, None until a transport encoded it. Empty unless such an observer
# waits, so that a transport's check costs one test. The observer holds the response until it
# takes the size, so no other object takes its id meanwhile.
awaited_sizes: dict[int, int | None] = {}


def note_encoded(message: Any, text: str) -> None:
    """A transport encoded ``message`` as ``text``: keep its size if an observer waits for it.
    (Call it only when :data:`awaited_sizes` is not empty.)"""
    key = id(message)
    if key in awaited_sizes:
        # A lone surrogate goes out as U+FFFD: three bytes, as surrogatepass counts it.
        awaited_sizes[key] = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
