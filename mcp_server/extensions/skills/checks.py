"""``manage.py check`` for skills: the settings, each folder skill that cannot be served
(E060), and a declaration without ``resources`` (E061), which skill files are read through."""

from __future__ import annotations

from typing import Any

from django.core import checks

from ...settings import mcp_settings


def check_skills(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The skills settings (E062), a declaration without resources (E061), and each skill folder
    that cannot be served, with the reason (E060)."""
    from . import Skills
    from .catalog import folder_skills

    errors: list[checks.CheckMessage] = []
    for key in ("SKILLS_MAX_FILES", "SKILLS_MAX_BYTES"):
        value = getattr(mcp_settings, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(checks.Error(f"MCP_SERVER[{key!r}] must be a positive integer, not {value!r}",
                                       id="mcp_server.E062"))
    dirs = mcp_settings.SKILLS_DIRS
    if not isinstance(dirs, list | tuple) or not all(isinstance(d, str) or hasattr(d, "__fspath__")
                                                     for d in dirs):
        errors.append(checks.Error(f"MCP_SERVER['SKILLS_DIRS'] must be a list of folders, not {dirs!r}",
                                   id="mcp_server.E062"))
    if errors:
        return errors
    capabilities = mcp_settings.CAPABILITIES
    if not isinstance(capabilities, dict) or not Skills.server_supports(capabilities):
        return errors
    if not isinstance(capabilities.get("resources"), dict):
        errors.append(checks.Error(
            f"MCP_SERVER['CAPABILITIES'] declares {Skills.EXTENSION_ID} without 'resources': skill "
            "files are read with resources/read", id="mcp_server.E061"))
    problems: list[str] = []
    folder_skills(problems)
    errors += [checks.Error(problem, id="mcp_server.E060") for problem in problems]
    return errors
