"""A tiny ASGI application for the HTTP tests: a server built for each request (HTTP-02, style b).

    daphne tests.http_apps:application

Each request gets its own ``Server`` whose tools and context depend on the request (its
``x-tenant`` header here, a user or a tenant in a real project), served by a stateless
``StreamableHTTPTransport`` built for that request alone.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.http_settings")
get_asgi_application()  # sets Django up

from mcp_server import Server, ServerContext  # noqa: E402
from mcp_server.http import StreamableHTTPTransport  # noqa: E402


def build_server(tenant: str) -> Server:
    server = Server(f"tenant-{tenant}", server_context={"tenant": tenant})

    @server.tool
    def whose(server_context: ServerContext) -> str:
        """Whose server answered."""
        return f"the server of {server_context['tenant']}"

    if tenant == "admin":

        @server.tool
        def audit() -> str:
            """Only the admin's server has this tool."""
            return "audited"

    return server


async def application(scope: dict, receive, send) -> None:
    if scope["type"] != "http":
        return
    tenant = dict(scope["headers"]).get(b"x-tenant", b"anonymous").decode("latin-1")
    transport = StreamableHTTPTransport(build_server(tenant), stateless=True)
    await transport.as_asgi()(scope, receive, send)
