"""The MCP client (stdio and Streamable HTTP); it needs no Django."""
