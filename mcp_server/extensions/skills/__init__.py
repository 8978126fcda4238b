"""The Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``): folders of instructions,
a ``SKILL.md`` and its supporting files, that a host loads into its model when a task calls for
them. Each file is a resource at ``skill://<name>/<path>``; ``skills/list`` and ``skills/get``
give each skill's frontmatter and its manifest (every file with its SHA-256 digest and size), and
``resources/directory/read`` walks its folders (``directoryRead``).

``loading`` reads and checks a skill, ``catalog`` finds them (apps' ``skills/`` folders,
``SKILLS_DIRS``, admin) and makes them resources, ``methods`` are the three request handlers,
and ``hooks`` attaches them to the layers below, none of which imports this package.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol.methods import SKILLS_EXTENSION

EXTENSION_ID = SKILLS_EXTENSION


class Skills:
    """The extension's entry for ``Capabilities.support_extensions`` and its capability checks."""

    EXTENSION_ID = EXTENSION_ID

    @staticmethod
    def capability(directory_read: bool = True) -> dict[str, Any]:
        """``{"io.modelcontextprotocol/skills": {"directoryRead": true}}`` (an empty object
        without ``resources/directory/read``). The server must declare ``resources`` too."""
        return {EXTENSION_ID: {"directoryRead": True} if directory_read else {}}

    @staticmethod
    def server_supports(capabilities: dict | None) -> bool:
        extensions = (capabilities or {}).get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION_ID), dict)

    @staticmethod
    def directory_read(capabilities: dict | None) -> bool:
        """Whether ``capabilities`` declare ``resources/directory/read``."""
        if not Skills.server_supports(capabilities):
            return False
        return capabilities["extensions"][EXTENSION_ID].get("directoryRead") is True
