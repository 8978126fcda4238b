from django.contrib import admin
from django.urls import include, path

from mcp_server.authorization_server.login import LoginView

urlpatterns = [
    # Before admin's own URLs: admin answers anything under admin/ it does not know with a 404.
    path("admin/mcp_server/", include("mcp_server.urls")),
    path("admin/", admin.site.urls),
    # The REST API of the registry, sessions and background calls (docs/rest_api.md).
    path("api/mcp/", include("mcp_server.api.urls")),
    # The OAuth 2.1 authorization server (docs/authorization_server.md), always mounted: its
    # metadata at /.well-known/oauth-authorization-server, its endpoints under /oauth/. The MCP
    # endpoint asks for a token only when MCP_SERVER["AUTHENTICATION_CLASSES"] says so.
    path("", include("mcp_server.authorization_server.urls")),
    # The login page the consent page sends a visitor to, with wrong passwords counted per account
    # and address (MCP_SERVER["AUTHORIZATION_SERVER"]["LOGIN_FAILURE_RATE"]).
    path("accounts/login/", LoginView.as_view(template_name="registration/login.html"), name="login"),
]
