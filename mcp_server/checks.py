"""System checks (``manage.py check``) of the MCP server's settings."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core import checks

from .settings import mcp_settings

# Checks run for manage.py mcp_stdio, where every background call runs in that process whatever
# the broker: what is said of web processes (W023) would be noise on each start.
_for_stdio = contextvars.ContextVar("mcp_server_checks_for_stdio", default=False)


@contextlib.contextmanager
def for_stdio() -> Iterator[None]:
    """Run the checks within as ``manage.py mcp_stdio`` does."""
    token = _for_stdio.set(True)
    try:
        yield
    finally:
        _for_stdio.reset(token)


@checks.register(checks.Tags.security)
def check_dns_rebinding_protection(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when the Streamable HTTP endpoint accepts any Host: DNS rebinding protection is off.

    A web page on any site can then make a browser on the user's machine talk to a server bound
    to a local or private address (the attack the Host and Origin checks exist for).
    """
    if not mcp_settings.DNS_REBINDING_PROTECTION:
        return [checks.Warning(
            "MCP_SERVER['DNS_REBINDING_PROTECTION'] is False: the /mcp endpoint accepts any Host "
            "and Origin header.",
            hint='Remove "DNS_REBINDING_PROTECTION": False from MCP_SERVER (True is the default) and '
                 'list the endpoint\'s public host names: ALLOWED_HOSTS = ["mcp.example.com"] (or '
                 'MCP_SERVER["ALLOWED_HOSTS"] = ["mcp.example.com"] for the endpoint alone).',
            id="mcp_server.W001",
        )]
    custom = mcp_settings.ALLOWED_HOSTS
    hosts, name = (settings.ALLOWED_HOSTS, "ALLOWED_HOSTS") if custom is None else \
        (custom, "MCP_SERVER['ALLOWED_HOSTS']")
    if "*" in hosts:
        return [checks.Warning(
            f"{name} contains '*': the /mcp endpoint accepts any Host header, so DNS rebinding "
            "protection is effectively off.",
            hint=(f'List the endpoint\'s public host names instead: {name} = ["mcp.example.com"]'
                  if custom is None else
                  'List the endpoint\'s public host names instead: '
                  'MCP_SERVER["ALLOWED_HOSTS"] = ["mcp.example.com"]')
                 + ('; or give the endpoint a list of its own: MCP_SERVER["ALLOWED_HOSTS"] = '
                    '["mcp.example.com"]' if custom is None else "") + ".",
            id="mcp_server.W002",
        )]
    return []


@checks.register(checks.Tags.security)
def check_request_state_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Malformed request-state settings stop start-up rather than the first input_required call."""
    from .request_state import settings_errors

    errors = settings_errors(mcp_settings.REQUEST_STATE_KEYS, mcp_settings.REQUEST_STATE_TTL,
                             mcp_settings.REQUEST_STATE_AUDIENCE)
    return [checks.Error(
        f"MCP_SERVER: {message}",
        hint="Generate a key with: python -c \"import base64, secrets; "
             "print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())\"",
        id="mcp_server.E010",
    ) for message in errors]


@checks.register(checks.Tags.security)
def check_authentication(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Authentication settings that cannot work (a JWT class with no JWKS URL, an HS* algorithm, an
    unknown key) stop start-up rather than the first request to the endpoint."""
    from django.core.exceptions import ImproperlyConfigured

    from .auth.resource_server import ResourceServer

    try:
        ResourceServer.from_settings()
    except (ImproperlyConfigured, ValueError) as exc:
        return [checks.Error(str(exc), id="mcp_server.E030")]
    return []


