"""Token values as the database keeps them: their SHA-256, never the value itself."""

from __future__ import annotations

import hashlib


def digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()
