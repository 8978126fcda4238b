"""The demo served by one daphne process, end to end over Streamable HTTP."""

import pytest

from .http_harness import DaphneServer, HTTPClient


@pytest.fixture
def daphne(transactional_db):
    server = DaphneServer()
    yield server
    server.stop()


@pytest.mark.feature("HTTP-01", "HTTP-09", "HTTP-14", "HTTP-17")
def test_a_session_from_initialize_to_delete(daphne):
    client = HTTPClient(daphne.url)
    client.initialize(capabilities={"elicitation": {}})
    exchange = client.request("tools/call", {"name": "slow_count", "arguments": {"count": 2, "delay": 0.01},
                                             "_meta": {"progressToken": "t"}})
    assert exchange.headers["content-type"] == "text/event-stream"
    assert [n["params"]["progress"] for n in exchange.notifications] == [1, 2]
    assert exchange.response["result"]["content"][0]["text"] == "Counted to 2"
    client.answers["elicitation/create"] = lambda params: {"action": "accept", "content": {"confirm": True}}
    exchange = client.request("tools/call", {"name": "confirm_action", "arguments": {"action": "ship"}})
    assert exchange.response["result"]["content"][0]["text"] == "Done: ship (priority normal)"
    assert client.delete().json() == {"success": True}
    assert client.request("ping").status == 404