@checks.register(checks.Tags.security)
def check_jwt_issuer(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when ``JWTAuthentication`` checks no issuer: a JWT is then accepted whoever issued it,
    as long as a key of the JWKS signed it (a JWKS several issuers or tenants share, say)."""
    from django.core.exceptions import ImproperlyConfigured

    from .auth.jwt_tokens import JWTAuthentication
    from .auth.resource_server import ResourceServer

    try:
        resource_server = ResourceServer.from_settings()
    except (ImproperlyConfigured, ValueError):
        return []  # mcp_server.E030 says what is wrong
    authenticators = resource_server.authenticators if resource_server is not None else []
    if not any(isinstance(a, JWTAuthentication) and not a.issuer for a in authenticators):
        return []
    return [checks.Warning(
        "JWTAuthentication accepts a token of any issuer: MCP_SERVER['RESOURCE_SERVER']['JWT']['ISSUER'] "
        "is None, so the 'iss' claim is not checked.",
        hint='Name the issuer of the authorization server whose JWKS is JWKS_URL (its RFC 8414 '
             '"issuer"): MCP_SERVER["RESOURCE_SERVER"]["JWT"]["ISSUER"] = "https://auth.example.com".',
        id="mcp_server.W030",
    )]


@checks.register()
def check_background_calls(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Background calls on Celery need what lets a worker reach the web processes."""
    from django.core.exceptions import ImproperlyConfigured

    from .background.queue_wait import queue_timeout
    from .background.runner import runner_name

    errors: list[checks.CheckMessage] = []
    try:
        queue_timeout()
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="mcp_server.E023",
                                   hint='For instance: MCP_SERVER["BACKGROUND_CALL_QUEUE_TIMEOUT"] = 60'))
    try:
        runner = runner_name()
    except ImproperlyConfigured as exc:
        return [*errors, checks.Error(str(exc), hint='MCP_SERVER["BACKGROUND_CALLS"] = "auto"',
                                      id="mcp_server.E020")]
    if runner != "celery":
        return [*errors, *_background_calls_here()]
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", "")
    if not backend or backend.endswith("InMemoryChannelLayer"):
        errors.append(checks.Error(
            "Background tool calls run on Celery workers, but the channel layer is not shared "
            "between processes: a worker could not reach the web process holding a call.",
            hint='Share the channel layer through Redis: CHANNEL_LAYERS = {"default": {"BACKEND": '
                 '"channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": '
                 '["redis://127.0.0.1:6379/0"]}}} (pip install "django-mcp-sdk[redis]"); or run '
                 'background calls in the web process: MCP_SERVER["BACKGROUND_CALLS"] = "local".',
            id="mcp_server.E021",
        ))
    if mcp_settings.REDIS_URL is None and mcp_settings.SHARED_STATE_CLASS is None:
        errors.append(checks.Error(
            "Background tool calls run on Celery workers, but MCP_SERVER['REDIS_URL'] is not set: "
            "workers and web processes would not share which process holds which request.",
            hint='Add to MCP_SERVER: "REDIS_URL": "redis://127.0.0.1:6379/0" (the Redis the channel '
                 'layer uses too).',
            id="mcp_server.E022",
        ))
    return errors


@checks.register()
def check_list_changed_interval(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A wrong interval would fail the first registry change made in admin, not start-up."""
    interval = mcp_settings.LIST_CHANGED_MIN_INTERVAL
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0 <= interval < 1e9:
        return [checks.Error(f"MCP_SERVER['LIST_CHANGED_MIN_INTERVAL'] must be a number of seconds, 0 or "
                             f"more, not {interval!r}", id="mcp_server.E040")]
    return []


@checks.register()
def check_tool_search(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A wrong MCP_SERVER["TOOL_SEARCH"] would fail the default server's first use, not start-up."""
    from .registry.search_tool import options_from

    try:
        options_from(mcp_settings.TOOL_SEARCH)
    except ValueError as exc:
        return [checks.Error(f"MCP_SERVER['TOOL_SEARCH']: {exc}",
                             hint='For example {"THRESHOLD": 50, "MAX_RESULTS": 10}, or None to serve no '
                                  "tool search.", id="mcp_server.E042")]
    return []


@checks.register()
def check_telemetry(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """MCP_SERVER["TELEMETRY"] names how spans are made; another value would serve no span."""
    from .telemetry import MODES

    value = mcp_settings.TELEMETRY
    if value not in MODES:
        return [checks.Error(f"MCP_SERVER['TELEMETRY'] must be one of {', '.join(MODES)}, not {value!r}",
                             hint="\"native\" makes spans, \"propagation_only\" carries the caller's trace "
                                  "context without spans, \"off\" imports nothing of OpenTelemetry.",
                             id="mcp_server.E050")]
    return []


@checks.register()
def check_asgi_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """ENDPOINT_PATH and SERVE_STATIC, read by mcp_server.asgi when the first process starts."""
    from django.core.exceptions import ImproperlyConfigured

    from .asgi import endpoint_path

    errors: list[checks.CheckMessage] = []
    try:
        endpoint_path()
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="mcp_server.E070"))
    if mcp_settings.SERVE_STATIC not in (None, True, False):
        errors.append(checks.Error(f"MCP_SERVER['SERVE_STATIC'] must be None, True or False, not "
                                   f"{mcp_settings.SERVE_STATIC!r}", id="mcp_server.E071"))
    return errors


