"""The API's views: DRF viewsets, each needing the Django model permission of what it touches."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.http import Http404
from rest_framework import filters, mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.schemas.openapi import AutoSchema

from ..background.launch import cancel_call
from ..models import PrimitiveSetting, Session, StoredPrompt, StoredResource, StoredResourceTemplate, ToolCall
from ..site import get_server, get_transport
from . import registered
from .permissions import ModelPermissions
from .serializers import (
    SessionSerializer,
    StoredPromptSerializer,
    StoredResourceSerializer,
    StoredResourceTemplateSerializer,
    ToolCallSerializer,
)


class RegisteredViewSet(mixins.RetrieveModelMixin, mixins.UpdateModelMixin, viewsets.GenericViewSet):
    """What code registers, with its settings; PATCH changes them (the row is made on the first
    change, and the save announces the change to every session of every process)."""

    kind: registered.Kind
    permission_classes = [ModelPermissions]
    queryset = PrimitiveSetting.objects.none()  # the model whose permissions apply
    http_method_names = ["get", "patch", "head", "options"]
    lookup_value_regex = ".+"  # URIs hold slashes

    def get_queryset(self) -> Any:
        return PrimitiveSetting.objects.filter(server=get_server().name, kind=self.kind.setting) \
            .prefetch_related("groups")

    def code(self) -> dict[str, Any]:
        return getattr(get_server(), self.kind.registry)

    def list(self, request: Request) -> Response:
        server_name = get_server().name
        settings = {row.name: row for row in self.get_queryset()}
        items = [registered.with_setting(self.kind, server_name, key, primitive, settings.get(key))
                 for key, primitive in sorted(self.code().items())]
        page = self.paginate_queryset(items)
        if page is not None:
            return self.get_paginated_response(self.get_serializer(page, many=True).data)
        return Response(self.get_serializer(items, many=True).data)

    def get_object(self) -> PrimitiveSetting:
        key = self.kwargs[self.lookup_field]
        primitive = self.code().get(key)
        if primitive is None:
            raise Http404
        setting = self.get_queryset().filter(name=key).first()
        item = registered.with_setting(self.kind, get_server().name, key, primitive, setting)
        self.check_object_permissions(self.request, item)
        return item

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        with transaction.atomic():
            serializer.save()


def _registered(kind: registered.Kind, serializer: type, name: str, label: str) -> type:
    return type(f"Registered{name}ViewSet", (RegisteredViewSet,), {
        "kind": kind, "serializer_class": serializer, "lookup_field": kind.key,
        "schema": AutoSchema(operation_id_base=f"Registered{name}", component_name=f"Registered{name}",
                             tags=["registered"]),
        "__doc__": f"The {label} registered in code, with their settings (PATCH changes them).",
    })


ToolViewSet = _registered(registered.TOOL, registered.ToolSettingSerializer, "Tool", "tools")
RegisteredPromptViewSet = _registered(registered.PROMPT, registered.SettingSerializer, "Prompt", "prompts")
RegisteredResourceViewSet = _registered(registered.RESOURCE, registered.ResourceSettingSerializer,
                                        "Resource", "resources")
RegisteredResourceTemplateViewSet = _registered(
    registered.RESOURCE_TEMPLATE, registered.ResourceTemplateSettingSerializer, "ResourceTemplate",
    "resource templates")


class StoredViewSet(viewsets.ModelViewSet):
    """Rows defined in admin, of the project's default server."""

    permission_classes = [ModelPermissions]

    def get_queryset(self) -> Any:
        model = self.get_serializer_class().Meta.model
        return model.objects.filter(server=get_server().name).prefetch_related("groups").order_by("pk")

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        with transaction.atomic():
            serializer.save(server=get_server().name)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        with transaction.atomic():
            serializer.save()


class StoredPromptViewSet(StoredViewSet):
    """Prompts defined in admin: arguments, and messages with {argument} placeholders."""

    queryset = StoredPrompt.objects.none()
    serializer_class = StoredPromptSerializer
    schema = AutoSchema(tags=["prompts"])


class StoredResourceViewSet(StoredViewSet):
    """Resources defined in admin: a text, or an uploaded file (multipart) with its MIME type."""

    queryset = StoredResource.objects.none()
    serializer_class = StoredResourceSerializer
    schema = AutoSchema(tags=["resources"])


class StoredResourceTemplateViewSet(StoredViewSet):
    """Resource templates defined in admin: a URI template whose {variables} fill the text."""

    queryset = StoredResourceTemplate.objects.none()
    serializer_class = StoredResourceTemplateSerializer
    schema = AutoSchema(tags=["resources"])


class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                     viewsets.GenericViewSet):
    """The sessions of the server's clients, most recently active first; DELETE terminates one
    everywhere: its row goes, and every process ends its streams and requests."""

    permission_classes = [ModelPermissions]
    queryset = Session.objects.none()
    serializer_class = SessionSerializer
    schema = AutoSchema(tags=["sessions"])

    def get_queryset(self) -> Any:
        return Session.objects.filter(server=get_transport().group).select_related("owner") \
            .order_by("-last_activity")

    def perform_destroy(self, instance: Session) -> None:
        terminate(instance.id)


def terminate(session_id: str) -> None:
    """End a session everywhere, as a client's DELETE does (``http.get.handle_delete``)."""
    async_to_sync(get_transport().end_session)(session_id)


class StateFilter(filters.BaseFilterBackend):
    """``?state=running``: only the calls in that state."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        state = request.query_params.get("state")
        if not state:
            return queryset
        if state not in ToolCall.State.values:
            raise serializers.ValidationError(
                {"state": [f"Unknown state {state!r}: one of {', '.join(ToolCall.State.values)}."]})
        return queryset.filter(state=state)

    def get_schema_operation_parameters(self, view: Any) -> list[dict]:
        return [{"name": "state", "in": "query", "required": False,
                 "description": "Only the calls in this state.",
                 "schema": {"type": "string", "enum": list(ToolCall.State.values)}}]


class TaskFilter(filters.BaseFilterBackend):
    """``?task=true``: only the calls clients hold as tasks (the Tasks extension); ``false``: the others."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        value = request.query_params.get("task")
        if not value:
            return queryset
        if value not in ("true", "false"):
            raise serializers.ValidationError({"task": [f"Must be true or false, not {value!r}."]})
        return queryset.filter(task=value == "true")

    def get_schema_operation_parameters(self, view: Any) -> list[dict]:
        return [{"name": "task", "in": "query", "required": False,
                 "description": "Only the calls held as tasks (true), or only the others (false).",
                 "schema": {"type": "string", "enum": ["true", "false"]}}]


class ToolCallViewSet(viewsets.ReadOnlyModelViewSet):
    """Background tool calls, newest first; ``POST .../cancel/`` cancels one wherever it runs."""

    permission_classes = [ModelPermissions]
    queryset = ToolCall.objects.none()
    serializer_class = ToolCallSerializer
    filter_backends = [StateFilter, TaskFilter]
    schema = AutoSchema(tags=["calls"])

    def get_queryset(self) -> Any:
        return ToolCall.objects.filter(server=get_transport().group).select_related("owner") \
            .order_by("-created_at")

    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the call: the tool sees its flag wherever it runs, and a call still queued never
        starts. The call as it is then (one that had already ended stays as it was)."""
        call = self.get_object()
        call = async_to_sync(cancel_call)(get_transport(), call.id)
        if call is None:  # deleted meanwhile
            raise Http404
        return Response(self.get_serializer(call).data)
