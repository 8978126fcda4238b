"""The ids of the message being served, on every log record written meanwhile.

The dispatcher, the HTTP transport and a background call's worker enter :func:`serving` around
each message; :class:`RequestContextFilter` copies what it holds onto a log record as
``mcp_request_id``, ``mcp_session_id``, ``mcp_trace_id`` and ``mcp_method`` (None outside a
message), so that a JSON formatter can emit them. :func:`install` puts the filter on the package's
loggers (``mcp_server.apps`` calls it); a project's own handler-level filter covers every record
that handler writes, the project's and its tools' loggers included::

    "filters": {"mcp": {"()": "mcp_server.log_context.RequestContextFilter"}},
    "handlers": {"json": {..., "filters": ["mcp"]}},

With nothing logged, each :func:`serving` costs a ``ContextVar`` set and reset, no copy of
anything; a ``traceparent`` is parsed only when the message carries one.
"""

from __future__ import annotations

import contextvars
import logging
import re
from typing import Any, NamedTuple

from mcp_protocol.trace_context import TRACEPARENT_META_KEY

# Every logger the package writes to, mcp_client's too (a tool may use the client). A filter on a
# logger does not see its children's records, so each name used is listed (tests check the list
# against the getLogger calls of the source).
LOGGER_NAMES = (
    "mcp_server",
    "mcp_server.audit",
    "mcp_server.auth",
    "mcp_server.background",
    "mcp_server.http",
    "mcp_server.registry",
    "mcp_server.requests",
    "mcp_server.skills",
    "mcp_server.tasks",
    "mcp_client",
)
# The record attributes the filter sets.
ATTRIBUTES = ("mcp_request_id", "mcp_session_id", "mcp_trace_id", "mcp_method")

# W3C Trace Context: version-traceid-parentid-flags, lower-case hex. A later version may append
# fields after a dash; version ff is invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?", re.DOTALL)
_ZERO_TRACE, _ZERO_PARENT = "0" * 32, "0" * 16


class Ids(NamedTuple):
    """What is being served: a JSON-RPC request (or notification) of a session."""

    request_id: Any = None
    session_id: str | None = None
    trace_id: str | None = None
    method: str | None = None


# (request id, session id, trace id, method): a plain tuple, the cheapest to make per message.
_current: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("mcp_log_context", default=None)


def current() -> Ids | None:
    """The ids of the message being served in this context; None outside one."""
    ids = _current.get()
    return None if ids is None else Ids(*ids)


class serving:  # lower case: used as a function, ``with serving(...):``
    """Serve one message: log records written inside carry its ids (restored on exit).

    What is not given (None) is kept from an enclosing :func:`serving` (the HTTP transport's, around
    the dispatcher's), so the session id read from a header stays on the dispatcher's records. The
    trace id is that of a valid ``traceparent`` in ``params["_meta"]``. A class holding a plain
    tuple, not a generator or a named tuple: it is entered for every message.
    """

    __slots__ = ("_ids", "_token")

    def __init__(self, *, method: str | None = None, request_id: Any = None,
                 session_id: str | None = None, params: Any = None):
        trace_id = trace_id_of(params) if params else None
        outer = _current.get()
        if outer is None:
            self._ids = (request_id, session_id, trace_id, method)
        else:
            self._ids = (outer[0] if request_id is None else request_id,
                         outer[1] if session_id is None else session_id,
                         outer[2] if trace_id is None else trace_id,
                         outer[3] if method is None else method)

    def __enter__(self) -> None:
        self._token = _current.set(self._ids)

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)


def update(*, method: str | None = None, request_id: Any = None, params: Any = None) -> None:
    """Add a message's ids to those of the enclosing :class:`serving` of this task, until it exits
    (which restores what was there before it). The HTTP transport's, once it has decoded the body:
    cheaper than a :class:`serving` of its own, entered for every POST. Outside any ``serving``
    it does nothing, so it never leaves ids behind."""
    outer = _current.get()
    if outer is None:
        return
    trace_id = trace_id_of(params) if params else None
    _current.set((outer[0] if request_id is None else request_id, outer[1],
                  outer[2] if trace_id is None else trace_id, outer[3] if method is None else method))


def covers(method: str | None, request_id: Any, session_id: str | None) -> bool:
    """Whether the ids in effect are already these (the HTTP transport set them before handing the
    message to the dispatcher), so that no :class:`serving` of its own is needed."""
    ids = _current.get()
    return ids is not None and ids[0] == request_id and ids[3] == method and ids[1] == session_id


def trace_id_of(params: Any) -> str | None:
    """The trace id of the W3C ``traceparent`` in ``params["_meta"]``; None when absent or invalid."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return None
    return parse_traceparent(meta.get(TRACEPARENT_META_KEY))


def parse_traceparent(value: Any) -> str | None:
    """The trace id of a valid ``traceparent`` header value, else None (all-zero ids are invalid)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_PARENT:
        return None
    return trace_id


def detached() -> contextvars.Context:
    """A copy of the current context outside any message: for a process-wide task started while
    a message is served (``create_task(..., context=detached())``), whose records are not its."""
    context = contextvars.copy_context()
    context.run(_current.set, None)
    return context


def carried() -> contextvars.Context:
    """A new context holding only the current ids: for work handed to a thread pool (whose own
    context is empty), so that its records carry them without the loop's other context."""
    context = contextvars.Context()
    context.run(_current.set, _current.get())
    return context


class RequestContextFilter(logging.Filter):
    """Sets ``mcp_request_id``, ``mcp_session_id``, ``mcp_trace_id`` and ``mcp_method`` on each
    record (None outside a message); an attribute given with ``extra=`` is left as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _current.get()
        values = record.__dict__
        if ids is None:
            for name in ATTRIBUTES:
                values.setdefault(name, None)
        else:
            for name, value in zip(ATTRIBUTES, ids, strict=True):
                values.setdefault(name, value)
        return True


def install() -> None:
    """Put the filter on each of the package's loggers (once; a second call adds nothing)."""
    for name in LOGGER_NAMES:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, RequestContextFilter) for existing in logger.filters):
            logger.addFilter(RequestContextFilter())
