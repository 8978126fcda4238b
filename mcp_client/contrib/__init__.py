"""Optional integrations of the MCP client with frameworks (``mcp_client.contrib.django``)."""
