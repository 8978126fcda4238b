from .stdio import StdioTransport

__all__ = ["StdioTransport"]
