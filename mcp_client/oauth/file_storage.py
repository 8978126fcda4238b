"""``FileTokenStorage``: one provider's tokens and registration in a JSON file only its owner can
read (mode 0600, in a directory of mode 0700), as ``python -m mcp_client URL --oauth`` keeps them."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from .errors import OAuthError
from .storage import TokenStorage

try:
    import fcntl
except ImportError:  # Windows: no lock across processes (within one, the flow serializes)
    fcntl = None  # type: ignore[assignment]


class FileTokenStorage(TokenStorage):
    """``FileTokenStorage(path)``: ``{"tokens": ..., "client_information": ...}`` in ``path``,
    replaced atomically at each save. ``locked()`` holds an exclusive ``flock`` on ``path.lock``, so
    two commands sharing the file do not spend one refresh token twice."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    async def tokens(self) -> dict | None:
        return self._read().get("tokens")

    async def save_tokens(self, tokens: dict | None) -> None:
        self._update("tokens", tokens)

    async def client_information(self) -> dict | None:
        return self._read().get("client_information")

    async def save_client_information(self, information: dict | None) -> None:
        self._update("client_information", information)

    @asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        if fcntl is None:
            yield
            return
        self._directory()
        descriptor = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # closing releases the lock

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise OAuthError(f"the token file {self.path} is not JSON ({exc}); delete it to authorize "
                             "again") from None
        if not isinstance(value, dict):
            raise OAuthError(f"the token file {self.path} is not a JSON object; delete it to authorize again")
        return value

    def _update(self, name: str, value: dict | None) -> None:
        data = self._read()
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
        self._directory()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)  # in case it existed with another mode
        os.replace(temporary, self.path)

    def _directory(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
