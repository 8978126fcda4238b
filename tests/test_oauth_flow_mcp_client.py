"""The demo running protected (``MCP_PROTECTED=1``) and this project's own client's OAuth.

``mcp_client``'s ``Provider`` finds the demo's authorization server from the endpoint's 401 and its
Protected Resource Metadata, registers (DCR), sends the user to the consent page with a PKCE S256
challenge (the redirect handler: a user logs in and approves over HTTP), gets its tokens, calls a
tool, refreshes a token that is about to expire, and after the tokens are revoked (RFC 7009) its
next call gets 401, its refresh is refused and the user is asked again. Each step is checked on the
server's side: daphne's access log and the token rows.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from mcp_client import AsyncClient, HTTPTransport, InMemoryTokenStorage, Provider

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
    protected_demo,
    refresh_grant,
    revoke,
)
from .waiting import PATIENCE

pytestmark = [pytest.mark.django_db(transaction=True)]

CLIENT_NAME = "django-mcp-sdk client"


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


async def test_our_client_registers_authorizes_refreshes_and_is_refused_once_revoked(demo, agent):
    storage = InMemoryTokenStorage()
    redirected: list[dict[str, str]] = []

    async def redirect_handler(url: str) -> None:
        # The user's browser: log in, approve; the redirect URI receives these parameters.
        redirected.append(await asyncio.to_thread(agent.authorize, url))

    def callback_handler() -> tuple[str, str, str]:
        answer = redirected[-1]
        return answer["code"], answer["state"], answer["iss"]

    provider = Provider(
        client_metadata={"client_name": CLIENT_NAME, "redirect_uris": [REDIRECT_URI],
                         "grant_types": ["authorization_code", "refresh_token"]},
        redirect_handler=redirect_handler, callback_handler=callback_handler, storage=storage)
    mark = demo.log_mark()
    async with asyncio.timeout(PATIENCE), AsyncClient(HTTPTransport(demo.url, oauth=provider)) as client:
        await client.connect()
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        first = await storage.tokens()
        assert redirected[0]["iss"] == demo.base
        client_id = await sync_to_async(in_thread(check_authorized))(
            demo, agent, first["access_token"], first["refresh_token"], CLIENT_NAME)
        assert (await storage.client_information())["client_id"] == client_id
        seen = demo.wait_for_requests(
            mark, ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
            ("GET", "/.well-known/oauth-authorization-server", 200), ("POST", "/oauth/register/", 201),
            ("POST", "/oauth/token/", 200))
        # No token yet: the endpoint's challenge started the flow.
        assert demo.first_status(seen, "POST", "/mcp") == 401

        # A token about to expire is refreshed before it is sent.
        await storage.save_tokens({**first, "expires_at": time.time()})
        mark = demo.log_mark()
        echoed = await client.call_tool("echo", {"message": "after refresh"})
        assert echoed.text == "after refresh"
        second = await storage.tokens()
        demo.wait_for_requests(mark, ("POST", "/oauth/token/", 200))
        await sync_to_async(in_thread(check_refreshed))(
            first["access_token"], first["refresh_token"], second["access_token"], second["refresh_token"])
        await asyncio.to_thread(check_refused, demo, first["access_token"])

        await asyncio.to_thread(revoke, demo, client_id, second["access_token"], second["refresh_token"])
        await sync_to_async(in_thread(check_revoked))(second["access_token"], second["refresh_token"])
        await asyncio.to_thread(check_refused, demo, second["access_token"])
        # The next call gets 401, the revoked refresh token is refused, and the user, asked again,
        # does not approve this time.
        agent.approving = False
        mark = demo.log_mark()
        with pytest.raises(ConsentRefused):
            await client.call_tool("echo", {"message": "revoked"})
    assert len(agent.opened) == 2
    seen = demo.wait_for_requests(mark, ("POST", "/mcp", 401), ("POST", "/oauth/token/", 400))
    assert demo.first_status(seen, "POST", "/mcp") == 401
    refused = await asyncio.to_thread(refresh_grant, demo, client_id, first["refresh_token"])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
