"""A skill as the extension serves it: its ``SKILL.md`` frontmatter, and every file with its
SHA-256 digest and size, read once from a folder (an app's ``skills/<name>/``) or made from an
admin row. Reads serve these bytes, so a digest always matches what a client gets.

A folder is read without following a symbolic link out of it, and within the extension's limits
(``SKILLS_MAX_FILES`` files and ``SKILLS_MAX_BYTES`` bytes a skill, 512 and 16 MiB by default, the
interoperability limits of SEP-2640); a skill past them is refused, not cut.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

SKILL_FILE = "SKILL.md"
SCHEME = "skill://"
DIRECTORY_MIME_TYPE = "inode/directory"
# The Agent Skills naming rules: 1-64 lowercase letters, digits and single inner hyphens.
NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
MAX_DESCRIPTION = 1024
_FRONTMATTER = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
# A path segment of a supporting file: no empty, dot or dot-dot segment, no backslash or NUL.
_SEGMENT = re.compile(r"^(?!\.{1,2}$)[^/\\\x00]+$")


class SkillError(ValueError):
    """A skill that cannot be served as it is; the message says why, for a person."""


@dataclass(frozen=True)
class SkillFile:
    path: str  # relative to the skill's folder, with "/"
    data: bytes
    digest: str
    mime_type: str

    @property
    def size(self) -> int:
        return len(self.data)

    def text(self) -> str | None:
        """The contents as text when they are UTF-8 (served as text), else None (a blob)."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


@dataclass(frozen=True)
class Skill:
    name: str
    frontmatter: dict[str, Any]
    files: dict[str, SkillFile]  # by relative path; SKILL.md included
    origin: str  # where it came from, for messages: a folder or "admin"
    stored_id: Any = None  # the admin row's id, for its restrictions
    directories: frozenset[str] = field(default=frozenset())

    @property
    def root(self) -> str:
        return f"{SCHEME}{self.name}"

    @property
    def uri(self) -> str:
        return self.file_uri(SKILL_FILE)

    @property
    def description(self) -> str:
        return self.frontmatter["description"]

    def file_uri(self, path: str) -> str:
        return f"{self.root}/{path}"

    def entry(self) -> dict[str, Any]:
        """The skill entry of ``skills/list`` and ``skills/get``: uri, frontmatter, manifest."""
        return {"uri": self.uri, "frontmatter": self.frontmatter,
                "resources": [{"uri": self.file_uri(f.path), "digest": f.digest, "size": f.size}
                              for f in self.files.values()]}


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The YAML frontmatter of a SKILL.md as a JSON object, checked as SEP-2640 asks."""
    match = _FRONTMATTER.match(text.removeprefix("\ufeff"))
    if match is None:
        raise SkillError(f"{SKILL_FILE} must begin with a YAML frontmatter block between --- lines")
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(f"the frontmatter of {SKILL_FILE} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SkillError(f"the frontmatter of {SKILL_FILE} must be a mapping")
    try:  # served verbatim as JSON: a YAML date or a non-string key would not survive
        if json.loads(json.dumps(data)) != data:
            raise TypeError("keys must be strings")
    except (TypeError, ValueError) as exc:
        raise SkillError(f"the frontmatter of {SKILL_FILE} must hold JSON values only "
                         f"(quote dates and times): {exc}") from None
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not NAME.match(name):
        raise SkillError(f"frontmatter name {name!r} must be 1-64 lowercase letters, digits and "
                         "single hyphens, not starting or ending with one")
    if not isinstance(description, str) or not description.strip() or len(description) > MAX_DESCRIPTION:
        raise SkillError(f"frontmatter description must be a non-empty string of at most "
                         f"{MAX_DESCRIPTION} characters")
    return data


def check_path(path: str) -> str:
    """A supporting file's relative path, refused when it could leave the skill's folder."""
    if not isinstance(path, str) or not path or path.startswith("/") \
            or not all(_SEGMENT.match(part) for part in path.split("/")):
        raise SkillError(f"{path!r} is not a relative path of plain segments inside the skill")
    return path


def make_file(path: str, data: bytes) -> SkillFile:
    mime_type = "text/markdown" if path.endswith(".md") else \
        (mimetypes.guess_type(path)[0] or "application/octet-stream")
    return SkillFile(path, data, digest_of(data), mime_type)


def build(name: str, files: dict[str, bytes], origin: str, *, max_files: int, max_bytes: int,
          stored_id: Any = None) -> Skill:
    """A skill from its files' bytes (``SKILL.md`` among them), checked against the limits."""
    if SKILL_FILE not in files:
        raise SkillError(f"{origin}: a skill needs a {SKILL_FILE}")
    if len(files) > max_files:
        raise SkillError(f"{origin}: {len(files)} files, more than SKILLS_MAX_FILES ({max_files})")
    total = sum(len(data) for data in files.values())
    if total > max_bytes:
        raise SkillError(f"{origin}: {total} bytes, more than SKILLS_MAX_BYTES ({max_bytes})")
    try:
        frontmatter = parse_frontmatter(files[SKILL_FILE].decode("utf-8"))
    except UnicodeDecodeError:
        raise SkillError(f"{origin}: {SKILL_FILE} is not UTF-8") from None
    except SkillError as exc:
        raise SkillError(f"{origin}: {exc}") from None
    if frontmatter["name"] != name:
        raise SkillError(f"{origin}: the frontmatter name {frontmatter['name']!r} must be the "
                         f"skill's folder name {name!r}")
    ordered = [SKILL_FILE, *sorted(path for path in files if path != SKILL_FILE)]
    directories = {str(parent) for path in ordered for parent in PurePosixPath(path).parents
                   if str(parent) != "."}
    return Skill(name, frontmatter, {path: make_file(check_path(path), files[path]) for path in ordered},
                 origin, stored_id, frozenset(directories))


def read_folder(folder: Path, *, max_files: int, max_bytes: int) -> Skill:
    """The skill in ``folder`` (its name is the folder's). Links are not followed: a skill is
    what its folder holds, and a link could reach anywhere on the machine."""
    files: dict[str, bytes] = {}
    total = 0
    pending = [folder]
    while pending:
        directory = pending.pop()
        for entry in sorted(directory.iterdir()):
            if entry.is_symlink() or entry.name.startswith("."):
                continue
            if entry.is_dir():
                pending.append(entry)
            elif entry.is_file():
                if len(files) >= max_files:
                    raise SkillError(f"{folder}: more than SKILLS_MAX_FILES ({max_files}) files")
                total += entry.stat().st_size
                if total > max_bytes:
                    raise SkillError(f"{folder}: more than SKILLS_MAX_BYTES ({max_bytes}) bytes")
                files[entry.relative_to(folder).as_posix()] = entry.read_bytes()
    return build(folder.name, files, str(folder), max_files=max_files, max_bytes=max_bytes)


def skill_md(name: str, description: str, body: str, extra: dict | None = None) -> bytes:
    """The SKILL.md of an admin-defined skill: its frontmatter, then its instructions."""
    frontmatter = {"name": name, "description": description, **(extra or {})}
    head = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{head}---\n\n{body.strip()}\n".encode()
