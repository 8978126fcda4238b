"""The per-request integration style in a Django view (HTTP-02): the view builds the server for
its request (its ``x-tenant`` header here) and a stateless transport, and returns what
``handle_request`` gives. Served by the tests' own URLconf (``@pytest.mark.urls``)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from mcp_server.http import StreamableHTTPTransport

from .http_apps import build_server


@csrf_exempt
async def mcp_view(request: HttpRequest) -> HttpResponse:
    transport = StreamableHTTPTransport(build_server(request.headers.get("x-tenant", "anonymous")),
                                        stateless=True)
    status, headers, body = await transport.handle_request(request)
    return HttpResponse(body, status=status, headers=dict(headers))


@csrf_exempt
def sync_mcp_view(request: HttpRequest) -> HttpResponse:
    """The same in a plain ``def`` view (WSGI, say)."""
    transport = StreamableHTTPTransport(build_server(request.headers.get("x-tenant", "anonymous")),
                                        stateless=True)
    status, headers, body = async_to_sync(transport.handle_request)(request)
    return HttpResponse(body, status=status, headers=dict(headers))


urlpatterns = [path("view/mcp", mcp_view), path("sync-view/mcp", sync_mcp_view)]
