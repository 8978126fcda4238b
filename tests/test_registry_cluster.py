"""An administrator's change of the registry, saved through one daphne process's ORM, reaches the
other process (PostgreSQL + Redis): its tools/list, its sessions' GET streams (one list_changed per
save), and the restrictions hold on both."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from mcp_server.models import PrimitiveSetting, StoredSkill
from project.demo.models import Ticket

from .http_cluster import call_tool, cluster, events_until, new_session, open_stream, require_services
from .http_harness import HTTPClient
from .modern_support import post_over_http
from .test_listen_multiprocess import ACKNOWLEDGED, ListenStream

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 2
LIST_CHANGED = "notifications/tools/list_changed"


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker):
    require_services()
    with django_db_blocker.unblock(), cluster(2, redis_db=REDIS_DB) as servers:
        yield servers


def names(client: HTTPClient, url: str) -> set[str]:
    exchange = client.request("tools/list", {}, url=url)
    return {tool["name"] for tool in exchange.response["result"]["tools"]}


def logged_in(user: User, url: str) -> HTTPClient:
    """A session opened with ``user``'s Django session cookie: the user owns it."""
    browser = Client()
    browser.force_login(user)
    client = HTTPClient(url)
    client.http.cookies.set("sessionid", browser.cookies["sessionid"].value)
    client.initialize(url=url)
    return client


def test_a_tool_disabled_on_one_process_is_gone_on_the_other(servers):
    a, b = servers
    watcher = new_session(b.url)
    stream = open_stream(watcher, b.url)
    listening = ListenStream(b.url, "registry", {"toolsListChanged": True})  # a 2026-07-28 client
    try:
        assert listening.next()["method"] == ACKNOWLEDGED
        assert "echo" in names(watcher, b.url)
        assert call_tool(new_session(a.url), a.url, "shape_registry",
                         {"kind": "tool", "name": "echo", "enabled": False}) == "saved"
        assert call_tool(new_session(a.url), a.url, "shape_registry",
                         {"kind": "tool", "name": "echo", "enabled": True}) == "saved"
        events = events_until(stream, LIST_CHANGED)
        events += events_until(stream, LIST_CHANGED)
        # One list_changed per save, each after the process dropped its old registry.
        assert [e.message["method"] for e in events if e.message.get("method") == LIST_CHANGED] == [
            LIST_CHANGED, LIST_CHANGED]
        assert [listening.next()["method"], listening.next()["method"]] == [LIST_CHANGED, LIST_CHANGED]
        assert "echo" in names(watcher, b.url)
        call_tool(new_session(a.url), a.url, "shape_registry",
                  {"kind": "tool", "name": "echo", "enabled": False})
        events_until(stream, LIST_CHANGED)
        assert "echo" not in names(watcher, b.url)
        refused = watcher.request("tools/call", {"name": "echo", "arguments": {"message": "x"}}, url=b.url)
        assert refused.response["error"]["message"] == "Tool not found: echo"
    finally:
        stream.close()
        listening.close()
        PrimitiveSetting.objects.filter(name="echo").delete()


def test_a_generated_tool_renamed_and_restricted_is_seen_so_only_by_users_holding_the_permission(servers):
    """Curation in admin of a tool generated from the demo's ViewSet: the exposed name and the
    restriction hold on every process, announced live; the old name is unknown to everyone."""
    a, b = servers
    holder, other = User.objects.create_user("holder"), User.objects.create_user("other")
    holder.user_permissions.add(Permission.objects.get(codename="view_session",
                                                       content_type__app_label="mcp_server"))
    Ticket.objects.create(title="The printer is on fire", owner=other)
    watcher = new_session(b.url)
    stream = open_stream(watcher, b.url)
    try:
        call_tool(new_session(a.url), a.url, "shape_registry",
                  {"kind": "tool", "name": "ticket_list", "permission": "mcp_server.view_session",
                   "exposed_name": "find_tickets"})
        events_until(stream, LIST_CHANGED)
        for url in (a.url, b.url):
            assert not {"ticket_list", "find_tickets"} & names(new_session(url), url)
            assert not {"ticket_list", "find_tickets"} & names(logged_in(other, url), url)
            seen = names(logged_in(holder, url), url)
            assert "find_tickets" in seen and "ticket_list" not in seen
        found = logged_in(holder, b.url).request(
            "tools/call", {"name": "find_tickets", "arguments": {"status": "open"}}, url=b.url)
        results = found.response["result"]["structuredContent"]["results"]
        assert [ticket["title"] for ticket in results] == ["The printer is on fire"]
        for user, name in ((other, "find_tickets"), (holder, "ticket_list")):
            refused = logged_in(user, b.url).request(
                "tools/call", {"name": name, "arguments": {"status": "open"}}, url=b.url)
            assert refused.response["error"]["message"] == f"Tool not found: {name}"
    finally:
        stream.close()
        PrimitiveSetting.objects.filter(name="ticket_list").delete()
        Ticket.objects.all().delete()


@pytest.mark.feature("SKILL-06")
def test_a_skill_defined_in_admin_on_one_process_is_served_by_the_other(servers):
    """Skills (SEP-2640): the save reaches the other process's sessions as the resources list's
    list_changed (a skill's SKILL.md is listed there), and that process serves the skill."""
    a, b = servers
    watcher = new_session(b.url)
    stream = open_stream(watcher, b.url)
    changed = "notifications/resources/list_changed"
    try:
        listed = watcher.request("skills/list", {}, url=b.url).response["result"]["skills"]
        assert [s["frontmatter"]["name"] for s in listed] == ["note-keeping"]  # the demo's folder
        assert call_tool(new_session(a.url), a.url, "define_skill", {
            "name": "triage", "description": "Sort incoming bugs.", "instructions": "Label each bug.",
            "files": '{"checklists/labels.md": "- bug\\n"}'}) == "saved"
        events_until(stream, changed)
        entries = {s["frontmatter"]["name"]: s
                   for s in watcher.request("skills/list", {}, url=b.url).response["result"]["skills"]}
        assert set(entries) == {"note-keeping", "triage"}
        labels = entries["triage"]["resources"][1]
        read = watcher.request("resources/read", {"uri": labels["uri"]}, url=b.url).response["result"]
        assert read["contents"][0]["text"] == "- bug\n" and labels["size"] == 6
        _, messages = post_over_http(b.url, "skills/get", uri="skill://triage/SKILL.md")  # 2026-07-28
        assert messages[-1]["result"]["skill"] == entries["triage"]
    finally:
        stream.close()
        StoredSkill.objects.filter(name="triage").delete()
