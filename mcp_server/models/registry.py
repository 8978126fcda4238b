"""The registry as administrators shape it: switches and overrides for what code registers, and
prompts and resources defined with no code at all. Every process reads them (``mcp_server.registry``)."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models

from .sessions import CompactJSONEncoder


class Restricted(models.Model):
    """Who may see an entry: anyone (no permission, no group), else a user holding ``permission``
    and, when groups are named, belonging to one of them. Disabled, nobody sees it."""

    server = models.CharField(max_length=100, db_index=True,
                              help_text="The MCP server's name (MCP_SERVER['NAME']).")
    enabled = models.BooleanField(default=True)
    permission = models.CharField(
        max_length=255, blank=True, default="",
        help_text='A Django permission the user must hold, as "app_label.codename".')
    groups = models.ManyToManyField(Group, blank=True, related_name="+",
                                    help_text="If any, the user must belong to one of them.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class PrimitiveSetting(Restricted):
    """An administrator's switch and overrides for one tool, prompt, resource or resource template
    registered in code (blank fields keep what the code says)."""

    class Kind(models.TextChoices):
        TOOL = "tool"
        PROMPT = "prompt"
        RESOURCE = "resource"
        RESOURCE_TEMPLATE = "resource_template", "resource template"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    # The tool or prompt name, the resource URI, or the template's URI template.
    name = models.CharField(max_length=1024)
    title = models.CharField(max_length=255, blank=True, default="")
    description = models.TextField(blank=True, default="")
    # Tools only: replaces the code's annotations when set (snake_case or camelCase hints).
    annotations = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    # Tools only (curation, mcp_server.primitives.curated): the name clients see and call instead
    # of the code's; arguments left out of the input schema, the handler's default applying
    # (["name", ...]); arguments left out of it and always passed with a value ({"name": value}).
    exposed_name = models.CharField(max_length=128, blank=True, default="")
    hidden_arguments = models.JSONField(default=list, blank=True, encoder=CompactJSONEncoder)
    fixed_arguments = models.JSONField(default=dict, blank=True, encoder=CompactJSONEncoder)

    class Meta:
        verbose_name = "registered primitive"
        constraints = [models.UniqueConstraint(fields=["server", "kind", "name"],
                                               name="mcp_primitive_setting_unique")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name}"


class Described(Restricted):
    """What a primitive defined in admin says of itself."""

    name = models.CharField(max_length=255)
    title = models.CharField(max_length=255, blank=True, default="")
    description = models.TextField(blank=True, default="")

    class Meta:
        abstract = True


class StoredPrompt(Described):
    """A prompt defined in admin: its arguments, and messages whose ``{argument}`` placeholders
    are filled from the arguments of ``prompts/get``."""

    # [{"name", "description"?, "required"?}]
    arguments = models.JSONField(default=list, blank=True, encoder=CompactJSONEncoder)
    # [{"role": "user" | "assistant", "text": "... {argument} ..."}]
    messages = models.JSONField(default=list, encoder=CompactJSONEncoder)

    class Meta:
        verbose_name = "prompt"
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="mcp_stored_prompt_unique")]

    def __str__(self) -> str:
        return self.name


class StoredResource(Described):
    """A resource defined in admin: a text, or an uploaded file with its MIME type."""

    uri = models.CharField(max_length=1024)
    mime_type = models.CharField(max_length=255, blank=True, default="text/plain")
    text = models.TextField(blank=True, default="")
    file = models.FileField(upload_to="mcp_resources/", blank=True)

    class Meta:
        verbose_name = "resource"
        constraints = [models.UniqueConstraint(fields=["server", "uri"], name="mcp_stored_resource_unique")]

    def __str__(self) -> str:
        return self.uri


class StoredResourceTemplate(Described):
    """A resource template defined in admin: a URI template whose ``{variables}`` fill the text."""

    uri_template = models.CharField(max_length=1024)
    mime_type = models.CharField(max_length=255, blank=True, default="text/plain")
    text = models.TextField(help_text="The resource's text; {variable} is replaced by the URI's value.")

    class Meta:
        verbose_name = "resource template"
        constraints = [models.UniqueConstraint(fields=["server", "uri_template"],
                                               name="mcp_stored_template_unique")]

    def __str__(self) -> str:
        return self.uri_template


class StoredSkill(Described):
    """A skill (SEP-2640) defined in admin: its ``SKILL.md`` is made of the name, the description
    and the instructions; ``files`` are its supporting files, relative path -> text."""

    instructions = models.TextField(help_text="The body of SKILL.md, after its frontmatter (Markdown).")
    # {"references/FORMS.md": "..."}: plain relative paths inside the skill.
    files = models.JSONField(default=dict, blank=True, encoder=CompactJSONEncoder,
                             help_text='Supporting files: {"relative/path.md": "text", ...}.')

    class Meta:
        verbose_name = "skill"
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="mcp_stored_skill_unique")]

    def __str__(self) -> str:
        return self.name
