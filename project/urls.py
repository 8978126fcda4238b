from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    # Before admin's own URLs: admin answers anything under admin/ it does not know with a 404.
    path("admin/mcp_server/", include("mcp_server.urls")),
    path("admin/", admin.site.urls),
    # The REST API of the registry, sessions and background calls (docs/rest_api.md).
    path("api/mcp/", include("mcp_server.api.urls")),
    # The OAuth 2.1 authorization server (docs/authorization_server.md), always mounted: its
    # metadata at /.well-known/oauth-authorization-server, its endpoints under /oauth/. The MCP
    # endpoint asks for a token only when MCP_SERVER["AUTHENTICATION_CLASSES"] says so. Its login
    # page, oauth/login/, is the app's own.
    path("", include("mcp_server.authorization_server.urls")),
]
