"""``mcp_client.contrib.django``: an optional Django app keeping the OAuth client registrations and
tokens of ``mcp_client`` in the database, encrypted, shared by every process of a deployment.

    INSTALLED_APPS = [..., "mcp_client.contrib.django"]
    MCP_CLIENT = {"OAUTH_ENCRYPTION_KEYS": [os.environ["MCP_CLIENT_OAUTH_KEY"]]}

    from mcp_client.contrib.django.storage import DatabaseTokenStorage
    provider = Provider(..., storage=DatabaseTokenStorage("https://mcp.example.com/mcp"))
"""
