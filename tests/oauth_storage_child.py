"""A process of a deployment sharing the database token storage
(tests/test_client_oauth_storage_processes.py).

``python -m tests.oauth_storage_child KEY MCP_URL``: sets Django up on the test database (from the
environment), says ``ready``, waits for a line on stdin, then connects to the MCP server with an
authorization code provider over ``DatabaseTokenStorage(KEY)`` (no user: the provider refuses to
send anyone to authorize), calls ``echo`` and prints a JSON line: the access token stored after
the call, the tool's text, and any schema violation seen on the wire.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django

django.setup()

from mcp_client import AsyncClient, Provider  # noqa: E402
from mcp_client.contrib.django.storage import DatabaseTokenStorage  # noqa: E402
from tests.client_support import CheckedHTTPTransport  # noqa: E402


def no_user(*args: object) -> None:
    raise RuntimeError("this process has no user to authorize; it must refresh or reuse tokens")


async def main(key: str, url: str) -> dict:
    storage = DatabaseTokenStorage(key)
    metadata = {"client_name": "tests", "redirect_uris": ["http://127.0.0.1:8765/cb"]}
    provider = Provider(client_metadata=metadata, redirect_handler=no_user, callback_handler=no_user,
                        storage=storage)
    transport = CheckedHTTPTransport(url, oauth=provider)
    async with AsyncClient(transport) as client:
        await client.connect()
        result = await client.call_tool("echo", {})
    return {"access_token": (await storage.tokens())["access_token"], "text": result.text,
            "violations": transport.wire.violations}


if __name__ == "__main__":
    print("ready", flush=True)
    sys.stdin.readline()
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))), flush=True)
