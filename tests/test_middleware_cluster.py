"""MCP middleware across processes (docs/middleware.md): a rate limit every process shares, and a
background call passing through the middleware on the Celery worker that runs it. Two daphne
processes and one worker, PostgreSQL and Redis, as in production."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from mcp_protocol.errors import RATE_LIMITED

from .celery_support import processes_and_worker
from .modern_support import MODERN, envelope, modern_headers, sse_messages
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB, BROKER_DB = 13, 14  # test_background_limits' too: the cluster's lease keeps them apart
SETTINGS = {
    "MIDDLEWARE": ["tests.middleware_support.StampBackground", "mcp_server.middleware.RateLimitMiddleware",
                   "mcp_server.middleware.LoggingMiddleware"],
    "RATE_LIMITS": {"PRINCIPAL": "5/minute"},
    "AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
}
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker):
    with processes_and_worker(redis_db=REDIS_DB, broker_db=BROKER_DB, mcp_settings=SETTINGS) as deployed:
        yield deployed


def token_of(name: str) -> str:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=get_user_model().objects.create_user(name)).key


def modern_call(url: str, token: str | None, name: str, arguments: dict) -> tuple[httpx.Response, dict]:
    """A 2026-07-28 ``tools/call`` (checked against the schema): the response, and its answer."""
    message = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": envelope()}}
    check_client_message(message, MODERN)
    headers = {k: v for k, v in modern_headers(message).items() if k not in ("host", "content-type")}
    if token is not None:
        headers["authorization"] = f"Token {token}"
    response = httpx.post(url, json=message, headers=headers, timeout=PATIENCE)
    streamed = response.headers.get("content-type", "").startswith("text/event-stream")
    messages = sse_messages(response.text) if streamed else [response.json()]
    for item in messages:
        check_server_message(item, MODERN, "tools/call" if "method" not in item else None)
    return response, messages[-1]


def assert_rate_limited(response: httpx.Response, answer: dict) -> None:
    assert response.status_code == 429, (response.status_code, response.text)
    retry_after = int(response.headers["retry-after"])
    error = answer["error"]
    assert error["code"] == RATE_LIMITED, error
    assert error["data"]["retryAfter"] == retry_after and 1 <= retry_after <= 12  # a token each 12 s


def test_a_rate_limit_per_user_holds_across_processes_and_spares_other_users(deployment):
    (a, b), _worker = deployment
    alice, bob = token_of("rate-alice"), token_of("rate-bob")
    # Five calls a minute: a bucket of five, hit alternately on the two processes.
    for url in (a.url, b.url, a.url, b.url, a.url):
        response, answer = modern_call(url, alice, "log_line", {"text": "counted"})
        assert response.status_code == 200 and "result" in answer, answer
    assert_rate_limited(*modern_call(b.url, alice, "log_line", {"text": "one too many"}))
    # A handshake-era session of the same user, answered on an SSE stream: refused before anything
    # went out, so with 429 too.
    client = _authenticated_session(a.url, alice)
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "log_line", "arguments": {"text": "handshake"}}}
    check_client_message(message, client.revision)
    refused = client.post_raw(json.dumps(message), url=b.url)
    check_server_message(refused.json(), client.revision)
    assert_rate_limited(refused, refused.json())
    # Bob is not affected.
    response, answer = modern_call(a.url, bob, "log_line", {"text": "bob"})
    assert response.status_code == 200 and "result" in answer, answer


def _authenticated_session(url: str, token: str) -> Any:
    from .http_harness import HTTPClient

    client = HTTPClient(url)
    client.http.headers["authorization"] = f"Token {token}"
    client.initialize(url=url)
    return client


def test_a_background_call_goes_through_the_middleware_on_the_worker(deployment):
    (a, b), _worker = deployment
    response, answer = modern_call(a.url, None, "background_log_line", {"text": "through the chain"})
    assert response.status_code == 200, response.text
    result = answer["result"]
    ran_in = json.loads(result["content"][0]["text"])["pid"]
    stamp = result["_meta"]["test/middleware"]
    # Stamped by the middleware of the process that ran the tool (the worker), in the call's era.
    assert stamp == {"pid": ran_in, "era": "modern"}
    assert ran_in not in (a.process.pid, b.process.pid)
