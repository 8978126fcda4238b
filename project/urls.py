from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The REST API of the registry, sessions and background calls (README, "REST API").
    path("api/mcp/", include("mcp_server.api.urls")),
]
