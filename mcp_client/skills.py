"""The client side of the Skills extension (SEP-2640): a server's skills, their manifests, and
their files read and checked against the manifest's digests and sizes.

A client only asks a server that declared ``io.modelcontextprotocol/skills`` (and
``resources/directory/read`` only when it declared ``directoryRead``): the extension says so.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from mcp_protocol import methods

from .errors import ClientError, ValidationError

EXTENSION_ID = methods.SKILLS_EXTENSION
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class SkillFileEntry:
    """One file of a skill's manifest: where it is, and what its bytes must hash to."""

    uri: str
    digest: str | None = None
    size: int | None = None


@dataclass
class Skill:
    """A skill entry of ``skills/list`` or ``skills/get``."""

    uri: str
    frontmatter: dict
    resources: list[SkillFileEntry] | None  # None: "dynamic" (no manifest)
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))

    @classmethod
    def from_wire(cls, data: Any) -> Skill:
        if not isinstance(data, dict) or not isinstance(data.get("uri"), str) \
                or not isinstance(data.get("frontmatter"), dict):
            raise ValidationError(f"a skill entry needs a uri and a frontmatter object: {data!r}")
        resources = data.get("resources")
        if resources == "dynamic":
            files = None
        elif isinstance(resources, list) and all(isinstance(r, dict) and isinstance(r.get("uri"), str)
                                                 for r in resources):
            files = [SkillFileEntry(r["uri"], r.get("digest"), r.get("size")) for r in resources]
        else:
            raise ValidationError(f"a skill's resources must be a list of {{uri, digest, size}} or "
                                  f'"dynamic": {resources!r}')
        return cls(data["uri"], data["frontmatter"], files, raw=data)


def check_declared(capabilities: dict, method: str, *, directory_read: bool = False) -> None:
    settings = (capabilities.get("extensions") or {}).get(EXTENSION_ID)
    if not isinstance(settings, dict):
        raise ClientError(f"{method}: the server does not declare the {EXTENSION_ID} extension")
    if directory_read and settings.get("directoryRead") is not True:
        raise ClientError(f"{method}: the server does not declare directoryRead in {EXTENSION_ID}")


def contents_bytes(contents: list[dict], uri: str) -> bytes:
    """The bytes a ``resources/read`` returned for ``uri`` (text as UTF-8, a blob decoded)."""
    for block in contents:
        if isinstance(block, dict) and block.get("uri") == uri:
            if isinstance(block.get("text"), str):
                return block["text"].encode("utf-8")
            if isinstance(block.get("blob"), str):
                return base64.b64decode(block["blob"])
    raise ValidationError(f"resources/read returned no contents for {uri}")


def verified(entry: SkillFileEntry, data: bytes) -> bytes:
    """``data``, refused unless it has the manifest's size and SHA-256 digest."""
    if entry.size is not None and entry.size != len(data):
        raise ValidationError(f"{entry.uri}: the manifest says {entry.size} bytes, the server sent "
                              f"{len(data)}")
    if entry.digest is None:
        raise ValidationError(f"{entry.uri}: the manifest gives no digest to check it against")
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != entry.digest:
        raise ValidationError(f"{entry.uri}: its digest is {actual}, the manifest says {entry.digest}")
    return data
