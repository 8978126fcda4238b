"""An optional OAuth 2.1 authorization server for MCP clients, on django-oauth-toolkit.

Add ``"oauth2_provider"`` and ``"mcp_server.authorization_server"`` to ``INSTALLED_APPS`` and
``path("", include("mcp_server.authorization_server.urls"))`` to the project's URLs (at the root:
RFC 8414 puts the metadata at ``/.well-known/oauth-authorization-server``). Settings live in
``MCP_SERVER["AUTHORIZATION_SERVER"]``; the toolkit's own ``OAUTH2_PROVIDER`` settings are derived
from them (:mod:`.conf`), and keys a project sets in ``OAUTH2_PROVIDER`` win.
"""
