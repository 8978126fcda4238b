"""How the Skills extension attaches to what sits below it, none of which imports it: its three
methods go in the engine's method table and its skills into the default server's registry
(``ports.RegistryContributor``). :func:`install` registers them, once per process, from
``site.install``."""

from __future__ import annotations

from django.core import checks

from mcp_protocol import methods

from ... import ports
from ...handlers import register_extension_method
from . import methods as skill_methods
from .catalog import SkillRegistry
from .checks import check_skills


def install() -> None:
    register_extension_method(methods.SKILLS_LIST, skill_methods.list_skills)
    register_extension_method(methods.SKILLS_GET, skill_methods.get_skill)
    register_extension_method(methods.RESOURCES_DIRECTORY_READ, skill_methods.read_directory)
    ports.register(ports.RegistryContributor, SkillRegistry())
    checks.register(check_skills, checks.Tags.compatibility)
