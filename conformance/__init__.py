"""The server (and, later, the client) that the official MCP conformance suite drives."""