@checks.register()
def check_drain_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """DRAIN_TIMEOUT and HEALTH_CHECK_PATH, read when a process is told to stop and by the health
    check: a wrong value would show only then."""
    import re

    errors: list[checks.CheckMessage] = []
    timeout = mcp_settings.DRAIN_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout < 1e6:
        errors.append(checks.Error(f"MCP_SERVER['DRAIN_TIMEOUT'] must be a number of seconds, 0 or more, "
                                   f"not {timeout!r}", id="mcp_server.E080"))
    path = mcp_settings.HEALTH_CHECK_PATH
    if path is not None and (not isinstance(path, str) or not path.startswith("/") or len(path) < 2
                             or re.search(r"[\s?#%\x00-\x1f\x7f]", path)
                             or path == mcp_settings.ENDPOINT_PATH):
        errors.append(checks.Error(
            f"MCP_SERVER['HEALTH_CHECK_PATH'] must be None or a plain path of its own starting with "
            f"'/', such as '/healthz' (not the endpoint's), not {path!r}", id="mcp_server.E081"))
    return errors


@checks.register()
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """MIDDLEWARE and the built-ins' settings (RATE_LIMITS, RATE_LIMIT_STORE, RATE_LIMIT_CACHE,
    TOOL_TIMEOUT, TOOL_TIMEOUTS), checked at start-up rather than at the first request: the chain is
    built once, as the server builds it."""
    from django.core.exceptions import ImproperlyConfigured

    from .middleware.base import build_chain, load
    from .site import RATE_LIMIT_STORES

    errors: list[checks.CheckMessage] = []
    try:
        build_chain(load(mcp_settings.MIDDLEWARE))
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), hint="MCP_SERVER['MIDDLEWARE'] lists import strings of "
                                   "factories, such as 'mcp_server.middleware.RateLimitMiddleware'",
                                   id="mcp_server.E090"))
    if mcp_settings.RATE_LIMIT_STORE not in RATE_LIMIT_STORES:
        errors.append(checks.Error(f"MCP_SERVER['RATE_LIMIT_STORE'] must be one of {RATE_LIMIT_STORES}, not "
                                   f"{mcp_settings.RATE_LIMIT_STORE!r}", id="mcp_server.E091"))
    elif mcp_settings.RATE_LIMIT_STORE == "redis" and not mcp_settings.REDIS_URL:
        errors.append(checks.Error("MCP_SERVER['RATE_LIMIT_STORE'] = 'redis' needs REDIS_URL",
                                   id="mcp_server.E091"))
    elif mcp_settings.RATE_LIMIT_CACHE not in settings.CACHES:
        errors.append(checks.Error(f"MCP_SERVER['RATE_LIMIT_CACHE'] = {mcp_settings.RATE_LIMIT_CACHE!r} is "
                                   "not an alias of CACHES", id="mcp_server.E091"))
    return errors


RUNSERVER_HINT = (
    'List "daphne" first in INSTALLED_APPS and set ASGI_APPLICATION = "mysite.asgi.application" '
    "(the asgi.py whose application is mcp_server.asgi.get_asgi_application()); or serve the "
    "project with `daphne mysite.asgi:application` or `uvicorn mysite.asgi:application`."
)


