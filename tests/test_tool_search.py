"""The tool search (MCP_SERVER["TOOL_SEARCH"]): BM25 over tool names, titles and descriptions
finds the right tool among 200, searching only what the caller may see."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ImproperlyConfigured

from mcp_server import Server, Tool, get_server, site
from mcp_server.checks import check_tool_search
from mcp_server.models import PrimitiveSetting
from mcp_server.registry import access
from mcp_server.registry.overlay import RegistryOverlay
from mcp_server.registry.search_tool import ToolSearch
from mcp_server.registry.tool_search import ToolIndex, words
from mcp_server.settings import mcp_settings

from .test_registry_overlay import client_of, tool_names

# 40 fictional models: (name, plural, what one is).
MODELS = [
    ("ticket", "tickets", "support ticket a customer opened"),
    ("invoice", "invoices", "bill sent to a customer"),
    ("customer", "customers", "company or person that buys from us"),
    ("order", "orders", "purchase a customer placed"),
    ("product", "products", "item of the catalogue"),
    ("warehouse", "warehouses", "storage site holding stock"),
    ("shipment", "shipments", "parcel on its way to a customer"),
    ("supplier", "suppliers", "vendor we buy from"),
    ("employee", "employees", "member of staff"),
    ("department", "departments", "unit of the organisation"),
    ("project", "projects", "piece of work with a deadline"),
    ("task", "tasks", "to-do item of a project"),
    ("meeting", "meetings", "calendar event with attendees"),
    ("room", "rooms", "meeting room that can be booked"),
    ("contract", "contracts", "signed agreement with a customer"),
    ("payment", "payments", "money received"),
    ("refund", "refunds", "money given back to a customer"),
    ("coupon", "coupons", "discount code"),
    ("campaign", "campaigns", "marketing campaign"),
    ("lead", "leads", "prospect of the sales team"),
    ("article", "articles", "help centre article"),
    ("comment", "comments", "remark left on an article"),
    ("category", "categories", "group of products"),
    ("review", "reviews", "product rating by a customer"),
    ("vehicle", "vehicles", "delivery van of the fleet"),
    ("driver", "drivers", "person driving a vehicle"),
    ("route", "routes", "delivery round of a driver"),
    ("timesheet", "timesheets", "hours an employee worked"),
    ("expense", "expenses", "cost an employee claims back"),
    ("budget", "budgets", "planned spending"),
    ("asset", "assets", "laptop or device lent to staff"),
    ("license", "licenses", "software seat"),
    ("incident", "incidents", "outage of a service"),
    ("alert", "alerts", "monitoring alarm"),
    ("webhook", "webhooks", "HTTP callback to a partner"),
    ("report", "reports", "scheduled business report"),
    ("survey", "surveys", "questionnaire sent to customers"),
    ("subscription", "subscriptions", "recurring plan a customer pays"),
    ("tenant", "tenants", "isolated account of the platform"),
    ("region", "regions", "geographic sales area"),
]
CUSTOM = {
    "close_ticket": "Close a support ticket: mark it resolved and notify the customer who opened it.",
    "reopen_ticket": "Reopen a resolved support ticket when the problem comes back.",
    "refund_order": "Refund a customer's order, in full or in part, to the card that paid it.",
    "trackShipment": "Where a parcel is now: the carrier's latest status and the expected delivery date.",
    "exportPayroll": "Export the payroll of every employee for a month as a spreadsheet.",
}


def generated_tools() -> list[Tool]:
    """200 tools: five CRUD tools for 39 models, and five of their own (two in camelCase); the
    payroll export needs a permission."""
    tools = []
    for name, plural, what in MODELS[:39]:
        for tool_name, text in (
            (f"list_{plural}", f"List the {plural} (each a {what}), filtered and paginated."),
            (f"get_{name}", f"Get one {name} ({what}) by its id, with every field."),
            (f"create_{name}", f"Create a new {name}: a {what}."),
            (f"update_{name}", f"Update the fields of an existing {name} ({what})."),
            (f"delete_{name}", f"Delete a {name} ({what}) for good."),
        ):
            tools.append(Tool.define(lambda arguments: "done", name=tool_name, description=text,
                                     input_schema={"properties": {"id": {"type": "integer"}}}))
    for tool_name, text in CUSTOM.items():
        tools.append(Tool.define(lambda arguments: "done", name=tool_name, description=text,
                                 permissions=["auth.view_user"] if tool_name == "exportPayroll" else ()))
    assert len(tools) == 200 and len({tool.name for tool in tools}) == 200
    return tools


@pytest.fixture(scope="module")
def tools() -> list[Tool]:
    return generated_tools()


def first(index: ToolIndex, query: str) -> str:
    return index.search(query, 3)[0].tool.name


def test_words_split_names_drop_stop_words_and_cut_suffixes():
    assert words("close_ticket") == words("Closing the tickets") == ["clos", "ticket"]
    assert words("trackShipment") == words("tracked shipments") == ["track", "shipment"]
    assert words("HTTPServer v2") == ["http", "server", "v", "2"]
    assert words("categories") == words("category")


@pytest.mark.parametrize(("query", "expected"), [
    ("close a support ticket", "close_ticket"),
    ("the customer's problem is back, open their ticket again", "reopen_ticket"),
    ("refund the order a customer paid", "refund_order"),
    ("where is my parcel", "trackShipment"),
    ("track shipment", "trackShipment"),
    ("show all invoices", "list_invoices"),
    ("remove a warehouse", "delete_warehouse"),
    ("book a new meeting room", "create_room"),
    ("change the fields of a contract", "update_contract"),
])
def test_bm25_ranks_the_right_tool_first_among_200(tools, query, expected):
    assert first(ToolIndex(tools), query) == expected


@pytest.mark.django_db(transaction=True)
def test_the_search_tool_finds_only_what_the_caller_may_see(tools):
    access.forget_grants()
    server = Server("search-test", tools=[*tools, ToolSearch(threshold=50, max_results=5)])
    holder, other = User.objects.create_user("holder"), User.objects.create_user("other")
    holder.user_permissions.add(Permission.objects.get(codename="view_user", content_type__app_label="auth"))
    client = client_of(server, other)
    listed = {tool["name"]: tool for tool in client.result("tools/list")["tools"]}
    assert len(listed) == 200 and "search_tools" in listed  # 199 tools and the search
    result = client.result("tools/call", {"name": "search_tools",
                                          "arguments": {"query": "close a support ticket"}})
    found = result["structuredContent"]["tools"]
    assert next(tool["name"] for tool in found) == "close_ticket" and len(found) == 5
    assert found[0]["description"] == CUSTOM["close_ticket"]
    assert found[0]["inputSchema"] == listed["close_ticket"]["inputSchema"]
    assert result["structuredContent"]["searched"] == 199
    payroll = {"name": "search_tools", "arguments": {"query": "export the payroll"}}
    hidden = client.result("tools/call", payroll)["structuredContent"]["tools"]
    assert "exportPayroll" not in [tool["name"] for tool in hidden]
    permitted = client_of(server, holder).result("tools/call", payroll)["structuredContent"]
    assert permitted["tools"][0]["name"] == "exportPayroll" and permitted["searched"] == 200
    empty = client.result("tools/call", {"name": "search_tools", "arguments": {"query": "the of a"}})
    assert empty["isError"] is True and "has no word to search for" in empty["content"][0]["text"]
    access.forget_grants()


@pytest.mark.django_db(transaction=True)
def test_the_search_is_offered_only_past_its_threshold():
    server = Server("small", tools=[*generated_tools()[:3], ToolSearch(threshold=3)])
    client = client_of(server)
    assert tool_names(client) == ["list_tickets", "get_ticket", "create_ticket"]
    refused = client.request("tools/call", {"name": "search_tools", "arguments": {"query": "ticket"}})
    assert refused["error"]["message"] == "Tool not found: search_tools"
    server.add_tool(generated_tools()[3])
    assert "search_tools" in tool_names(client)


def test_the_setting_registers_the_search_on_the_default_server(monkeypatch):
    assert "search_tools" not in get_server().tools  # off by default
    # What MCP_SERVER = {..., "TOOL_SEARCH": {"THRESHOLD": 0}} reads (the default server is built
    # here, not replaced: the project's own stays as it is).
    monkeypatch.setitem(mcp_settings._cache, "TOOL_SEARCH", {"THRESHOLD": 0})
    search = site.build_server().tools["search_tools"]
    assert (search.threshold, search.max_results) == (0, 10)
    assert check_tool_search() == []


@pytest.mark.parametrize(("value", "message"), [
    ({"THRESHOLD": -1}, "THRESHOLD must be an integer, 0 or more, not -1"),
    ({"MAX_RESULTS": 0}, "MAX_RESULTS must be an integer, 1 or more, not 0"),
    ({"LIMIT": 3}, "unknown keys LIMIT; the known ones are THRESHOLD, MAX_RESULTS"),
    (True, "must be None or a dict with THRESHOLD and MAX_RESULTS, not True"),
])
def test_a_bad_setting_is_a_system_check_error_and_refused_at_start(monkeypatch, value, message):
    monkeypatch.setitem(mcp_settings._cache, "TOOL_SEARCH", value)
    errors = check_tool_search()
    assert [(e.id, e.msg) for e in errors] == [("mcp_server.E042", f"MCP_SERVER['TOOL_SEARCH']: {message}")]
    with pytest.raises(ImproperlyConfigured, match=re.escape(f"MCP_SERVER['TOOL_SEARCH']: {message}")):
        site.build_server()


@pytest.mark.django_db(transaction=True)
def test_the_search_sees_the_registry_as_administrators_shaped_it(tools):
    server = Server("shaped-search", tools=[*tools, ToolSearch(threshold=50)])
    server.overlay = RegistryOverlay(server)
    PrimitiveSetting.objects.create(server=server.name, kind="tool", name="close_ticket",
                                    permission="auth.view_user")
    PrimitiveSetting.objects.create(server=server.name, kind="tool", name="refund_order",
                                    exposed_name="refund_purchase",
                                    description="Give the money of a purchase back.")
    client = client_of(server)

    def found(query: str) -> list[str]:
        result = client.result("tools/call", {"name": "search_tools", "arguments": {"query": query}})
        return [tool["name"] for tool in result["structuredContent"]["tools"]]

    assert "close_ticket" not in found("close a support ticket")  # restricted in admin
    assert found("give the money of a purchase back")[0] == "refund_purchase"
    assert "refund_order" not in found("refund an order")
