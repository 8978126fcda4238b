"""ASGI entry point of the demo project (daphne, uvicorn or hypercorn serve it).

``/mcp`` is routed at the ASGI layer straight to the MCP endpoint (it never goes through Django's
request handler or middleware), with its protections (body limit, slow readers cut off); the static
files and everything else (admin, the API, the authorization server) are the Django site.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

from mcp_server.asgi import get_asgi_application

application = get_asgi_application()
