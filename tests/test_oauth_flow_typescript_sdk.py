"""The demo running protected (``MCP_PROTECTED=1``) and the official TypeScript SDK client's OAuth.

tests/interop/ts_oauth_client.mjs runs the SDK's ``StreamableHTTPClientTransport`` with an
``authProvider``: on the endpoint's 401 it discovers the demo's authorization server, registers
(DCR) and sends the user to the consent page with a PKCE S256 challenge; this test is the user (it
logs in and approves over HTTP) and hands the redirect back. Then a tool call, a refresh through
the SDK's ``auth()``, revocation of both tokens (RFC 7009), and a call that gets 401 and fails.
Each step is checked on the server's side: daphne's access log and the token rows.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from typing import Any
from urllib.parse import urlencode

import pytest

from .harness import REPO
from .oauth_flow_support import (
    REDIRECT_URI,
    ConsentAgent,
    check_authorized,
    check_refreshed,
    check_refused,
    check_revoked,
    create_user,
    protected_demo,
    refresh_grant,
    revoke,
)
from .services import require
from .waiting import PATIENCE

pytestmark = [pytest.mark.django_db(transaction=True)]

INTEROP = REPO / "tests" / "interop"
CLIENT_NAME = "TypeScript SDK client"


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    with protected_demo(django_db_blocker) as running:
        yield running


class NodeClient:
    """The script, one JSON line each way (stderr kept for the failure message)."""

    def __init__(self, *args: str):
        node = shutil.which("node")
        require(node is not None, "node is not installed")
        require((INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(),
                "the TypeScript SDK is not installed: npm ci --prefix tests/interop (scripts/setup does it)")
        self.process = subprocess.Popen([node, str(INTEROP / "ts_oauth_client.mjs"), *args], cwd=INTEROP,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def receive(self) -> dict[str, Any]:
        line = self.lines.get(timeout=PATIENCE)
        if line is None:
            self.process.wait(PATIENCE)
            stderr = self.process.stderr.read()
            raise AssertionError(f"the script ended ({self.process.returncode}): {stderr}")
        return json.loads(line)

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(PATIENCE)


def test_the_typescript_sdk_client_registers_authorizes_refreshes_and_is_refused_once_revoked(demo):
    create_user()
    agent = ConsentAgent(demo.base)
    mark = demo.log_mark()
    script = NodeClient(demo.url, REDIRECT_URI)
    try:
        authorization_url = script.receive()["authorize"]
        redirect = agent.authorize(authorization_url)
        script.send({"redirect": f"{REDIRECT_URI}?{urlencode(redirect)}"})
        called = script.receive()
        assert called["step"] == "called" and called["sum"] == 5 and called["iss"] == demo.base
        first = called["tokens"]
        client_id = check_authorized(demo, agent, first["access_token"], first["refresh_token"], CLIENT_NAME)
        assert called["clientId"] == client_id
        seen = demo.wait_for_requests(
            mark, ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
            ("GET", "/.well-known/oauth-authorization-server", 200), ("POST", "/oauth/register/", 201),
            ("POST", "/oauth/token/", 200))
        # No token yet: the endpoint's challenge started the flow.
        assert demo.first_status(seen, "POST", "/mcp") == 401

        mark = demo.log_mark()
        script.send({"do": "refresh"})
        refreshed = script.receive()
        assert (refreshed["step"], refreshed["result"], refreshed["text"]) == \
            ("refreshed", "AUTHORIZED", "after refresh")
        second = refreshed["tokens"]
        demo.wait_for_requests(mark, ("POST", "/oauth/token/", 200))
        check_refreshed(first["access_token"], first["refresh_token"], second["access_token"],
                        second["refresh_token"])
        check_refused(demo, first["access_token"])

        revoke(demo, client_id, second["access_token"], second["refresh_token"])
        check_revoked(second["access_token"], second["refresh_token"])
        check_refused(demo, second["access_token"])
        mark = demo.log_mark()
        script.send({"do": "call"})
        # The SDK's refresh is refused, so it sends the user to the consent page again; no answer.
        assert script.receive()["authorize"].startswith(f"{demo.base}/oauth/authorize/")
        after = script.receive()
        assert after["step"] == "after revocation" and after["error"] == "UnauthorizedError", after
        # The call's 401, then the revoked refresh token refused.
        seen = demo.wait_for_requests(mark, ("POST", "/mcp", 401), ("POST", "/oauth/token/", 400))
        assert demo.first_status(seen, "POST", "/mcp") == 401
        assert script.process.wait(PATIENCE) == 0, script.process.stderr.read()
    finally:
        script.close()
        agent.close()
    refused = refresh_grant(demo, client_id, first["refresh_token"])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
