"""What code registers (tools, prompts, resources, resource templates), each with the settings an
administrator gave it: a ``PrimitiveSetting`` row, made on the first change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from rest_framework import serializers

from ..models import PrimitiveSetting
from ..registry import curation
from ..site import get_server
from . import validation


@dataclass(frozen=True)
class Kind:
    """One kind of registered primitive: its ``PrimitiveSetting.kind``, the server's dict of them
    (``server.tools``...), and the field naming it in the API (its key in that dict)."""

    setting: str
    registry: str
    key: str


TOOL = Kind("tool", "tools", "name")
PROMPT = Kind("prompt", "prompts", "name")
RESOURCE = Kind("resource", "resources", "uri")
RESOURCE_TEMPLATE = Kind("resource_template", "resource_templates", "uri_template")


def with_setting(kind: Kind, server_name: str, key: str, primitive: Any,
                 setting: PrimitiveSetting | None) -> PrimitiveSetting:
    """The primitive's setting row, unsaved (all defaults) when it has none yet; the primitive
    rides along as ``.primitive`` for the serializer."""
    if setting is None:
        setting = PrimitiveSetting(server=server_name, kind=kind.setting, name=key)
    setting.primitive = primitive
    return setting


class CodeSerializer(serializers.Serializer):
    """What the code says (what a blank override keeps)."""

    title = serializers.CharField(allow_null=True, read_only=True)
    description = serializers.CharField(allow_null=True, read_only=True)


class CodeToolSerializer(CodeSerializer):
    annotations = serializers.JSONField(allow_null=True, read_only=True)


class CodeResourceSerializer(CodeSerializer):
    name = serializers.CharField(read_only=True)
    mime_type = serializers.CharField(allow_null=True, read_only=True)


class SettingSerializer(serializers.ModelSerializer):
    """A registered prompt's settings (the base of the other kinds'): enabled, overrides (blank:
    the code's), restriction (a permission, groups by name)."""

    name = serializers.CharField(read_only=True)
    code = CodeSerializer(source="primitive", read_only=True)
    groups = serializers.SlugRelatedField(slug_field="name", queryset=Group.objects.all(), many=True,
                                          required=False)
    # Null until an administrator first changes something.
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)

    class Meta:
        model = PrimitiveSetting
        fields = ["name", "code", "enabled", "title", "description", "permission", "groups", "updated_at"]

    def validate_permission(self, value: str) -> str:
        return validation.permission(value)


class ToolSettingSerializer(SettingSerializer):
    code = CodeToolSerializer(source="primitive", read_only=True)

    class Meta(SettingSerializer.Meta):
        fields = ["name", "code", "enabled", "exposed_name", "title", "description", "annotations",
                  "hidden_arguments", "fixed_arguments", "permission", "groups", "updated_at"]
        extra_kwargs = {
            "annotations": {"help_text": "Replaces the code's annotations when set (snake_case or "
                                         "camelCase hints); null keeps them."},
            "exposed_name": {"help_text": "The name clients see and call instead of the code's "
                                          "(blank: keep it)."},
            "hidden_arguments": {"help_text": "Argument names left out of the input schema; the "
                                              "tool's default applies."},
            "fixed_arguments": {"help_text": "Arguments left out of the input schema and always "
                                             "passed with these values."},
        }

    def validate_annotations(self, value: Any) -> Any:
        return validation.annotations(value)

    def validate_exposed_name(self, value: str) -> str:
        row = self.instance
        return validation.curated(curation.exposed_name, value, code_name=row.name,
                                  registered=get_server().tools, server_name=row.server, pk=row.pk)

    def validate_hidden_arguments(self, value: Any) -> list:
        return validation.curated(curation.hidden_arguments, value)

    def validate_fixed_arguments(self, value: Any) -> dict:
        return validation.curated(curation.fixed_arguments, value)

    def validate(self, attrs: dict) -> dict:
        row = self.instance
        hidden = attrs.get("hidden_arguments", row.hidden_arguments)
        fixed = attrs.get("fixed_arguments", row.fixed_arguments)
        validation.curated(curation.arguments, getattr(row, "primitive", None), hidden, fixed)
        return attrs


class ResourceSettingSerializer(SettingSerializer):
    name = None  # the URI names it
    uri = serializers.CharField(source="name", read_only=True)
    code = CodeResourceSerializer(source="primitive", read_only=True)

    class Meta(SettingSerializer.Meta):
        fields = ["uri", *SettingSerializer.Meta.fields[1:]]


class ResourceTemplateSettingSerializer(ResourceSettingSerializer):
    uri = None
    uri_template = serializers.CharField(source="name", read_only=True)

    class Meta(SettingSerializer.Meta):
        fields = ["uri_template", *SettingSerializer.Meta.fields[1:]]
