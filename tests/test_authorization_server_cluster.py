"""Two daphne processes on one PostgreSQL database: a client registered through one is served by
the other (its registration read, a token issued), and a token revoked through the first is
refused by the endpoint's authentication class, as every process sees the same rows."""

from __future__ import annotations

import httpx
import pytest

from mcp_server.auth import AuthenticationFailed
from mcp_server.authorization_server.authentication import LocalTokenAuthentication

from .authorization_support import FakeRequest, register
from .http_cluster import cluster, require_services
from .waiting import PATIENCE

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 12


def test_a_client_registered_through_one_process_gets_its_token_from_the_other(django_db_blocker):
    require_services()
    # Its client has no user behind its tokens: a deployment allows that to registered clients.
    settings = {"AUTHORIZATION_SERVER": {"DYNAMIC_CLIENT_CREDENTIALS": True}}
    with django_db_blocker.unblock(), cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as (a, b), \
            httpx.Client(timeout=PATIENCE) as http:
        first, second = a.url.removesuffix("/mcp"), b.url.removesuffix("/mcp")
        registered = register(http, first, grant_types=["client_credentials"], redirect_uris=None,
                              token_endpoint_auth_method="client_secret_post")
        management = registered["registration_client_uri"].replace(first, second)
        bearer = {"authorization": f"Bearer {registered['registration_access_token']}"}
        read = http.get(management, headers=bearer)
        assert read.status_code == 200 and read.json()["client_id"] == registered["client_id"]

        resource = f"{second}/mcp"
        issued = http.post(f"{second}/oauth/token/", data={
            "grant_type": "client_credentials", "client_id": registered["client_id"],
            "client_secret": registered["client_secret"], "resource": resource})
        assert issued.status_code == 200, issued.text
        access_token = issued.json()["access_token"]
        principal = LocalTokenAuthentication().authenticate(FakeRequest(f"Bearer {access_token}", resource))
        assert principal.client_id == registered["client_id"]

        revoked = http.post(f"{first}/oauth/revoke/", data={
            "token": access_token, "client_id": registered["client_id"],
            "client_secret": registered["client_secret"]})
        assert revoked.status_code == 200
        with pytest.raises(AuthenticationFailed):
            LocalTokenAuthentication().authenticate(FakeRequest(f"Bearer {access_token}", resource))
