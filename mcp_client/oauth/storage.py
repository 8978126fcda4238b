"""Where a provider keeps its tokens and its client registration (OAUTH-23)."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class TokenStorage(ABC):
    """Keeps one provider's tokens and client registration. The provider treats both as opaque
    dicts; ``save_tokens(None)`` forgets the tokens, ``save_client_information(None)`` the client.

    ``locked()`` is held around every read-renew-save of the flow (a refresh, a registration, the
    discarding of another issuer's credentials), and reads and writes made while it is held belong
    to it. A storage shared by several processes makes it exclusive across them, so that a rotated
    refresh token is spent once and a client registered once; the default does nothing (the flow
    already serializes its own renewals within a process).
    """

    @asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        yield

    @abstractmethod
    async def tokens(self) -> dict | None: ...

    @abstractmethod
    async def save_tokens(self, tokens: dict | None) -> None: ...

    @abstractmethod
    async def client_information(self) -> dict | None: ...

    @abstractmethod
    async def save_client_information(self, information: dict | None) -> None: ...


class InMemoryTokenStorage(TokenStorage):
    """The default: lost when the process ends. Copies in and out, so callers cannot alias it."""

    def __init__(self, tokens: dict | None = None, client_information: dict | None = None):
        self._tokens = copy.deepcopy(tokens)
        self._client = copy.deepcopy(client_information)

    async def tokens(self) -> dict | None:
        return copy.deepcopy(self._tokens)

    async def save_tokens(self, tokens: dict | None) -> None:
        self._tokens = copy.deepcopy(tokens)

    async def client_information(self) -> dict | None:
        return copy.deepcopy(self._client)

    async def save_client_information(self, information: dict | None) -> None:
        self._client = copy.deepcopy(information)
