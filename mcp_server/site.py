"""The composition root: the project's default server, its Streamable HTTP transport and stores,
and what implements the ports of the floors below (:func:`install`); the decorators that register
onto the default server from ``mcp.py`` modules, and their discovery.

Nothing below this floor looks up the default server or its transport: it is handed them.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import module_has_submodule

from . import ports
from .configuration import Configuration
from .settings import mcp_settings

if TYPE_CHECKING:
    from .http.transport import StreamableHTTPTransport
    from .server import Server

_lock = threading.Lock()
_default: Server | None = None
logger = logging.getLogger("mcp_server")


def get_server() -> Server:
    """The server built from ``settings.MCP_SERVER``, which every ``mcp.py`` registers onto."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = build_server()
    return _default


# MCP_SERVER key -> the Configuration field it sets on the default server.
_CONFIGURATION_SETTINGS = {
    "EXCEPTION_REPORTER": "exception_reporter",
    "AROUND_REQUEST": "around_request",
    "INSTRUMENTATION_CALLBACK": "instrumentation_callback",
    "INSTRUMENT_SERVER_CONTEXT": "instrument_server_context",
    "PROTOCOL_VERSION": "protocol_version",
    "VALIDATE_TOOL_CALL_ARGUMENTS": "validate_tool_call_arguments",
    "VALIDATE_TOOL_CALL_RESULTS": "validate_tool_call_results",
}


def build_server() -> Server:
    from .middleware.base import load as load_middleware

    s = mcp_settings
    # Only the keys the project sets become per-server values: the rest stay unset, so the
    # global configure() values still apply to the default server (CFG-01).
    configuration = Configuration(**{
        field: getattr(s, key) for key, field in _CONFIGURATION_SETTINGS.items() if s.is_set(key)
    })
    server = s.SERVER_CLASS(
        s.NAME, title=s.TITLE, version=s.VERSION, description=s.DESCRIPTION,
        instructions=s.INSTRUCTIONS, website_url=s.WEBSITE_URL, icons=s.ICONS,
        capabilities=s.CAPABILITIES, page_size=s.PAGE_SIZE, ttl_ms=s.TTL_MS,
        cache_scope=s.CACHE_SCOPE, configuration=configuration, middleware=load_middleware(s.MIDDLEWARE),
    )
    search = _tool_search_options()
    if search is not None:
        from .registry.search_tool import ToolSearch

        server.add_tool(ToolSearch(**search))
    if s.REGISTRY_IN_DATABASE:
        from .registry.overlay import RegistryOverlay

        server.overlay = RegistryOverlay(server)
    contributor = ports.implementation(ports.RegistryContributor)
    if contributor is not None:
        contributor.server_built(server)
    return server


def _tool_search_options() -> dict[str, int] | None:
    from .registry.search_tool import options_from

    try:
        return options_from(mcp_settings.TOOL_SEARCH)
    except ValueError as exc:  # mcp_server.E042 says so too
        raise ImproperlyConfigured(f"MCP_SERVER['TOOL_SEARCH']: {exc}") from None


_transport: StreamableHTTPTransport | None = None


def get_transport() -> StreamableHTTPTransport:
    """The Streamable HTTP transport of the default server, built from ``MCP_SERVER``."""
    global _transport
    server = get_server()
    if _transport is None or _transport.server is not server:
        with _lock:
            if _transport is None or _transport.server is not server:
                _transport = build_transport(server)
                log_where_background_calls_run(server)
    return _transport


def log_where_background_calls_run(server: Server) -> None:
    """One line when the endpoint starts: where its background tool calls run (a warning when
    they run in the web process only because no broker is configured, and there are some)."""
    from .background.runner import where_calls_run

    try:
        level, sentence = where_calls_run()
    except ImproperlyConfigured as exc:  # mcp_server.E020 says so too; the endpoint still serves
        logger.error("background tool calls cannot run: %s", exc)
        return
    background = sorted(name for name, tool in server.tools.items() if tool.background)
    if not background:
        level = min(level, logging.INFO)
    logger.log(level, "%s (%d background tools%s)", sentence, len(background),
               f": {', '.join(background[:5])}{', ...' if len(background) > 5 else ''}" if background else "")


