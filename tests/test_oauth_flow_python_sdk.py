"""The demo running protected (``MCP_PROTECTED=1``) and the official Python SDK client's OAuth.

The SDK (``mcp`` on PyPI, ``OAuthClientProvider``) finds the demo's authorization server from the
endpoint's 401 and its Protected Resource Metadata, registers (DCR), sends the user to the consent
page with a PKCE S256 challenge (the redirect handler: a user logs in and approves over HTTP), gets
its tokens, calls a tool, refreshes, and after the tokens are revoked (RFC 7009) its next call gets
401. Each step is checked on the server's side: daphne's access log and the token rows.
"""

from __future__ import annotations

import time

import anyio
import httpx
import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from .oauth_flow_support import (
    REDIRECT_URI,
    ConsentAgent,
    ConsentRefused,
    check_authorized,
    check_refreshed,
    check_refused,
    check_revoked,
    create_user,
    in_thread,
    initialize_with,
    protected_demo,
    refresh_grant,
    revoke,
)
from .waiting import PATIENCE

pytestmark = [pytest.mark.django_db(transaction=True)]

CLIENT_NAME = "Python SDK client"


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    with protected_demo(django_db_blocker) as running:
        yield running


@pytest.fixture
def agent(demo, transactional_db):
    create_user()
    person = ConsentAgent(demo.base)
    yield person
    person.close()


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def test_the_protected_demo_names_its_own_authorization_server(demo):
    with httpx.Client(timeout=PATIENCE) as http:
        metadata = http.get(f"{demo.base}/.well-known/oauth-protected-resource/mcp").json()
        issuer = http.get(f"{demo.base}/.well-known/oauth-authorization-server").json()
    assert metadata["resource"] == demo.url
    assert metadata["authorization_servers"] == [demo.base] == [issuer["issuer"]]
    assert metadata["scopes_supported"] == ["mcp"]
    assert issuer["code_challenge_methods_supported"] == ["S256"]
    assert issuer["registration_endpoint"] == f"{demo.base}/oauth/register/"
    anonymous = initialize_with(demo, None)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{demo.base}/.well-known/oauth-protected-resource/mcp", scope="mcp"')


async def test_the_python_sdk_client_registers_authorizes_refreshes_and_is_refused_once_revoked(demo, agent):
    storage = MemoryStorage()
    redirected: list[dict[str, str]] = []

    async def redirect_handler(url: str) -> None:
        # The user's browser: log in, approve; the redirect URI receives these parameters.
        redirected.append(await anyio.to_thread.run_sync(agent.authorize, url))

    async def callback_handler() -> AuthorizationCodeResult:
        answer = redirected[-1]
        return AuthorizationCodeResult(code=answer["code"], state=answer["state"], iss=answer["iss"])

    provider = OAuthClientProvider(
        server_url=demo.url,
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME, redirect_uris=[REDIRECT_URI], response_types=["code"],
            grant_types=["authorization_code", "refresh_token"], token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    state: dict = {}
    refusals: list[BaseException] = []
    with anyio.fail_after(PATIENCE):
        try:
            await use_until_refused(demo, agent, provider, storage, redirected, state)
        except* ConsentRefused as refused:
            # The SDK's transport ends on the failed authorization, with the handler's exception.
            refusals.extend(refused.exceptions)
    assert len(refusals) == 1 and len(agent.opened) == 2
    seen = demo.wait_for_requests(state["mark"], ("POST", "/mcp", 401))
    assert demo.first_status(seen, "POST", "/mcp") == 401
    # The rotated refresh token is refused (and its family stays revoked).
    old_refresh_token = state["first"].refresh_token
    refused = await anyio.to_thread.run_sync(refresh_grant, demo, state["client_id"], old_refresh_token)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


async def use_until_refused(demo, agent: ConsentAgent, provider: OAuthClientProvider, storage: MemoryStorage,
                            redirected: list, state: dict) -> None:
    """Authorize, call, refresh, call, revoke, call: the last call's authorization fails."""
    mark = demo.log_mark()
    async with httpx2.AsyncClient(auth=provider, timeout=PATIENCE) as http, \
            streamable_http_client(demo.url, http_client=http, terminate_on_close=False) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=20) as session:
        await session.initialize()
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        first = state["first"] = storage.tokens
        assert redirected[0]["iss"] == demo.base
        client_id = state["client_id"] = await sync_to_async(in_thread(check_authorized))(
            demo, agent, first.access_token, first.refresh_token, CLIENT_NAME)
        assert storage.client_info.client_id == client_id
        seen = demo.wait_for_requests(
            mark, ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
            ("GET", "/.well-known/oauth-authorization-server", 200), ("POST", "/oauth/register/", 201),
            ("POST", "/oauth/token/", 200))
        # No token yet: the endpoint's challenge started the flow.
        assert demo.first_status(seen, "POST", "/mcp") == 401

        # The SDK refreshes a token it holds as expired before its next request.
        provider.context.token_expiry_time = time.time() - 1
        mark = demo.log_mark()
        echoed = await session.call_tool("echo", {"message": "after refresh"})
        assert echoed.content[0].text == "after refresh"
        second = storage.tokens
        demo.wait_for_requests(mark, ("POST", "/oauth/token/", 200))
        await sync_to_async(in_thread(check_refreshed))(
            first.access_token, first.refresh_token, second.access_token, second.refresh_token)
        check_refused(demo, first.access_token)

        await anyio.to_thread.run_sync(revoke, demo, client_id, second.access_token, second.refresh_token)
        await sync_to_async(in_thread(check_revoked))(second.access_token, second.refresh_token)
        check_refused(demo, second.access_token)
        # The next call gets 401; the SDK asks the user again, who does not approve this time.
        agent.approving = False
        state["mark"] = demo.log_mark()
        await session.call_tool("echo", {"message": "revoked"})
        pytest.fail("a call with revoked tokens succeeded")
