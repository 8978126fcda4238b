"""The Streamable HTTP transport, on Channels, for any number of processes."""

from .transport import StreamableHTTPTransport

__all__ = ["StreamableHTTPTransport"]