def build_transport(server: Server) -> StreamableHTTPTransport:
    from .auth.resource_server import ResourceServer
    from .http.options import StreamableHTTPOptions
    from .http.transport import StreamableHTTPTransport

    state, events = build_stores()
    return StreamableHTTPTransport(server, options=StreamableHTTPOptions.from_settings(mcp_settings),
                                   shared_state=state, event_store=events,
                                   resource_server=ResourceServer.from_settings())


def build_redis_clients() -> Any:
    """The Redis connections of the stores: the built-in pipelined client (through the sentinels
    of a ``redis+sentinel://`` URL), or redis-py's when ``REDIS_OPTIONS`` or
    ``REDIS_CLIENT_FACTORY`` is set."""
    from .http.redis_client import RedisClients
    from .http.redis_sentinel_client import SentinelRedisClients
    from .http.redispy_client import RedisPyClients
    from .redis_sentinel import is_sentinel_url
    from .redis_sentinel import parse as parse_sentinel_url

    s = mcp_settings
    timeout = _redis_command_timeout()
    if s.REDIS_OPTIONS is not None and not isinstance(s.REDIS_OPTIONS, dict):
        raise ImproperlyConfigured(f"MCP_SERVER['REDIS_OPTIONS'] must be a dict of redis-py options, "
                                   f"not {type(s.REDIS_OPTIONS).__name__}")
    sentinel = is_sentinel_url(s.REDIS_URL) and s.REDIS_CLIENT_FACTORY is None
    if sentinel:
        try:
            parse_sentinel_url(s.REDIS_URL)
        except ValueError as exc:
            raise ImproperlyConfigured(f"MCP_SERVER['REDIS_URL']: {exc}") from exc
    if s.REDIS_OPTIONS is not None or s.REDIS_CLIENT_FACTORY is not None:
        if s.REDIS_OPTIONS is not None and s.REDIS_CLIENT_FACTORY is not None:
            raise ImproperlyConfigured("MCP_SERVER sets both REDIS_OPTIONS and REDIS_CLIENT_FACTORY: "
                                       "the factory makes the client, so the options would be ignored")
        return RedisPyClients(s.REDIS_URL, timeout, options=s.REDIS_OPTIONS,
                              factory=s.REDIS_CLIENT_FACTORY)
    return (SentinelRedisClients if sentinel else RedisClients)(s.REDIS_URL, timeout)


def _redis_command_timeout() -> float:
    timeout = mcp_settings.REDIS_COMMAND_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ImproperlyConfigured(f"MCP_SERVER['REDIS_COMMAND_TIMEOUT'] must be a positive number "
                                   f"of seconds, not {timeout!r}")
    return timeout


def build_stores() -> tuple[Any, Any]:
    """The shared state and the event store of the default transport.

    Without ``REDIS_URL``: process memory, and a class named by ``SHARED_STATE_CLASS`` /
    ``EVENT_STORE_CLASS`` is called with no argument; the events are kept in memory too where one
    process serves every session (:func:`serves_from_one_process`), else as database rows. With it: the Redis
    stores (with Redis, SSE events are stored there too: a database row per event, written from a
    worker thread, costs more than the rest of a call, docs/performance.md), and a class named is
    called as ``cls(REDIS_URL, clients=...)`` (the event store: ``cls(REDIS_URL, EVENT_RETENTION,
    clients=...)``), ``clients.get()`` giving a connection; :class:`LocalState`,
    :class:`DatabaseEventStore` and :class:`MemoryEventStore` need no Redis and are called with no
    argument. An event store
    also gets the stored-event limits, as ``max_events=`` and ``max_bytes=``.
    """
    from .http.event_store import DatabaseEventStore, RedisEventStore
    from .http.memory_event_store import MemoryEventStore
    from .http.shared_state import LocalState, RedisState

    s = mcp_settings
    limits = {"max_events": s.MAX_STORED_EVENTS_PER_SESSION,
              "max_bytes": s.MAX_STORED_EVENT_BYTES_PER_SESSION}
    _redis_command_timeout()  # a wrong value is refused even where Redis is not used yet
    if not s.REDIS_URL:
        for key in ("REDIS_OPTIONS", "REDIS_CLIENT_FACTORY"):
            if s.is_set(key) and getattr(s, key) is not None:
                raise ImproperlyConfigured(f"MCP_SERVER[{key!r}] needs REDIS_URL: without it nothing "
                                           f"uses Redis")
        state_class = s.SHARED_STATE_CLASS or LocalState
        event_class = s.EVENT_STORE_CLASS or (
            MemoryEventStore if serves_from_one_process(state_class) else DatabaseEventStore)
        return state_class(), event_class(**limits)
    clients = build_redis_clients()
    state_class = s.SHARED_STATE_CLASS or RedisState
    event_class = s.EVENT_STORE_CLASS or RedisEventStore
    state = state_class() if state_class is LocalState else state_class(s.REDIS_URL, clients=clients)
    events = event_class(**limits) if event_class in (DatabaseEventStore, MemoryEventStore) else \
        event_class(s.REDIS_URL, s.EVENT_RETENTION, clients=clients, **limits)
    return state, events


