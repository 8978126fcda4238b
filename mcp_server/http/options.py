"""The options of the Streamable HTTP transport: one frozen object, checked when it is made.

Each option is the ``MCP_SERVER`` setting of its name in upper case, and takes its default from
there (``mcp_server.settings.DEFAULTS``, where each is explained, as in the settings table of
docs/configuration.md): the default server's transport is built with
:meth:`StreamableHTTPOptions.from_settings`, and a transport built by hand with the options it
names, the others at their defaults.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ..settings import DEFAULTS, MCPSettings, mcp_settings
from .limits import check_limits


def _defaults_from_settings(cls: type) -> type:
    """Give each option the default of its setting (the option's name in upper case)."""
    for name in cls.__annotations__:
        default = DEFAULTS[name.upper()]
        if isinstance(default, list | dict):
            setattr(cls, name, field(default_factory=lambda default=default: copy.deepcopy(default)))
        else:
            setattr(cls, name, default)
    return cls


@dataclass(frozen=True)
@_defaults_from_settings
class StreamableHTTPOptions:
    """What a ``StreamableHTTPTransport`` is configured with; :meth:`replace` makes a changed copy."""

    stateless: bool
    enable_json_response: bool
    # None: Django's ALLOWED_HOSTS (StreamableHTTPTransport.allowed_hosts is the list in force).
    allowed_hosts: list[str] | None
    allowed_origins: list[str]
    dns_rebinding_protection: bool
    session_idle_timeout: float | None
    max_sessions: int | None
    session_request_validator: Callable[..., Any] | None
    max_request_bytes: int
    max_json_depth: int
    max_json_containers: int
    server_to_client_request_timeout: float | None
    keepalive_interval: float
    event_retention: float
    process_heartbeat_interval: float
    max_sessions_per_principal: int | None
    max_streams_per_session: int | None
    max_subscriptions_per_session: int | None
    max_sse_buffer_bytes: int | None
    sse_stall_timeout: float
    max_queued_stream_events: int
    max_progress_token_length: int | None
    max_listen_subscriptions: int | None
    max_listen_subscriptions_per_principal: int | None
    listen_keepalive_interval: float | None
    stream_credential_check_interval: float | None

    def __post_init__(self) -> None:
        # None is "no other origin", as the keyword always allowed.
        object.__setattr__(self, "allowed_origins", list(self.allowed_origins or []))
        for name in ("max_request_bytes", "max_json_depth", "max_json_containers",
                     "max_queued_stream_events"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name in ("process_heartbeat_interval", "sse_stall_timeout"):
            _check_seconds(name, getattr(self, name))
        for name in ("listen_keepalive_interval", "stream_credential_check_interval"):
            if getattr(self, name) is not None:
                _check_seconds(name, getattr(self, name), " or None")
        check_limits(max_sessions_per_principal=self.max_sessions_per_principal,
                     max_streams_per_session=self.max_streams_per_session,
                     max_subscriptions_per_session=self.max_subscriptions_per_session,
                     max_sse_buffer_bytes=self.max_sse_buffer_bytes,
                     max_progress_token_length=self.max_progress_token_length,
                     max_listen_subscriptions=self.max_listen_subscriptions,
                     max_listen_subscriptions_per_principal=self.max_listen_subscriptions_per_principal)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(option.name for option in fields(cls))

    @classmethod
    def from_settings(cls, settings: MCPSettings = mcp_settings) -> StreamableHTTPOptions:
        """The options as the project's ``MCP_SERVER`` sets them."""
        return cls(**{name: getattr(settings, name.upper()) for name in cls.names()})

    def replace(self, **changes: Any) -> StreamableHTTPOptions:
        """These options with ``changes``; an unknown name is a TypeError naming the known ones."""
        unknown = set(changes) - set(self.names())
        if unknown:
            raise TypeError(f"unknown Streamable HTTP option(s): {', '.join(sorted(unknown))}; "
                            f"the options are {', '.join(self.names())}")
        return dataclasses.replace(self, **changes)


def _check_seconds(name: str, seconds: Any, alternative: str = "") -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < 1e9:
        raise ValueError(f"{name} must be a positive number of seconds{alternative}, not {seconds!r}")
