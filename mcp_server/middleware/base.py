"""MCP middleware: code wrapped around every request and notification the server handles.

Shaped as Django's middleware: a *factory* takes the next handler (``get_response``) and returns
an ``async`` callable of one :class:`Call`, which returns what the next handler returned (the
result of a request, None for a notification). The list ``MCP_SERVER["MIDDLEWARE"]`` (or
``Server(middleware=[...])``) is applied in order: the first is the outermost. The chain is built
once, when the server is made; with an empty list the dispatcher calls the handler directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed
from django.utils.module_loading import import_string

from mcp_protocol import methods

if TYPE_CHECKING:
    from ..context import ServerContext
    from ..session import ServerSession

# What Call.era says.
HANDSHAKE = "handshake"  # a session opened with initialize (2025-11-25 and earlier)
MODERN = "modern"        # a stateless 2026-07-28 request, its client in its _meta envelope

Handler = Callable[["Call"], Awaitable[Any]]


class Call:
    """One request or notification as middleware sees it.

    ``params`` may be replaced (or changed in place) before calling the next handler: the handler
    gets what is there then. ``context`` is the request's ``ServerContext`` (None for a
    notification). ``background`` is True on a Celery worker running a background tool call (the
    same call went through the chain once already in the web process that queued it).
    """

    __slots__ = ("_run", "background", "context", "era", "method", "params", "request_id", "session")

    def __init__(self, *, method: str, params: Any, session: ServerSession, request_id: Any = None,
                 context: ServerContext | None = None, background: bool = False,
                 run: Callable[[Call], Awaitable[Any]]):
        self.method = method
        self.params = params
        self.session = session
        self.request_id = request_id
        self.context = context
        self.background = background
        self.era = MODERN if session.envelope is not None else HANDSHAKE
        self._run = run

    @property
    def principal(self) -> Any:
        """Who sent it (``mcp_server.auth.Principal``), None where nobody authenticated (stdio)."""
        return self.session.principal

    @property
    def is_notification(self) -> bool:
        return self.context is None

    @property
    def tool(self) -> str | None:
        """The tool a ``tools/call`` names; None for any other method."""
        if self.method != methods.TOOLS_CALL or not isinstance(self.params, dict):
            return None
        name = self.params.get("name")
        return name if isinstance(name, str) else None

    def __repr__(self) -> str:
        return f"<Call {self.method} id={self.request_id!r} era={self.era}>"


async def _innermost(call: Call) -> Any:
    return await call._run(call)


def load(middleware: Iterable[Any], setting: str = "MCP_SERVER['MIDDLEWARE']") -> list[Callable]:
    """The factories ``middleware`` names (import strings, or the factories themselves);
    ImproperlyConfigured for an import string that does not import or names no callable."""
    if isinstance(middleware, str | bytes) or not isinstance(middleware, Iterable):
        raise ImproperlyConfigured(f"{setting} must be a list of import strings, not {middleware!r}")
    factories = []
    for item in middleware:
        factory = item
        if isinstance(item, str):
            try:
                factory = import_string(item)
            except ImportError as exc:
                raise ImproperlyConfigured(f"{setting}: {item!r} cannot be imported: {exc}") from exc
        if not callable(factory):
            raise ImproperlyConfigured(f"{setting}: {item!r} is not a middleware factory (a callable "
                                       "taking the next handler)")
        factories.append(factory)
    return factories


def build_chain(factories: Iterable[Callable]) -> Handler | None:
    """The chain of ``factories``, outermost first; None when there is none (nothing to wrap). A
    factory that raises Django's ``MiddlewareNotUsed`` is left out, as Django does."""
    handler: Handler = _innermost
    used = False
    for factory in reversed(list(factories)):
        try:
            wrapped = factory(handler)
        except MiddlewareNotUsed:
            continue
        if not _is_async(wrapped):
            raise ImproperlyConfigured(f"MCP middleware {_name(factory)} must return an async callable "
                                       "(async def, or a class with async def __call__), not "
                                       f"{wrapped!r}")
        handler, used = wrapped, True
    return handler if used else None


def _is_async(value: Any) -> bool:
    return inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(type(value).__call__)


def _name(factory: Any) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"
