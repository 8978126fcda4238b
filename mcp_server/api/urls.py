"""The API's URLs; a project mounts them: ``path("api/mcp/", include("mcp_server.api.urls"))``."""

from __future__ import annotations

from typing import Any

from django.urls import path, reverse
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONOpenAPIRenderer
from rest_framework.routers import APIRootView, DefaultRouter
from rest_framework.schemas import get_schema_view
from rest_framework.schemas.openapi import SchemaGenerator

from . import audit, views

app_name = "mcp_api"


class RootView(APIRootView):
    """The API's endpoints (authenticated users only, whatever the project's default permission)."""

    permission_classes = [IsAuthenticated]


class Router(DefaultRouter):
    APIRootView = RootView


router = Router()
router.register("tools", views.ToolViewSet, basename="tool")
router.register("registered-prompts", views.RegisteredPromptViewSet, basename="registered-prompt")
router.register("registered-resources", views.RegisteredResourceViewSet, basename="registered-resource")
router.register("registered-resource-templates", views.RegisteredResourceTemplateViewSet,
                basename="registered-resource-template")
router.register("prompts", views.StoredPromptViewSet, basename="prompt")
router.register("resources", views.StoredResourceViewSet, basename="resource")
router.register("resource-templates", views.StoredResourceTemplateViewSet, basename="resource-template")
router.register("sessions", views.SessionViewSet, basename="session")
router.register("calls", views.ToolCallViewSet, basename="call")
router.register("audit", audit.AuditRecordViewSet, basename="audit")


class Generator(SchemaGenerator):
    """Paths under wherever the project mounted the API."""

    def get_schema(self, request: Any = None, public: bool = False) -> Any:
        self.url = reverse(f"{app_name}:api-root")
        return super().get_schema(request, public)


schema_view = get_schema_view(
    title="django-mcp-sdk API", version="1",
    description="The MCP server's registry, sessions, background calls and audit trail, as admin "
                "manages them.",
    patterns=router.urls, generator_class=Generator, renderer_classes=[JSONOpenAPIRenderer],
    permission_classes=[IsAuthenticated], public=True)

urlpatterns = [path("schema/", schema_view, name="schema"), *router.urls]
