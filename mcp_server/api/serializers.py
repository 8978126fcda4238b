"""Serializers of the rows the API edits or shows: prompts, resources and resource templates
defined in admin, sessions and background calls."""

from __future__ import annotations

import mimetypes
from typing import Any

from django.contrib.auth.models import Group
from rest_framework import serializers

from ..models import Session, StoredPrompt, StoredResource, StoredResourceTemplate, ToolCall
from ..site import get_server
from . import validation

RESTRICTED_FIELDS = ["enabled", "permission", "groups", "updated_at"]


class StoredSerializer(serializers.ModelSerializer):
    """A row defined in admin: the server it belongs to is the project's default server."""

    # The field naming the row (unique per server), and what to call it in messages.
    key_field = "name"
    what = "A prompt"
    registry = "prompts"

    groups = serializers.SlugRelatedField(slug_field="name", queryset=Group.objects.all(), many=True,
                                          required=False)

    class Meta:
        read_only_fields = ["updated_at"]
        # The unique constraints are checked in validate(), with a message on the field.
        validators: list = []

    def validate_permission(self, value: str) -> str:
        return validation.permission(value)

    def validate(self, attrs: dict) -> dict:
        key = self.value_of(attrs, self.key_field)
        if key is not None and (self.instance is None or self.key_field in attrs):
            try:
                validation.not_registered_in_code(self.registry, key, self.what)
                validation.unique(self.Meta.model, self.key_field, key, get_server().name, self.instance,
                                  self.what)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({self.key_field: exc.detail}) from None
        return attrs

    def value_of(self, attrs: dict, field: str) -> Any:
        """The field's value after this change (a partial update keeps the row's)."""
        if field in attrs:
            return attrs[field]
        return getattr(self.instance, field, None)


class StoredPromptSerializer(StoredSerializer):
    class Meta(StoredSerializer.Meta):
        model = StoredPrompt
        fields = ["id", "name", "title", "description", "arguments", "messages", *RESTRICTED_FIELDS]

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        validation.prompt(self.value_of(attrs, "arguments") or [], self.value_of(attrs, "messages"))
        return attrs


class StoredResourceSerializer(StoredSerializer):
    key_field, what, registry = "uri", "A resource", "resources"

    class Meta(StoredSerializer.Meta):
        model = StoredResource
        fields = ["id", "uri", "name", "title", "description", "mime_type", "text", "file",
                  *RESTRICTED_FIELDS]
        # null (or an empty value in a form) removes the file; it is shown by its name in storage
        # (the project's MEDIA settings), as nothing serves it but MCP's resources/read.
        extra_kwargs = {"file": {"allow_null": True, "use_url": False},
                        "mime_type": {"help_text": "Guessed from the file's name when a file comes "
                                                   "without one; text/plain otherwise."}}

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if "file" in attrs and not attrs["file"]:
            attrs["file"] = ""
        text, file = self.value_of(attrs, "text"), self.value_of(attrs, "file")
        if text and file:
            raise serializers.ValidationError(
                {"file": ["A resource has a text or a file, not both: remove one."]})
        if not text and not file:
            raise serializers.ValidationError({"text": ["A resource needs a text or a file."]})
        if attrs.get("file") and "mime_type" not in attrs:
            attrs["mime_type"] = mimetypes.guess_type(attrs["file"].name)[0] or "application/octet-stream"
        return attrs


class StoredResourceTemplateSerializer(StoredSerializer):
    key_field, what, registry = "uri_template", "A resource template", "resource_templates"

    class Meta(StoredSerializer.Meta):
        model = StoredResourceTemplate
        fields = ["id", "uri_template", "name", "title", "description", "mime_type", "text",
                  *RESTRICTED_FIELDS]

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        validation.resource_template(self.value_of(attrs, "uri_template"), self.value_of(attrs, "text"))
        return attrs


class OwnerField(serializers.CharField):
    """The owning user's username (null: anonymous)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: Any) -> str:
        return value.get_username()


class SessionSerializer(serializers.ModelSerializer):
    client_name = serializers.SerializerMethodField()
    client_version = serializers.SerializerMethodField()
    owner = OwnerField()

    class Meta:
        model = Session
        fields = ["id", "client_name", "client_version", "protocol_version", "owner", "origin",
                  "created_at", "last_activity"]

    def get_client_name(self, session: Session) -> str | None:
        return (session.client_info or {}).get("name")

    def get_client_version(self, session: Session) -> str | None:
        return (session.client_info or {}).get("version")


class ToolCallSerializer(serializers.ModelSerializer):
    owner = OwnerField()

    class Meta:
        model = ToolCall
        fields = ["id", "tool", "arguments", "session_id", "owner", "state", "task", "input_requests",
                  "progress", "total", "message", "worker", "cancel_requested", "attempts", "error",
                  "created_at", "started_at", "finished_at"]
        read_only_fields = fields
