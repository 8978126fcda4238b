"""ASGI entry point of the conformance server: ``/mcp`` (Streamable HTTP) and ``/health``.

Its own router, composed with the endpoint's routes (``mcp_urlpatterns``), as a project with its
own ``ProtocolTypeRouter`` does; it has no Django views.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conformance.settings")

import django

django.setup()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from mcp_server.asgi import mcp_urlpatterns  # noqa: E402


async def health(scope: dict, receive, send) -> None:
    """``200 ok`` once the process serves requests (what ``conformance/run`` waits for)."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok\n"})


application = ProtocolTypeRouter({
    "http": URLRouter([
        *mcp_urlpatterns(),
        path("health", health),
    ]),
})
