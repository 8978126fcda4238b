"""input_required across two daphne processes (PostgreSQL and Redis, as in production).

On a handshake-era session the shim's live request goes out on the tool call's stream of one
process, and the client's answer, posted to the other process, reaches it there. On the 2026-07-28
wire round 1 is answered by one process and round 2 by the other, and a state that was tampered
with, expired, replayed to another tool or sealed for another audience is refused by either.
"""

from __future__ import annotations

import base64

import pytest

from mcp_client import AsyncClient
from mcp_client.transports.round_robin import round_robin
from mcp_server import RequestStateSecurity

from .client_support import CheckedHTTPTransport, every_message_checked
from .http_cluster import cluster, new_session, require_services
from .http_harness import Event
from .modern_support import envelope, post_over_http
from .test_client_stdio import answer_the_demo_forms

REDIS_DB = 15
KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()
ELICITING = envelope({"elicitation": {"form": {}}})


@pytest.fixture(scope="module")
def pair(django_db_setup, django_db_blocker):
    require_services()
    settings = {"SERVER_TO_CLIENT_REQUEST_TIMEOUT": 20, "REQUEST_STATE_KEYS": [KEY]}
    with cluster(2, redis_db=REDIS_DB, mcp_settings=settings) as servers:
        yield servers


@pytest.fixture
def urls(pair, transactional_db):
    return [server.url for server in pair]


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


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


# The 2026-07-28 wire: nothing kept between rounds, so round 2 may go to the other process -------
CONFIRM = {"action": "accept", "content": {"confirm": True}}
INVALID_STATE = {"code": -32602, "message": "Invalid or expired requestState"}


def first_round(url: str, title: str = "draft") -> dict:
    status, messages = post_over_http(url, "tools/call", 1, ELICITING, name="delete_note",
                                      arguments={"title": title})
    assert status == 200
    result = messages[-1]["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["confirm"]["method"] == "elicitation/create"
    assert result["requestState"].startswith("v1.") and title not in result["requestState"]
    return result


def retry(url: str, state: str, *, name: str = "delete_note", arguments: dict | None = None,
          request_id: int = 2) -> tuple[int, dict]:
    status, messages = post_over_http(
        url, "tools/call", request_id, ELICITING, name=name,
        arguments=arguments if arguments is not None else {"title": "draft"},
        inputResponses={"confirm": CONFIRM}, requestState=state)
    return status, messages[-1]


@pytest.mark.feature("MRTR-03", "MRTR-10", "MOD-14")
def test_round_one_on_one_process_and_round_two_on_the_other(urls):
    a, b = urls
    for first, second in ((a, b), (b, a)):
        state = first_round(first)["requestState"]
        status, response = retry(second, state)
        assert status == 200
        assert response["result"]["content"] == [{"type": "text", "text": "Deleted the note 'draft'"}]
        assert response["result"]["resultType"] == "complete"


@pytest.mark.feature("MRTR-09", "MRTR-10")
def test_a_tampered_expired_replayed_or_foreign_state_is_refused_on_either_process(urls):
    a, b = urls
    state = first_round(a)["requestState"]
    prefix, body = state[:3], state[3:]
    tampered = prefix + body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
    bound = {"method": "tools/call", "target": "delete_note", "arguments": {"title": "draft"}}
    expired = RequestStateSecurity(key=KEY, ttl=1e-6).seal("draft", **bound)
    foreign = RequestStateSecurity(key=KEY, audience="https://elsewhere.example").seal("draft", **bound)
    refused = [
        retry(b, tampered),
        retry(b, expired),
        retry(a, state, name="echo", arguments={"message": "draft"}),  # replayed to another tool
        retry(b, state, arguments={"title": "another note"}),  # to other arguments
        retry(a, foreign),  # sealed for another audience
        retry(b, "v1.not-a-state"),
    ]
    for status, response in refused:
        assert (status, response["error"]) == (400, INVALID_STATE), response
    # And the genuine state still completes: refusals changed nothing.
    status, response = retry(b, state)
    assert status == 200 and response["result"]["resultType"] == "complete"


# Declared asks (the demo's confirm_action and arrange_meeting) through our client ---------------
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_our_client_answers_declared_asks_while_its_requests_alternate_between_processes(urls, mode):
    """In auto mode (2026-07-28) each retry goes to the other process than the round before, which
    opens the sealed state of its neighbour; in legacy mode the live elicitation goes out on one
    process's stream and the answer is posted to the other."""
    a, b = urls
    factory = round_robin([a, b])
    asked: list[str] = []

    def elicit(params: dict) -> dict:
        asked.append(params["message"])
        return answer_the_demo_forms(params)

    client = AsyncClient(CheckedHTTPTransport(a, http_client_factory=factory), mode=mode)
    client.on_elicitation(elicit)
    async with client:
        assert client.is_modern == (mode == "auto")
        confirmed = await client.call_tool("confirm_action", {"action": "ship"})
        assert confirmed.text == "Done: ship (priority high)"
        meeting = await client.call_tool("arrange_meeting", {"topic": "the roof"})
        assert meeting.text == "Arranged a visit about the roof: 1 Main Street"
    assert asked == ["Do you want to ship?", "How should we meet about the roof?", "Where should we meet?"]
    [transport] = factory.transports
    if mode == "auto":
        # server/discover, then confirm_action in two rounds and arrange_meeting in three: in turn.
        assert transport.sent == {a: 3, b: 3}
    else:
        assert transport.sent[a] >= 3 and transport.sent[b] >= 3