@checks.register()
def check_runserver_serves_the_endpoint(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``runserver`` serves the endpoint only as daphne's (ASGI) command; Django's own is WSGI and
    answers the endpoint's path with a bare 404."""
    import sys

    from django.apps import apps
    from django.core.management import get_commands

    if get_commands().get("runserver") == "daphne":
        return []
    if apps.is_installed("daphne"):  # listed after staticfiles, whose runserver then wins
        return [checks.Warning(
            "'daphne' comes after 'django.contrib.staticfiles' in INSTALLED_APPS, so runserver is "
            "Django's WSGI server, which does not serve the MCP endpoint.",
            hint="Move 'daphne' to the top of INSTALLED_APPS.", id="mcp_server.W070")]
    # Said only when runserver starts: a project served by uvicorn needs no daphne.
    if sys.argv[1:2] == ["runserver"]:
        return [checks.Warning(
            "runserver is Django's WSGI server here: it does not serve the MCP endpoint "
            f"({mcp_settings.ENDPOINT_PATH} answers 404).", hint=RUNSERVER_HINT, id="mcp_server.W071")]
    return []


def _background_calls_here() -> list[checks.CheckMessage]:
    """Background tools whose calls run in the web process only because no broker is set there:
    the project may well have meant Celery (the worker's settings name a broker; the web's not)."""
    from .background.runner import KEEP_LOCAL, TO_CELERY
    from .site import get_server

    if mcp_settings.BACKGROUND_CALLS != "auto" or _for_stdio.get():
        return []  # "local" chosen, said in so many words; or stdio, where no worker could run them
    background = sorted(name for name, tool in get_server().tools.items() if tool.background)
    if not background:
        return []
    shown = ", ".join(background[:5]) + (", ..." if len(background) > 5 else "")
    return [checks.Warning(
        f"Background tool calls ({shown}) run in the web process: CELERY_BROKER_URL is not set in "
        "these settings, so no Celery worker gets them.",
        hint=f"To run them on Celery workers, {TO_CELERY}. To keep them in the web process, say so: "
             f"{KEEP_LOCAL}.",
        id="mcp_server.W023",
    )]


@checks.register()
def check_mcp_module_beside_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An ``mcp.py`` in the settings module's package (``mysite/mcp.py`` beside
    ``mysite/settings.py``, where ``startproject`` puts files) is found by autodiscovery only when
    that package is an installed app; otherwise its tools are silently missing."""
    import importlib.util
    import sys

    from django.apps import apps

    module = getattr(settings, "SETTINGS_MODULE", None) or ""
    package = module.rpartition(".")[0]
    if not package or not mcp_settings.AUTODISCOVER or f"{package}.mcp" in sys.modules:
        return []  # a module imported some other way is not ignored
    if any(config.name == package for config in apps.get_app_configs()):
        return []
    try:
        found = importlib.util.find_spec(f"{package}.mcp") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return []
    path = f"{package.replace('.', '/')}/mcp.py"
    return [checks.Warning(
        f"{path} is beside the settings module ({module}), but {package!r} is not in "
        f"INSTALLED_APPS: autodiscovery reads each installed app's mcp.py, so its tools, prompts "
        "and resources are not served.",
        hint=f'Add the project package to INSTALLED_APPS: INSTALLED_APPS += ["{package}"]; or move '
             f"{path} into an app (python manage.py startapp shop, then shop/mcp.py, with \"shop\" "
             "in INSTALLED_APPS).",
        id="mcp_server.W050",
    )]


@checks.register()
def check_query_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The model query tool's limits, budget cache, database and timeout: a wrong one would fail
    its first call, not start-up, and a timeout PostgreSQL cannot apply must not be ignored."""
    from django.db import connections

    errors = []
    for name, optional in (("QUERY_MAX_ROWS", False), ("QUERY_MAX_BYTES", False),
                           ("QUERY_SESSION_MAX_ROWS", True), ("QUERY_SESSION_MAX_BYTES", True)):
        value = getattr(mcp_settings, name)
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(checks.Error(
                f"MCP_SERVER[{name!r}] must be a positive integer{' or None' if optional else ''}, "
                f"not {value!r}", id="mcp_server.E110"))
    cache = mcp_settings.QUERY_BUDGET_CACHE
    if not isinstance(cache, str) or cache not in settings.CACHES:
        errors.append(checks.Error(f"MCP_SERVER['QUERY_BUDGET_CACHE'] names a cache of CACHES, and "
                                   f"{cache!r} is none of {', '.join(settings.CACHES)}",
                                   id="mcp_server.E110"))
    alias = mcp_settings.QUERY_DATABASE
    if alias is not None and (not isinstance(alias, str) or alias not in settings.DATABASES):
        errors.append(checks.Error(f"MCP_SERVER['QUERY_DATABASE'] names a database of DATABASES, and "
                                   f"{alias!r} is none of {', '.join(settings.DATABASES)}",
                                   id="mcp_server.E110"))
        alias = None
    timeout = mcp_settings.QUERY_STATEMENT_TIMEOUT
    if timeout is None:
        return errors
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < 1e6:
        errors.append(checks.Error(f"MCP_SERVER['QUERY_STATEMENT_TIMEOUT'] must be a number of "
                                   f"seconds above 0, or None, not {timeout!r}", id="mcp_server.E110"))
        return errors
    alias = alias or "default"
    if alias in settings.DATABASES and connections[alias].vendor != "postgresql":
        errors.append(checks.Error(
            f"MCP_SERVER['QUERY_STATEMENT_TIMEOUT'] is PostgreSQL's statement_timeout, and the "
            f"database the query tool reads ({alias!r}) is {connections[alias].vendor}.",
            hint="Set it to None, or read from a PostgreSQL database (QUERY_DATABASE).",
            id="mcp_server.E111"))
    return errors
