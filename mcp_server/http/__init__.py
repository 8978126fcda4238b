"""The Streamable HTTP transport, on Channels, for any number of processes.

``StreamableHTTPTransport`` is loaded when first used (PEP 562): the modules of this package that
need none of it (the daphne hooks, the send window) do not load the transport.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["StreamableHTTPTransport"]


def __getattr__(name: str) -> Any:
    if name == "StreamableHTTPTransport":
        from .transport import StreamableHTTPTransport

        return StreamableHTTPTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .transport import StreamableHTTPTransport
