"""Where a provider keeps its tokens and its client registration (OAUTH-23)."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod


class TokenStorage(ABC):
    """Keeps one provider's tokens and client registration. The provider treats both as opaque
    dicts; ``save_tokens(None)`` forgets the tokens, ``save_client_information(None)`` the client."""

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
