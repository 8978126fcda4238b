"""Hooks and switches that shape request handling: one global set, overridable per server."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from mcp_protocol.versions import MODERN_VERSIONS, STABLE_VERSIONS, is_handshake_version

_UNSET: Any = object()
_versions = itertools.count()
_BOOL_FIELDS = ("instrument_server_context", "validate_tool_call_arguments", "validate_tool_call_results")
DEFAULTS: dict[str, Any] = {
    "exception_reporter": None,
    "around_request": None,
    "instrumentation_callback": None,
    "instrument_server_context": False,
    "protocol_version": None,
    "validate_tool_call_arguments": True,
    "validate_tool_call_results": False,
}


class ConfigurationError(ValueError):
    pass


class Configuration:
    """Per-server settings; a value left unset falls back to the global :func:`configure` one.

    ``exception_reporter(exc, context)`` gets ``{"request": raw}`` or ``{"notification": name}``;
    ``around_request(data, call_next)`` wraps each request (sync or ``async def``);
    ``instrumentation_callback(data)`` runs after each request.
    """

    def __init__(
        self,
        *,
        exception_reporter: Callable[[BaseException, dict], Any] | None = _UNSET,
        around_request: Callable[..., Any] | None = _UNSET,
        instrumentation_callback: Callable[[dict], Any] | None = _UNSET,
        instrument_server_context: bool = _UNSET,
        protocol_version: str | None = _UNSET,
        validate_tool_call_arguments: bool = _UNSET,
        validate_tool_call_results: bool = _UNSET,
    ):
        self._values: dict[str, Any] = {}
        given = {
            "exception_reporter": exception_reporter,
            "around_request": around_request,
            "instrumentation_callback": instrumentation_callback,
            "instrument_server_context": instrument_server_context,
            "protocol_version": protocol_version,
            "validate_tool_call_arguments": validate_tool_call_arguments,
            "validate_tool_call_results": validate_tool_call_results,
        }
        for name, value in given.items():
            if value is not _UNSET:
                setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_values":
            object.__setattr__(self, name, value)
            # Every setting an attribute of the instance: read several times per request, they
            # are then found at once, not after a failed lookup and __getattr__.
            self.__dict__.update(DEFAULTS, **value)
            object.__setattr__(self, "version", next(_versions))
            return
        if name not in DEFAULTS:
            raise AttributeError(f"Configuration has no setting {name!r}")
        self._values[name] = checked = _check(name, value)
        object.__setattr__(self, name, checked)
        # A number no other state of any configuration had: a server's merged view is kept
        # until the numbers of its two configurations change.
        object.__setattr__(self, "version", next(_versions))

    def __getattr__(self, name: str) -> Any:
        if name in DEFAULTS:
            return self._values.get(name, DEFAULTS[name])
        raise AttributeError(name)

    def is_set(self, name: str) -> bool:
        return name in self._values

    def merged_over(self, base: Configuration) -> Configuration:
        """A configuration taking this one's set values and ``base``'s for the rest."""
        merged = Configuration()
        merged._values = {**base._values, **self._values}
        return merged


def _check(name: str, value: Any) -> Any:
    if name in _BOOL_FIELDS and not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    if name == "protocol_version":
        return check_protocol_version(value)
    hooks = ("exception_reporter", "around_request", "instrumentation_callback")
    if name in hooks and value is not None and not callable(value):
        raise ConfigurationError(f"{name} must be callable or None")
    return value


def check_protocol_version(version: str | None) -> str | None:
    if version is None:
        return None
    if version in MODERN_VERSIONS:
        raise ConfigurationError(
            f"protocol_version {version!r} is the stateless 2026-07-28 lifecycle, which is not "
            "negotiated through initialize: leave protocol_version unset (None) and the server "
            "serves modern clients through server/discover and the per-request envelope."
        )
    if not is_handshake_version(version):
        raise ConfigurationError(
            f"unknown protocol_version {version!r}; supported: {', '.join(STABLE_VERSIONS[1:])}"
        )
    return version


global_configuration = Configuration()


def configure(**settings: Any) -> Configuration:
    """Set process-wide defaults, for example ``configure(exception_reporter=report)``."""
    for name, value in settings.items():
        setattr(global_configuration, name, value)
    return global_configuration
