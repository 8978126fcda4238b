"""Where skills come from, and how they become resources of the registry.

Folders are found the way Django finds templates: each installed app's ``skills/`` folder, in
``INSTALLED_APPS`` order, then the folders ``MCP_SERVER["SKILLS_DIRS"]`` lists; the first skill of
a name wins. They are read when the default server is built (start-up, or a settings change).
Skills defined in admin (``StoredSkill``) join them in each registry snapshot, so a change made
there reaches every process as a change of the resources list does. A skill that cannot be
served is left out and logged (``manage.py check`` names it too: mcp_server.E060).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.apps import apps

from ...primitives.resource import Resource
from ...settings import mcp_settings
from .loading import SKILL_FILE, Skill, SkillError, build, read_folder, skill_md

logger = logging.getLogger("mcp_server.skills")
FOLDER = "skills"


class SkillFileResource(Resource):
    """One file of a skill as a resource at ``skill://<name>/<path>``: only ``SKILL.md`` is
    listed (named and described by its frontmatter); the others are named by its manifest."""

    def __init__(self, skill: Skill, path: str):
        file = skill.files[path]
        main = path == SKILL_FILE
        self.skill = skill
        self.path = path
        super().__init__(uri=skill.file_uri(path), name=skill.name if main else path,
                         description=skill.description if main else None, mime_type=file.mime_type,
                         size=file.size, listed=main, handler=self._contents)

    def _contents(self) -> str | bytes:
        file = self.skill.files[self.path]
        text = file.text()
        return text if text is not None else file.data


def limits() -> dict[str, int]:
    return {"max_files": mcp_settings.SKILLS_MAX_FILES, "max_bytes": mcp_settings.SKILLS_MAX_BYTES}


def folders() -> list[Path]:
    """Every folder that may hold skills, in the order they are searched."""
    found = [Path(app.path) / FOLDER for app in apps.get_app_configs()]
    found += [Path(folder) for folder in mcp_settings.SKILLS_DIRS]
    return [folder for folder in found if folder.is_dir()]


def folder_skills(errors: list[str] | None = None) -> list[Skill]:
    """The skills of every folder, the first of each name; those that fail go to ``errors``
    (logged when None)."""
    skills: dict[str, Skill] = {}
    for folder in folders():
        for candidate in sorted(folder.iterdir()):
            if not candidate.is_dir() or candidate.is_symlink() or candidate.name.startswith(".") \
                    or candidate.name in skills:
                continue
            try:
                skills[candidate.name] = read_folder(candidate, **limits())
            except (SkillError, OSError) as exc:
                _failed(errors, f"the skill in {candidate} is not served: {exc}")
    return list(skills.values())


def stored_skill(row: Any) -> Skill:
    """The skill an admin row defines."""
    files = {SKILL_FILE: skill_md(row.name, row.description, row.instructions)}
    if not isinstance(row.files, dict):
        raise SkillError("files must be an object of relative path -> text")
    for path, text in row.files.items():
        if path == SKILL_FILE or not isinstance(text, str):
            raise SkillError(f"file {path!r}: give a text, and not another {SKILL_FILE}")
        files[path] = text.encode()
    return build(row.name, files, f"admin skill {row.name!r}", stored_id=row.pk, **limits())


def resources_of(skill: Skill) -> dict[str, SkillFileResource]:
    return {skill.file_uri(path): SkillFileResource(skill, path) for path in skill.files}


def _failed(errors: list[str] | None, message: str) -> None:
    if errors is None:
        logger.error("%s", message)
    else:
        errors.append(message)


class SkillRegistry:
    """:class:`~mcp_server.ports.RegistryContributor`: the skills, as resources of the default
    server (when it declares the extension)."""

    def server_built(self, server: Any) -> None:
        from . import Skills

        if not Skills.server_supports(server.capabilities):
            return
        for skill in folder_skills():
            for resource in resources_of(skill).values():
                server.add_resource(resource)

    def stored_entries(self, server: Any) -> dict[str, dict[str, tuple[Any, Any]]]:
        from ...models import StoredSkill
        from . import Skills

        if not Skills.server_supports(server.capabilities):
            return {}
        taken = {r.skill.name for r in server.resources.values() if isinstance(r, SkillFileResource)}
        entries: dict[str, tuple[Any, Any]] = {}
        for row in StoredSkill.objects.filter(server=server.name, enabled=True).prefetch_related("groups"):
            if row.name in taken:  # a skill in a folder wins, as code does (admin refuses it)
                continue
            try:
                skill = stored_skill(row)
            except SkillError as exc:
                logger.error("the admin skill %r is not served: %s", row.name, exc)
                continue
            entries.update((uri, (resource, row)) for uri, resource in resources_of(skill).items())
        return {"resources": entries}


def visible_skills(resources: dict[str, Any]) -> list[Skill]:
    """The skills whose SKILL.md a request may see (its registry view's resources)."""
    return [r.skill for r in resources.values() if isinstance(r, SkillFileResource) and r.path == SKILL_FILE]