def serves_from_one_process(state_class: type) -> bool:
    """Whether one process alone serves every session, so that what it stores in memory is all
    anyone reads: the shared state is this process's memory (:class:`LocalState`), the channel
    layer does not reach other processes (none, or Channels' in-memory layer), and background
    calls run here rather than on Celery workers (which would store their events elsewhere).
    Several processes configured so could not reach each other's streams anyway."""
    from .background.runner import runner_name
    from .http.shared_state import LocalState

    if mcp_settings.REDIS_URL or not issubclass(state_class, LocalState):
        return False
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get("default") or {}
    if layer.get("BACKEND", "channels.layers.InMemoryChannelLayer") != "channels.layers.InMemoryChannelLayer":
        return False
    try:
        return runner_name() == "local"
    except ImproperlyConfigured:
        return False  # the check mcp_server.E020 says why; rows are right for either runner


def install() -> None:
    """Register, once per process, what implements the ports of the floors below: background
    calls for the engine and the HTTP transport, the Tasks extension (its methods, its listen
    filter, and its hooks into background calls), the Skills extension (its methods and its
    skills in the default server's registry), and the observers of telemetry and the audit
    trail. The app's ``ready()`` calls it (the models they use need the app registry)."""
    from .background.port import BackgroundCallPort
    from .extensions.skills import hooks as skills_extension
    from .extensions.tasks import hooks as tasks_extension

    ports.register(ports.BackgroundCalls, BackgroundCallPort())
    ports.register(ports.TokenBuckets, SettingsBuckets())
    tasks_extension.install(default_transport=get_transport)
    skills_extension.install()
    install_observers()


RATE_LIMIT_STORES = ("auto", "redis", "cache")


def build_rate_buckets() -> Any:
    """The token buckets of the rate-limit middleware (``RATE_LIMIT_STORE``): Redis, through the
    stores' kind of client, or Django's cache ``RATE_LIMIT_CACHE``."""
    from django.core.cache import caches

    from .http.rate_buckets import RedisBuckets
    from .middleware.buckets import CacheBuckets

    s = mcp_settings
    if s.RATE_LIMIT_STORE not in RATE_LIMIT_STORES:
        raise ImproperlyConfigured(f"MCP_SERVER['RATE_LIMIT_STORE'] must be one of {RATE_LIMIT_STORES}, "
                                   f"not {s.RATE_LIMIT_STORE!r}")
    if s.RATE_LIMIT_STORE == "redis" or (s.RATE_LIMIT_STORE == "auto" and s.REDIS_URL):
        if not s.REDIS_URL:
            raise ImproperlyConfigured("MCP_SERVER['RATE_LIMIT_STORE'] = 'redis' needs REDIS_URL")
        return RedisBuckets(build_redis_clients())
    if s.RATE_LIMIT_CACHE not in settings.CACHES:
        raise ImproperlyConfigured(f"MCP_SERVER['RATE_LIMIT_CACHE'] = {s.RATE_LIMIT_CACHE!r} is not an alias "
                                   f"of CACHES ({', '.join(settings.CACHES)})")
    return CacheBuckets(caches[s.RATE_LIMIT_CACHE])


