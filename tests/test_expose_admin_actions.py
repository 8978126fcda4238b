"""ModelAdmin actions as tools (mcp_server.expose.admin_actions), through the dispatcher every
transport shares, for the Django user of the request's principal; every message checked against
the schema of its revision."""

from __future__ import annotations

import pytest
from django.contrib import admin, messages
from django.contrib.auth.models import Permission
from django.http import FileResponse, HttpResponse, HttpResponseRedirect

from mcp_protocol.errors import INVALID_PARAMS
from mcp_server import Configuration, Server
from mcp_server.auth import Principal
from mcp_server.expose import admin_action_tools
from project.demo.admin import TicketAdmin
from project.demo.models import Ticket

pytestmark = pytest.mark.django_db(transaction=True)


class ExportingTicketAdmin(TicketAdmin):
    """The demo's admin with actions that answer with a response, on a site of the tests' own."""

    actions = ["close_tickets", "export_titles", "download_titles", "open_report", "delete_selected"]

    @admin.action(description="Export the titles", permissions=["view"])
    def export_titles(self, request, queryset):
        response = HttpResponse("\n".join(queryset.values_list("title", flat=True)),
                                content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="titles.csv"'
        return response

    @admin.action(description="Download the titles as a stream", permissions=["view"])
    def download_titles(self, request, queryset):
        import io

        data = "\n".join(queryset.values_list("title", flat=True)).encode()
        return FileResponse(io.BytesIO(data), as_attachment=True, filename="titles.txt")

    @admin.action(description="Open the report")
    def open_report(self, request, queryset):
        self.message_user(request, "See the report.", messages.INFO)
        return HttpResponseRedirect(f"/reports/?ids={','.join(str(t.pk) for t in queryset)}")


site = admin.AdminSite(name="tests_expose")
site.register(Ticket, ExportingTicketAdmin)


def build_server(*, validate: bool = True) -> Server:
    server = Server("admin-actions",
                    configuration=Configuration(validate_tool_call_arguments=validate))
    for tool in admin_action_tools(Ticket, actions=["close_tickets"]):
        server.add_tool(tool)
    for tool in admin_action_tools(Ticket, site=site, prefix="t.",
                                   actions=["export_titles", "download_titles", "open_report",
                                            "delete_selected"]):
        server.add_tool(tool)
    return server


def user(name: str, *, staff: bool = True, codenames: tuple[str, ...] = ()):
    from django.contrib.auth import get_user_model

    made = get_user_model().objects.create_user(name, is_staff=staff)
    made.user_permissions.add(*Permission.objects.filter(content_type__app_label="demo",
                                                         codename__in=codenames))
    return get_user_model().objects.get(pk=made.pk)  # no permission cache


@pytest.fixture
def tickets():
    return [Ticket.objects.create(title=f"Ticket {n}", priority=n) for n in range(1, 5)]


def call(client, name: str, arguments: dict) -> dict:
    return client.request("tools/call", {"name": name, "arguments": arguments})


def test_a_staff_member_who_may_change_tickets_closes_them_and_reads_the_admins_message(
        make_client, tickets, short_lived_connections):
    server = build_server()
    client = make_client(server)
    listed = {tool["name"]: tool for tool in client.result("tools/list")["tools"]}
    assert listed["close_tickets"]["annotations"]["destructiveHint"] is True
    assert set(listed["close_tickets"]["inputSchema"]["properties"]["filters"]["properties"]) == {
        "status", "priority"}  # the admin's list_filter
    server.session.act_for(Principal(user=user("agent", codenames=("change_ticket", "view_ticket"))))
    first, second, other, _ = tickets
    result = call(client, "close_tickets", {"ids": [first.pk, second.pk, 999_999]})["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["messages"] == [{"level": "success",
                                                      "message": "2 ticket(s) closed."}]
    assert sorted(result["structuredContent"]["ids"]) == [first.pk, second.pk]
    assert result["structuredContent"]["missing_ids"] == [999_999]
    assert "2 ticket(s) closed." in result["content"][0]["text"]
    assert set(Ticket.objects.filter(status="closed").values_list("pk", flat=True)) == {first.pk, second.pk}
    # A filter on a list_filter field selects too: the open tickets of priority 3.
    result = call(client, "close_tickets", {"filters": {"status": "open", "priority": 3}})["result"]
    assert result["structuredContent"]["ids"] == [other.pk]
    assert Ticket.objects.get(pk=other.pk).status == "closed"
    # Nothing selected: a tool error, and nothing done.
    result = call(client, "close_tickets", {"ids": [first.pk], "filters": {"status": "open"}})["result"]
    assert result["isError"] is True and "nothing was done" in result["content"][0]["text"]


