"""The fenced code blocks of the README and the docs pages, as the quickstart test follows them.

A ``sh`` block holds commands, one a line (``#`` comments and blank lines aside). A ``python``
block whose first line is ``# <path>`` is that file, whole; ``# <path>: add at the end`` is text to
append to it (a remark may follow, as in ``# mysite/urls.py: add at the end (at the root)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
# "# mysite/urls.py: add at the end (why, maybe)" or "# shop/mcp.py".
FILE_HEADER = re.compile(r"^# (?P<path>[\w./-]+\.\w+)(?:(?P<append>: add at the end)\b.*)?\s*$")


@dataclass(frozen=True)
class Block:
    language: str
    text: str

    @property
    def commands(self) -> list[str]:
        """A shell block's commands."""
        lines = (line.strip() for line in self.text.splitlines())
        return [line for line in lines if line and not line.startswith("#")]

    @property
    def file(self) -> tuple[str, bool] | None:
        """``(path, append)`` for a Python block that is a file or an addition to one."""
        first = self.text.split("\n", 1)[0]
        match = FILE_HEADER.match(first) if self.language == "python" else None
        return (match["path"], bool(match["append"])) if match else None


def blocks(text: str) -> list[Block]:
    return [Block(match[1], match[2]) for match in FENCE.finditer(text)]


def section(path: Path, name: str) -> str:
    """The text between a file's ``--8<-- [start:name]`` and ``[end:name]`` markers."""
    text = path.read_text()
    start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
    assert start in text and end in text, f"{path.name} has no {name!r} section"
    return text.split(start, 1)[1].split(end, 1)[0]


def apply_file_block(block: Block, project: Path, replacements: dict[str, str]) -> Path:
    """Write (or append) the file ``block`` shows, under ``project``."""
    path, append = block.file or (None, False)
    assert path, f"not a file block: {block.text[:60]!r}"
    body = block.text.split("\n", 1)[1] if append else block.text
    for old, new in replacements.items():
        body = body.replace(old, new)
    target = project / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if append:
        assert target.exists(), f"{path} should exist before the quickstart adds to it"
        target.write_text(target.read_text() + "\n" + body)
    else:
        target.write_text(body)
    return target
