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
from ..http.daphne_memory import lean_daphne_request_queues, slim_daphne_requests
from ..http.daphne_reaping import reap_finished_daphne_requests
from ..http.drain import Draining, chain_sigterm, drain
from ..settings import mcp_settings
from .body_limit import BodyLimit
from .endpoint import SessionAuth, protected_resource_metadata_app, session_auth, streamable_http_app
from .startup_objects import freeze_startup_objects
from .static import StaticFiles, serves_static

__all__ = ["BodyLimit", "Draining", "SessionAuth", "StaticFiles", "cut_off_slow_daphne_readers",
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
    (``mcp_server.http.daphne_memory``), and finished requests forgotten at once
    (``mcp_server.http.daphne_reaping``). Nothing under any other server; once per process."""
    skip_daphne_form_parsing()
    send_daphne_writes_at_once()
    refuse_oversized_daphne_bodies(path)
    cut_off_slow_daphne_readers()
    drain_daphne_on_shutdown()
    slim_daphne_requests()
    lean_daphne_request_queues()
    reap_finished_daphne_requests()


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
    from django.urls import re_path

    path = endpoint_path() if path is None else path
    install_daphne_hooks(path)
    return [
        re_path(rf"^{re.escape(path.lstrip('/'))}$",
                Draining(BodyLimit(session_auth(streamable_http_app())))),
        re_path(rf"^{re.escape(METADATA_PREFIX.lstrip('/'))}(?:/.*)?$",
                protected_resource_metadata_app(path)),
    ]


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
    application = ProtocolTypeRouter({
        "http": Draining(URLRouter([*mcp_urlpatterns(), re_path(r"", site)])),
        "lifespan": lifespan,
    })
    freeze_startup_objects()
    return application