def test_refused_to_staff_without_the_change_permission_and_to_users_who_are_not_staff(
        make_client, tickets, short_lived_connections):
    server = build_server()
    client = make_client(server)
    ticket = tickets[0]
    for principal, says in (
            (Principal(user=user("viewer", codenames=("view_ticket",))),
             "lacks the 'change' permission"),
            (Principal(user=user("outsider", staff=False, codenames=("change_ticket",))),
             "may not use the admin site"),
            (Principal(client_id="app-without-user"), "signed-in Django user")):
        server.session.act_for(principal)
        result = call(client, "close_tickets", {"ids": [ticket.pk]})["result"]
        assert result["isError"] is True and says in result["content"][0]["text"], principal
    assert Ticket.objects.get(pk=ticket.pk).status == "open"


def test_bad_selections_are_invalid_params_naming_what_is_wrong(make_client, tickets):
    # Past the schema (which a project may turn off), the tool checks for itself.
    client = make_client(build_server(validate=False))
    error = call(client, "close_tickets", {})["error"]
    assert error["code"] == INVALID_PARAMS and "needs 'ids' or 'filters'" in error["message"]
    error = call(client, "close_tickets", {"filters": {"title": "x"}})["error"]
    assert error["code"] == INVALID_PARAMS and "'title' is not a filter" in error["message"]
    assert error["data"] == {"field": "title"}
    error = call(client, "close_tickets", {"ids": ["one"]})["error"]
    assert error["code"] == INVALID_PARAMS and "'one'" in error["message"]


def test_what_an_action_answers_with_is_reported(make_client, tickets, short_lived_connections):
    server = build_server()
    client = make_client(server)
    server.session.act_for(Principal(user=user("boss", codenames=(
        "view_ticket", "change_ticket", "delete_ticket"))))
    ids = [ticket.pk for ticket in tickets[:2]]
    result = call(client, "t.export_titles", {"ids": ids})["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["response"] == {
        "kind": "file", "status": 200, "content_type": "text/csv", "filename": "titles.csv",
        "size": len("Ticket 1\nTicket 2")}
    streamed = call(client, "t.download_titles", {"ids": ids})["result"]["structuredContent"]["response"]
    assert (streamed["kind"], streamed["filename"], streamed["size"]) == ("file", "titles.txt", 17)
    result = call(client, "t.open_report", {"ids": ids[:1]})["result"]
    assert result["structuredContent"]["response"] == {
        "kind": "redirect", "status": 302, "content_type": "text/html; charset=utf-8",
        "location": f"/reports/?ids={ids[0]}"}
    assert result["structuredContent"]["messages"] == [{"level": "info", "message": "See the report."}]
    # delete_selected answers with its confirmation page: an error, and nothing deleted.
    result = call(client, "t.delete_selected", {"ids": ids})["result"]
    assert result["isError"] is True and "confirmation page" in result["content"][0]["text"]
    assert Ticket.objects.filter(pk__in=ids).count() == 2


def test_actions_that_cannot_be_offered_are_refused_when_the_tools_are_made():
    with pytest.raises(ValueError, match="no action 'nothing'"):
        admin_action_tools(Ticket, actions=["nothing"])
    with pytest.raises(ValueError, match="not registered with the admin site 'empty'"):
        admin_action_tools(Ticket, actions=["close_tickets"], site=admin.AdminSite(name="empty"))
    with pytest.raises(ValueError, match="list of action names"):
        admin_action_tools(Ticket, actions="close_tickets")
