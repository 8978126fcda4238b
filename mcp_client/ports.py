"""The narrow views of a client that its helper modules are typed against.

``subscriptions.py`` and ``tasks.py`` need a few operations of the ``AsyncClient`` they serve;
naming them here, below ``async_client.py``, lets those modules use them without importing
``AsyncClient`` (which imports them) or reaching into its private state. An ``AsyncClient`` owns
an adapter that provides them (``async_client._Port``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

from mcp_protocol.cancellation import Cancellation


class ListenPort(Protocol):
    """What the ``subscriptions/listen`` stream (``subscriptions.py``) needs of its client."""

    @property
    def server_capabilities(self) -> dict: ...

    def listens_to(self, method: str) -> bool:
        """Whether a notification callback is registered for ``method`` (or for all, ``"*"``)."""
        ...

    async def request(self, method: str, params: dict | None, *, request_id: str) -> Any:
        """Send a request under the given id and wait for its answer."""
        ...

    def end_stream(self, request_id: str) -> bool:
        """Close the transport's stream of that request (HTTP); False when the transport has no
        stream per request (stdio)."""
        ...

    async def notify(self, method: str, params: dict | None = None) -> None: ...

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run ``coroutine`` in the background, cancelled when the client closes."""
        ...

    def fail_request(self, error: BaseException, request_id: str) -> None:
        """End the wait for the answer to ``request_id`` with ``error``."""
        ...


class TaskClient(Protocol):
    """The client the Tasks extension functions (``tasks.py``) are given, an ``AsyncClient``: the
    public state they check; its requests go through :func:`task_port`."""

    @property
    def connected(self) -> bool: ...

    @property
    def is_modern(self) -> bool: ...

    @property
    def protocol_version(self) -> str | None: ...


class TaskPort(Protocol):
    """What the Tasks extension functions need beyond a :class:`TaskClient`'s public state."""

    async def send_request(self, method: str, params: dict | None, *,
                           cancellation: Cancellation | None = None) -> Any:
        """Send a request as the client's own methods do and return its result."""
        ...

    def server_request_handler(self, method: str) -> Callable | None:
        """The handler registered for the server's requests named ``method``, if any."""
        ...


@functools.singledispatch
def task_port(client: TaskClient) -> TaskPort:
    """The :class:`TaskPort` of ``client``. ``AsyncClient`` registers its adapter here (it cannot
    be reached through a public member, and tasks.py cannot import async_client); any other object
    is taken to be a TaskPort itself."""
    return cast(TaskPort, client)
