"""A project's ASGI application, in one line::

    import os
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    from mcp_server.asgi import get_asgi_application
    application = get_asgi_application()

It serves the default server at ``MCP_SERVER["ENDPOINT_PATH"]`` (``/mcp``), its Protected Resource
Metadata, the static files (see :func:`serves_static`) and Django for everything else, under
daphne, uvicorn or hypercorn. A project with its own ``ProtocolTypeRouter`` puts
:func:`mcp_urlpatterns` first in its ``URLRouter`` instead.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..http.daphne import (
    cut_off_slow_daphne_readers,
    drain_daphne_on_shutdown,
    refuse_oversized_daphne_bodies,
    send_daphne_writes_at_once,
    skip_daphne_form_parsing,
)
from ..http.daphne_costs import (
    keep_daphne_idle_timers,
    read_twisted_web_directly,
    skip_discarded_twisted_access_lines,
)
from ..http.daphne_memory import lean_daphne_request_queues, slim_daphne_requests
from ..http.daphne_reaping import reap_finished_daphne_requests
from ..http.drain import Draining, chain_sigterm, drain
from ..settings import mcp_settings
from .body_limit import BodyLimit
from .endpoint import SessionAuth, protected_resource_metadata_app, session_auth, streamable_http_app
from .startup_objects import freeze_startup_objects
from .static import StaticFiles, serves_static

__all__ = ["BodyLimit", "Draining", "EndpointFirst", "SessionAuth", "StaticFiles",
           "cut_off_slow_daphne_readers",
           "drain_daphne_on_shutdown", "endpoint_path", "freeze_startup_objects",
           "get_asgi_application", "install_daphne_hooks", "lean_daphne_request_queues", "lifespan",
           "mcp_urlpatterns", "protected_resource_metadata_app", "reap_finished_daphne_requests",
           "refuse_oversized_daphne_bodies", "send_daphne_writes_at_once", "serves_static",
           "session_auth", "skip_daphne_form_parsing", "slim_daphne_requests", "streamable_http_app"]

METADATA_PREFIX = "/.well-known/oauth-protected-resource"


def endpoint_path() -> str:
    """``MCP_SERVER["ENDPOINT_PATH"]``, checked: a path of its own, ``/`` then at least a character."""
    value = mcp_settings.ENDPOINT_PATH
    problem = None
    if not isinstance(value, str):
        problem = f"must be a string, not {type(value).__name__}"
    elif not value.startswith("/") or len(value) < 2:
        problem = "must be a path starting with '/', such as '/mcp'"
    elif re.search(r"[\s?#%\x00-\x1f\x7f]", value):
        problem = "must be a plain path, without spaces, '?', '#' or '%'"
    elif value == METADATA_PREFIX or value.startswith(METADATA_PREFIX + "/"):
        problem = f"must not be under {METADATA_PREFIX} (the endpoint's metadata is there)"
    if problem:
        raise ImproperlyConfigured(f"MCP_SERVER['ENDPOINT_PATH'] = {value!r} {problem}")
    return value


def install_daphne_hooks(path: str) -> None:
    """Under daphne: no form parsing of POST bodies, no Nagle delay, an oversized body to ``path``
    refused while it arrives, slow readers cut off, a drain on SIGTERM (see
    ``mcp_server.http.daphne``), smaller requests and a lean queue of each request's messages
    (``mcp_server.http.daphne_memory``), finished requests forgotten at once
    (``mcp_server.http.daphne_reaping``), and what Twisted does for each request for nothing
    spared (``mcp_server.http.daphne_costs``). Nothing under any other server; once per
    process."""
    skip_daphne_form_parsing()
    send_daphne_writes_at_once()
    refuse_oversized_daphne_bodies(path)
    cut_off_slow_daphne_readers()
    drain_daphne_on_shutdown()
    slim_daphne_requests()
    lean_daphne_request_queues()
    reap_finished_daphne_requests()
    read_twisted_web_directly()
    skip_discarded_twisted_access_lines()
    keep_daphne_idle_timers()


def mcp_urlpatterns(path: str | None = None) -> list[Any]:
    """The routes of the MCP endpoint, for a Channels ``URLRouter`` (first in it)::

        application = ProtocolTypeRouter({
            "http": URLRouter([*mcp_urlpatterns(), re_path(r"", django_application)]),
            "websocket": ...,
        })

    ``path`` (default ``MCP_SERVER["ENDPOINT_PATH"]``) serves the default server, its body limited
    (``MAX_REQUEST_BYTES``), the session cookie's user known, and its requests waited for (or
    refused) when the process drains (:class:`Draining`); ``/.well-known/
    oauth-protected-resource`` and below serve its Protected Resource Metadata. Under daphne, its
    hooks are installed. Call it once Django is set up.
    """
    path = endpoint_path() if path is None else path
    install_daphne_hooks(path)
    return _routes(path, _endpoint_app())


def _endpoint_app() -> Any:
    """The endpoint without its drain (the routes and :class:`EndpointFirst` add it)."""
    return BodyLimit(session_auth(streamable_http_app()))


def _routes(path: str, endpoint: Any) -> list[Any]:
    from django.urls import re_path

    return [
        re_path(rf"^{re.escape(path.lstrip('/'))}$", Draining(endpoint)),
        re_path(rf"^{re.escape(METADATA_PREFIX.lstrip('/'))}(?:/.*)?$",
                protected_resource_metadata_app(path)),
    ]


class EndpointFirst:
    """A request for exactly the endpoint's ``path`` goes straight to ``endpoint``; every other one
    to ``router`` (a ``URLRouter`` holding the endpoint's routes too, which also serves the endpoint
    under a ``root_path``). The router matches a regular expression per route and copies the
    scope; the endpoint's requests are nearly all of them. The scope then has the keys the router
    would add (no arguments in the endpoint's route)."""

    def __init__(self, path: str, endpoint: Any, router: Any):
        self.path = path
        self.endpoint = endpoint
        self.router = router

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("path") == self.path and not scope.get("root_path") and "path_remaining" not in scope:
            scope["path_remaining"] = ""
            scope["url_route"] = {"args": (), "kwargs": {}}
            await self.endpoint(scope, receive, send)
        else:
            await self.router(scope, receive, send)


async def lifespan(scope: dict, receive: Any, send: Any) -> None:
    """ASGI lifespan (uvicorn, granian, hypercorn): at startup, SIGTERM is set to start this process's
    drain before the server's own handler runs (``mcp_server.http.drain``); at shutdown, a drain
    begun ends (the process's runtime stops). Each process starts its runtime on its first request."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            chain_sigterm()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if drain.started:  # SIGTERM: the server waited for the drain's connections already
                await drain.wait()
            await send({"type": "lifespan.shutdown.complete"})
            return


def get_asgi_application(django_app: Any = None) -> Any:
    """The project's whole ASGI application: :func:`mcp_urlpatterns`, then the static files when
    :func:`serves_static`, then ``django_app`` (default: Django's own, which sets Django up);
    with the health check and the drain on SIGTERM (:class:`Draining`, :func:`lifespan`); what
    start-up loaded is then frozen out of the garbage collector's walks
    (:func:`freeze_startup_objects`)."""
    import django
    from django.apps import apps

    if django_app is None:
        from django.core.asgi import get_asgi_application as django_asgi_application

        django_app = django_asgi_application()
    elif not apps.ready:
        django.setup(set_prefix=False)

    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import re_path

    site = StaticFiles(django_app) if serves_static() else django_app
    path = endpoint_path()
    install_daphne_hooks(path)
    endpoint = _endpoint_app()
    router = URLRouter([*_routes(path, endpoint), re_path(r"", site)])
    application = ProtocolTypeRouter({
        "http": Draining(EndpointFirst(path, endpoint, router)),
        "lifespan": lifespan,
    })
    freeze_startup_objects()
    return application