class SettingsBuckets:
    """``ports.TokenBuckets`` as the settings choose, built on first use (and again after the
    settings change): a process that limits nothing never connects anything for it."""

    def __init__(self) -> None:
        self._built: Any = None

    def forget(self) -> None:
        self._built = None

    async def take(self, buckets: list[tuple[str, int, float]]) -> float:
        if self._built is None:
            self._built = build_rate_buckets()
        return await self._built.take(buckets)


def install_observers() -> None:
    """What sees every request, in this order: spans (current while the others run), metrics,
    the audit trail. Each is there only while its setting has it on; called again when the
    settings change."""
    from . import audit

    install_telemetry()
    observe_operations()
    trace_ids = None
    if _telemetry_observer is not None:  # the trace of each row: its span's, not only the client's
        from .telemetry.tracing import current_trace_id as trace_ids
    audit.install(trace_ids=trace_ids)


_telemetry_observer: Any = None


def install_telemetry() -> None:
    """The request observer of ``MCP_SERVER["TELEMETRY"]``: spans ("native"), the caller's trace
    context made current ("propagation_only"), or none ("off", or OpenTelemetry not installed:
    nothing is imported). Installed again when the setting changes; a value that is none of
    these is mcp_server.E050's to report."""
    global _telemetry_observer
    from . import telemetry

    if _telemetry_observer is not None:
        ports.remove_observer(_telemetry_observer)
        _telemetry_observer = None
    current = telemetry.mode()
    if current == telemetry.OFF:
        return
    from .telemetry.tracing import PropagationObserver, SpanObserver

    _telemetry_observer = SpanObserver() if current == telemetry.NATIVE else PropagationObserver()
    ports.add_observer(_telemetry_observer)


def observe_operations() -> None:
    """Time every request (``mcp.server.operation.duration``) while metrics are on, and cost the
    dispatcher nothing while they are off: the observer is there only then."""
    from .telemetry import metrics

    if metrics.enabled():
        ports.add_observer(metrics.OPERATION_METRICS)
    else:
        ports.remove_observer(metrics.OPERATION_METRICS)


def autodiscover(*, force: bool = False) -> None:
    """Import every installed app's ``mcp.py``, as admin imports ``admin.py`` (when
    ``AUTODISCOVER`` is on). With ``force`` the modules run again, re-registering onto a freshly
    built default server."""
    if not mcp_settings.AUTODISCOVER:
        return
    for app_config in apps.get_app_configs():
        if not module_has_submodule(app_config.module, "mcp"):
            continue
        name = f"{app_config.name}.mcp"
        if force and name in sys.modules:
            importlib.reload(sys.modules[name])
        else:
            importlib.import_module(name)


def reset() -> None:
    """Forget the default server (after settings change).

    With ``AUTODISCOVER`` on, every ``mcp.py`` runs again, registering onto the new default server.
    """
    global _default
    with _lock:
        _default = None
    autodiscover(force=True)


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_SERVER":
        mcp_settings.reload()  # before the server is built again, whichever receiver ran first
        reset()
        install_observers()  # TELEMETRY and AUDIT may have changed
        buckets = ports.implementation(ports.TokenBuckets)
        if isinstance(buckets, SettingsBuckets):  # RATE_LIMIT_STORE and REDIS_URL may have changed
            buckets.forget()


setting_changed.connect(_on_setting_changed)


def register(item: Any) -> Any:
    """Class decorator (or call) adding a Tool, Prompt, Resource or ResourceTemplate."""
    return get_server().register(item)


def tool(function: Callable | None = None, **fields: Any) -> Any:
    """``@mcp_server.tool`` makes a function with typed keyword arguments a tool."""
    return get_server().tool(function, **fields)


def prompt(function: Callable | None = None, **fields: Any) -> Any:
    return get_server().prompt(function, **fields)


def resource(uri: str, **fields: Any) -> Callable:
    return get_server().resource(uri, **fields)


def resource_template(uri_template: str, **fields: Any) -> Callable:
    return get_server().resource_template(uri_template, **fields)
