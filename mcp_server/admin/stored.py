"""Admin of prompts, resources, resource templates and skills defined with no code
(``StoredPrompt``, ``StoredResource``, ``StoredResourceTemplate``, ``StoredSkill``). Their forms
refuse what the registry could not serve, with the message on the field at fault."""

from __future__ import annotations

import mimetypes
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ..extensions.skills.catalog import SkillFileResource, stored_skill
from ..extensions.skills.loading import SkillError
from ..models import StoredPrompt, StoredResource, StoredResourceTemplate, StoredSkill
from ..registry.stored import check_prompt, check_resource_template
from ..site import get_server
from .common import JSONText, RestrictedForm, SwitchActions, json_area, restriction, server_name

_RESTRICTION = ("Who may see it", {"fields": ["permission", "groups"],
                                   "description": "No permission and no group: anyone. Disabled: nobody."})


class StoredForm(RestrictedForm):
    """A row whose key (``key_field``) must be free: not registered in code (code wins), and not
    another row of the same server (the database's unique constraint, said on the field)."""

    key_field = ""
    registry = ""  # the server's dict that code registers into
    what = ""

    def clean(self) -> dict:
        cleaned = super().clean()
        key = cleaned.get(self.key_field)
        if key:
            if key in getattr(get_server(), self.registry):
                self.add_error(self.key_field, f"Code already registers a {self.what} {key!r} (code "
                                               "wins): choose another, or shape that one under "
                                               "Registered primitives.")
            elif type(self.instance).objects.filter(server=self.instance.server, **{self.key_field: key}) \
                    .exclude(pk=self.instance.pk).exists():
                self.add_error(self.key_field, f"Another {self.what} is already {key!r}.")
        return cleaned


class StoredPromptForm(StoredForm):
    key_field, registry, what = "name", "prompts", "prompt"
    arguments = JSONText(
        required=False, widget=json_area(6),
        help_text='A JSON list of the arguments a client passes; each needs a name (letters, digits, '
                  '_) and may have a description and "required". Example: [{"name": "topic", '
                  '"description": "What to write about", "required": true}]. Empty: none.')
    messages = JSONText(
        widget=json_area(8),
        error_messages={"required": 'Give at least one message: [{"role": "user", "text": "..."}].'},
        help_text='A JSON list of the messages the prompt returns, each a role ("user" or '
                  '"assistant") and a text in which {argument} is replaced by that argument\'s value '
                  '(write {{ and }} for braces). Example: [{"role": "user", "text": "Write a haiku '
                  'about {topic}."}].')

    class Meta:
        model = StoredPrompt
        fields = ["name", "title", "description", "arguments", "messages", "enabled", "permission",
                  "groups"]

    def clean_arguments(self) -> Any:
        value = self.cleaned_data.get("arguments")
        return [] if value is None else value

    def clean(self) -> dict:
        cleaned = super().clean()
        arguments, messages = cleaned.get("arguments"), cleaned.get("messages")
        if "arguments" in self.errors or "messages" in self.errors:
            return cleaned
        try:
            check_prompt(arguments, messages)
        except ValueError as exc:
            # Which field is at fault: the arguments alone, checked with a message that uses none.
            try:
                check_prompt(arguments, [{"role": "user", "text": ""}])
            except ValueError:
                self.add_error("arguments", str(exc))
            else:
                self.add_error("messages", str(exc))
        return cleaned


class StoredResourceForm(StoredForm):
    key_field, registry, what = "uri", "resources", "resource with the URI"

    class Meta:
        model = StoredResource
        fields = ["uri", "name", "title", "description", "mime_type", "text", "file", "enabled",
                  "permission", "groups"]
        help_texts = {
            "uri": "The resource's URI, for example docs://handbook/holidays.",
            "mime_type": "For example text/markdown, or application/pdf for an uploaded PDF "
                         "(empty: guessed from the uploaded file's name).",
            "text": "The resource's text, or leave it empty and upload a file.",
            "file": "The resource's content as a file (binary files are sent base64-encoded), "
                    "instead of a text.",
        }

    def clean(self) -> dict:
        cleaned = super().clean()
        has_text, upload = bool(cleaned.get("text")), cleaned.get("file")
        if has_text and upload:
            self.add_error("file", "A resource is a text or a file, not both: empty the text or clear "
                                   "the file.")
        elif not has_text and not upload and "file" not in self.errors:
            self.add_error("text", "Give the resource a text, or upload a file.")
        if upload and not cleaned.get("mime_type"):
            cleaned["mime_type"] = mimetypes.guess_type(upload.name)[0] or "application/octet-stream"
        return cleaned


