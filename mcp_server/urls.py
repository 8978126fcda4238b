"""Pages of the MCP server app that live in admin. Include them before admin's own URLs (whose
catch-all would answer first), under admin's prefix:

    path("admin/mcp_server/", include("mcp_server.urls")),
    path("admin/", admin.site.urls),
"""

from django.contrib import admin
from django.urls import path

from .try_it.views import try_tool

urlpatterns = [
    # Only staff reach it (admin_view); the view also asks for PERMISSION.
    path("try/<str:name>/", admin.site.admin_view(try_tool), name="mcp_server_try_it"),
]
