"""ASGI entry point of the demo project (daphne serves it).

``/mcp`` is routed here, at the ASGI layer, straight to the MCP endpoint: it never goes through
Django's request handler or middleware. Everything else is the Django site (admin).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()

# Imported after Django is set up.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from mcp_server.asgi import (  # noqa: E402
    cut_off_slow_daphne_readers,
    protected_resource_metadata_app,
    refuse_oversized_daphne_bodies,
    session_auth,
    skip_daphne_form_parsing,
    streamable_http_app,
)

skip_daphne_form_parsing()
# A body past MAX_REQUEST_BYTES is refused while it arrives, not after daphne has held it all.
refuse_oversized_daphne_bodies("/mcp")
# A client that stops reading its stream is cut off once a bounded buffer is full (it resumes).
cut_off_slow_daphne_readers()

application = ProtocolTypeRouter({
    "http": URLRouter([
        # The session cookie's user, if any, owns the MCP sessions it opens (Channels'
        # AuthMiddlewareStack, run only for a request that carries the session cookie).
        path("mcp", session_auth(streamable_http_app())),
        # OAuth Protected Resource Metadata (RFC 9728) of /mcp: where clients find how to get a
        # token (MCP_SERVER["RESOURCE_SERVER"]).
        re_path(r"^\.well-known/oauth-protected-resource(?:/.*)?$", protected_resource_metadata_app()),
        re_path(r"", django_application),
    ]),
})
