"""Registry changes made in a loop are not a flood: a list's list_changed goes out at once for the
first change and once more when ``LIST_CHANGED_MIN_INTERVAL`` ends, so thirty admin saves are not
thirty notifications to every session (9,000 for 300 sessions), and the last change is never
left unannounced."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import override_settings

from mcp_server.signals import ListChanges

from .http_cluster import call_tool, cluster, events_until, new_session, open_stream, require_services
from .waiting import wait_until

REDIS_DB = 4
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    require_services()
    # An interval longer than the test: what arrives is what went out at once.
    with django_db_blocker.unblock(), cluster(1, redis_db=REDIS_DB,
                                               mcp_settings={"LIST_CHANGED_MIN_INTERVAL": 600}) as (server,):
        yield server


@pytest.mark.django_db(transaction=True)
def test_thirty_saves_in_a_loop_are_one_list_changed_until_the_interval_ends(server):
    watcher = new_session(server.url)
    stream = open_stream(watcher, server.url)
    admin = new_session(server.url)
    try:
        for index in range(30):
            assert call_tool(admin, server.url, "shape_registry",
                             {"kind": "tool", "name": "echo", "enabled": index % 2 == 1}) == "saved"
        # Another list's first change goes out at once: when it arrives, the tools list was
        # announced once.
        assert call_tool(admin, server.url, "shape_registry",
                         {"kind": "prompt", "name": "greeting", "enabled": True}) == "saved"
        events = events_until(stream, PROMPTS_CHANGED)
        methods = [event.message.get("method", "") for event in events]
        changes = [method for method in methods if method.endswith("list_changed")]
        assert changes == [TOOLS_CHANGED, PROMPTS_CHANGED]
        # The registry itself changed with every save: the last one (enabled) holds.
        tools = watcher.request("tools/list", {}, url=server.url).response["result"]["tools"]
        assert "echo" in {tool["name"] for tool in tools}
    finally:
        stream.close()


def test_the_changes_within_the_interval_are_announced_once_when_it_ends(settings):
    sent: list[str] = []
    server = SimpleNamespace(name="coalesced", notify_tools_list_changed=lambda: sent.append("tools"),
                             notify_prompts_list_changed=lambda: sent.append("prompts"))
    changes = ListChanges()
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "LIST_CHANGED_MIN_INTERVAL": 0.3}):
        for _ in range(5):
            changes.announce(server, "tools")
        changes.announce(server, "prompts")  # each list has its own interval
        assert sent == ["tools", "prompts"]
        wait_until(lambda: sent.count("tools") == 2, what="the change at the end of the interval")
        changes.announce(server, "tools")  # right after it: within the next interval again
        assert sent.count("tools") == 2
        wait_until(lambda: sent.count("tools") == 3, what="the next interval's change")
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "LIST_CHANGED_MIN_INTERVAL": 0}):
        unthrottled = ListChanges()
        for _ in range(3):
            unthrottled.announce(server, "prompts")
        assert sent.count("prompts") == 4


@pytest.mark.parametrize("interval", [-1, "1", True, float("inf")])
def test_an_interval_that_is_no_number_of_seconds_stops_start_up(settings, interval):
    from mcp_server.checks import check_list_changed_interval

    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "LIST_CHANGED_MIN_INTERVAL": interval}):
        [error] = check_list_changed_interval()
    assert error.id == "mcp_server.E040" and "LIST_CHANGED_MIN_INTERVAL" in error.msg
