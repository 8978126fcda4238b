"""The authorization server's URLs; include them at the site's root:

    path("", include("mcp_server.authorization_server.urls")),

The namespace is the toolkit's (``oauth2_provider``), whose views reverse their URLs by it. The
login page the consent page sends a visitor to is here too (``oauth/login/``), unless
``MCP_SERVER["AUTHORIZATION_SERVER"]["LOGIN_URL"]`` names another.
"""

from django.urls import path

from . import views
from .login import LoginView

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", views.ServerMetadataView.as_view(),
         name="oauth-server-metadata"),
    # RFC 8414 section 3.1: an issuer with a path has its metadata at the well-known URL + that path.
    path(".well-known/oauth-authorization-server/<path:issuer_path>", views.ServerMetadataView.as_view(),
         name="oauth-server-metadata-issuer"),
    path("oauth/authorize/", views.AuthorizationView.as_view(), name="authorize"),
    path("oauth/login/", LoginView.as_view(), name="login"),
    path("oauth/token/", views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", views.RegistrationView.as_view(), name="dcr-register"),
    path("oauth/register/<str:client_id>/", views.RegistrationManagementView.as_view(),
         name="dcr-register-management"),
]
