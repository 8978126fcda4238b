"""input_required across two daphne processes (PostgreSQL and Redis, as in production).

On a handshake-era session the shim's live request goes out on the tool call's stream of one
process, and the client's answer, posted to the other process, reaches it there.
"""

from __future__ import annotations

import base64

import pytest

from .http_cluster import cluster, new_session, require_services
from .http_harness import Event

REDIS_DB = 15
KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker):
    require_services()
    settings = {"SERVER_TO_CLIENT_REQUEST_TIMEOUT": 20, "REQUEST_STATE_KEYS": [KEY]}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as servers:
        yield servers


@pytest.fixture
def urls(pair, transactional_db):
    return [server.url for server in pair]


@pytest.mark.feature("MRTR-07")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])
def test_the_shim_asks_on_one_process_and_the_answer_comes_through_the_other(urls, revision):
    a, b = urls
    client = new_session(a, revision, capabilities={"elicitation": {}})
    answers = []

    def answer_on_b(event: Event) -> None:
        request = event.message
        if request and request.get("method") == "elicitation/create":
            answers.append(client.respond(request["id"], {"action": "accept", "content": {"confirm": True}},
                                          url=b))

    exchange = client.request("tools/call", {"name": "delete_note", "arguments": {"title": "draft"}},
                              url=a, on_event=answer_on_b)
    [request] = exchange.server_requests
    assert request["params"]["message"] == "Delete the note 'draft'?"
    assert ("mode" in request["params"]) == (revision >= "2025-11-25")
    assert [r.status_code for r in answers] == [202]
    assert exchange.response["result"]["content"] == [{"type": "text", "text": "Deleted the note 'draft'"}]
    client.close()