class StoredResourceTemplateForm(StoredForm):
    key_field, registry, what = "uri_template", "resource_templates", "resource template"

    class Meta:
        model = StoredResourceTemplate
        fields = ["uri_template", "name", "title", "description", "mime_type", "text", "enabled",
                  "permission", "groups"]
        help_texts = {
            "uri_template": "An RFC 6570 URI template with at least one {variable}, for example "
                            "weather://{city}/today.",
            "text": "The text a read returns; {variable} is replaced by the URI's value, for example "
                    "\"The weather in {city} today.\" (write {{ and }} for braces).",
        }

    def clean(self) -> dict:
        cleaned = super().clean()
        uri_template, text = cleaned.get("uri_template"), cleaned.get("text")
        if uri_template is None or text is None:
            return cleaned
        try:
            check_resource_template(uri_template, text)
        except ValueError as exc:
            try:  # the URI template alone: a text with no placeholder
                check_resource_template(uri_template, "")
            except ValueError:
                self.add_error("uri_template", str(exc))
            else:
                self.add_error("text", str(exc))
        return cleaned


class StoredSkillForm(RestrictedForm):
    files = JSONText(
        required=False, widget=json_area(6),
        help_text='A JSON object of the supporting files, relative path to text. Example: '
                  '{"references/FORMS.md": "# Forms\\n..."}. Empty: none.')

    class Meta:
        model = StoredSkill
        fields = ["name", "description", "instructions", "files", "enabled", "permission", "groups"]
        help_texts = {
            "name": "1-64 lowercase letters, digits and single hyphens, for example pdf-forms; the "
                    "skill is served at skill://<name>/SKILL.md.",
            "description": "What the skill does and when to use it (a host shows it to its model).",
        }

    def clean_files(self) -> Any:
        value = self.cleaned_data.get("files")
        return {} if value is None else value

    def clean(self) -> dict:
        cleaned = super().clean()
        name = cleaned.get("name")
        if not name or any(field in self.errors for field in ("files", "description", "instructions")):
            return cleaned
        if any(isinstance(r, SkillFileResource) and r.skill.name == name
               for r in get_server().resources.values()):
            self.add_error("name", f"A skill folder already serves {name!r} (folders win): choose another.")
            return cleaned
        if StoredSkill.objects.filter(server=self.instance.server, name=name) \
                .exclude(pk=self.instance.pk).exists():
            self.add_error("name", f"Another skill is already {name!r}.")
            return cleaned
        row = StoredSkill(name=name, description=cleaned.get("description") or "",
                          instructions=cleaned.get("instructions") or "", files=cleaned.get("files"))
        try:
            stored_skill(row)
        except SkillError as exc:
            message = str(exc).split(": ", 1)[-1]
            field = "files" if "file" in message else ("name" if "name" in message else "description")
            self.add_error(field, message)
        return cleaned


class StoredAdmin(SwitchActions):
    """What the three share: the default server's rows, read-only ``server``, the switches."""

    list_filter = ["enabled"]
    filter_horizontal = ["groups"]
    readonly_fields = ["server", "updated_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(server=server_name()).prefetch_related("groups")


@admin.register(StoredPrompt)
class StoredPromptAdmin(StoredAdmin):
    form = StoredPromptForm
    list_display = ["name", "title", "enabled", restriction]
    search_fields = ["name", "title"]
    ordering = ["name"]
    fieldsets = [(None, {"fields": ["server", "name", "title", "description", "arguments", "messages",
                                    "enabled"]}), _RESTRICTION, (None, {"fields": ["updated_at"]})]

    def list_of(self, row: Any) -> str:
        return "prompts"


@admin.register(StoredResource)
class StoredResourceAdmin(StoredAdmin):
    form = StoredResourceForm
    list_display = ["uri", "name", "mime_type", "content", "enabled", restriction]
    search_fields = ["uri", "name"]
    ordering = ["uri"]
    fieldsets = [(None, {"fields": ["server", "uri", "name", "title", "description", "mime_type", "text",
                                    "file", "enabled"]}), _RESTRICTION, (None, {"fields": ["updated_at"]})]

    @admin.display(description="content")
    def content(self, row: StoredResource) -> str:
        return f"file {row.file.name}" if row.file else f"text ({len(row.text)} characters)"

    def list_of(self, row: Any) -> str:
        return "resources"


@admin.register(StoredResourceTemplate)
class StoredResourceTemplateAdmin(StoredAdmin):
    form = StoredResourceTemplateForm
    list_display = ["uri_template", "name", "mime_type", "enabled", restriction]
    search_fields = ["uri_template", "name"]
    ordering = ["uri_template"]
    fieldsets = [(None, {"fields": ["server", "uri_template", "name", "title", "description", "mime_type",
                                    "text", "enabled"]}), _RESTRICTION, (None, {"fields": ["updated_at"]})]

    def list_of(self, row: Any) -> str:
        return "resources"


@admin.register(StoredSkill)
class StoredSkillAdmin(StoredAdmin):
    form = StoredSkillForm
    list_display = ["name", "description", "file_count", "enabled", restriction]
    search_fields = ["name", "description"]
    ordering = ["name"]
    fieldsets = [(None, {"fields": ["server", "name", "description", "instructions", "files", "enabled"]}),
                 _RESTRICTION, (None, {"fields": ["updated_at"]})]

    @admin.display(description="files")
    def file_count(self, row: StoredSkill) -> int:
        return 1 + len(row.files or {})

    def list_of(self, row: Any) -> str:
        return "resources"
