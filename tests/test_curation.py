"""Curation of any tool: renamed, described for an assistant, arguments hidden or fixed, restricted
to a permission or groups; in code (``mcp_server.curate``) and in admin (``PrimitiveSetting``),
served in process."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, Permission, User

import mcp_server
from mcp_server import Server, Tool, curate
from mcp_server.http import StreamableHTTPTransport
from mcp_server.invoke import run_in_thread
from mcp_server.models import PrimitiveSetting
from mcp_server.registry import access
from mcp_server.registry.overlay import RegistryOverlay

from .admin_support import form_errors
from .auth_support import open_session, post_json
from .test_admin_registry import LIST, change, row
from .test_api import API, api, user_with
from .test_audit import audit_on  # noqa: F401
from .test_audit import rows as audit_rows
from .test_registry_overlay import client_of, tool_names

pytestmark = [pytest.mark.django_db(transaction=True)]

NAME = "curation-test"
Kind = PrimitiveSetting.Kind
calls: list[dict] = []


def make_server() -> Server:
    server = Server(NAME)

    @server.tool
    def export_rows(table: str, tenant: str = "public", limit: int = 100, verbose: bool = False) -> str:
        """Export rows of a table."""
        calls.append({"table": table, "tenant": tenant, "limit": limit, "verbose": verbose})
        return f"{table}@{tenant}:{limit}:{verbose}"

    return server


@pytest.fixture
def server():
    calls.clear()
    access.forget_grants()
    server = make_server()
    yield server
    access.forget_grants()


def listed(client, name: str) -> dict:
    return next(tool for tool in client.result("tools/list")["tools"] if tool["name"] == name)


def test_a_curated_tool_is_renamed_described_and_runs_with_its_fixed_arguments(server):
    original = server.tools.pop("export_rows")
    server.add_tool(curate(original, name="export_customers", title="Export customers",
                           description="Export the customers of the ACME tenant.",
                           hidden_arguments=["verbose"],
                           fixed_arguments={"tenant": "acme", "table": "customer"}))
    client = client_of(server)
    entry = listed(client, "export_customers")
    assert (entry["title"], entry["description"]) == (
        "Export customers", "Export the customers of the ACME tenant.")
    assert set(entry["inputSchema"]["properties"]) == {"limit"}
    assert "required" not in entry["inputSchema"]
    # What the client sends for a fixed or hidden argument never reaches the handler.
    result = client.result("tools/call", {"name": "export_customers",
                                          "arguments": {"limit": 5, "tenant": "evil", "verbose": True}})
    assert result["content"][0]["text"] == "customer@acme:5:False"
    assert calls == [{"table": "customer", "tenant": "acme", "limit": 5, "verbose": False}]
    unknown = client.request("tools/call", {"name": "export_rows", "arguments": {"table": "x"}})
    assert unknown["error"]["message"] == "Tool not found: export_rows"
    assert original.name == "export_rows" and "tenant" in original.input_schema.schema["properties"]
    # Curated again: what it hides and fixes adds up, and it still knows the code's tool.
    again = curate(server.tools["export_customers"], hidden_arguments=["limit"])
    assert again.original is original and again.hidden_arguments == ("limit", "verbose")
    assert again.fixed_arguments == {"tenant": "acme", "table": "customer"}
    assert again.input_schema.schema["properties"] == {}


@pytest.mark.parametrize(("fields", "message"), [
    ({"hidden_arguments": ["table"]},
     "argument 'table' of tool 'export_rows' is required and has no default"),
    ({"fixed_arguments": {"limit": "ten"}}, "fixed value 'ten' of argument 'limit' of tool 'export_rows' "
                                            "does not match its schema"),
    ({"hidden_arguments": ["colour"]}, "tool 'export_rows' has no argument 'colour'"),
    ({"hidden_arguments": ["limit"], "fixed_arguments": {"limit": 3}}, "is both hidden and fixed"),
    ({"name": "bad name"}, "invalid tool name 'bad name'"),
    ({"permission": "no_dot"}, "is not an 'app_label.codename' string"),
])
def test_a_curation_that_cannot_hold_is_refused_naming_what_is_wrong(server, fields, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        curate(server.tools["export_rows"], **fields)


def test_a_permission_and_groups_given_in_code_restrict_list_and_call(server):
    permission = Permission.objects.get(codename="view_session", content_type__app_label="mcp_server")
    operators = Group.objects.create(name="operators")
    server.add_tool(curate(server.tools["export_rows"], name="export_restricted",
                           permission="mcp_server.view_session", groups=["operators"]))
    holder, member, both = (User.objects.create_user(name) for name in ("holder", "member", "both"))
    holder.user_permissions.add(permission)
    member.groups.add(operators)
    both.user_permissions.add(permission)
    both.groups.add(operators)
    admin = User.objects.create_superuser("admin")
    for user, sees in ((None, False), (holder, False), (member, False), (both, True), (admin, True)):
        client = client_of(server, user)
        assert ("export_restricted" in tool_names(client)) is sees
        called = client.request("tools/call", {"name": "export_restricted", "arguments": {"table": "t"}})
        if sees:
            assert called["result"]["content"][0]["text"] == "t@public:100:False"
        else:  # the same error as a tool that does not exist
            assert called["error"] == {"code": -32602, "message": "Tool not found: export_restricted",
                                       "data": {"name": "export_restricted"}}


def test_a_class_based_tool_is_curated_too():
    class Greet(Tool):
        input_schema = {"properties": {"who": {"type": "string"}, "punctuation": {"type": "string"}},
                        "required": ["who"]}

        def call(self, who: str, punctuation: str = "!") -> str:
            return f"hello {who}{punctuation}"

    server = Server(NAME, tools=[curate(Greet, name="greet_world", fixed_arguments={"who": "world"},
                                        hidden_arguments=["punctuation"])])
    client = client_of(server)
    assert listed(client, "greet_world")["inputSchema"]["properties"] == {}
    result = client.result("tools/call", {"name": "greet_world", "arguments": {"punctuation": "?"}})
    assert result["content"][0]["text"] == "hello world!"


# --- In admin: PrimitiveSetting's exposed name, hidden and fixed arguments ---------------------

@pytest.fixture
def overlaid(server):
    server.overlay = RegistryOverlay(server)
    return server


def test_an_admin_row_renames_a_tool_and_hides_and_fixes_its_arguments(overlaid):
    PrimitiveSetting.objects.create(server=NAME, kind=Kind.TOOL, name="export_rows",
                                    exposed_name="export_orders",
                                    description="Export the orders.", hidden_arguments=["verbose"],
                                    fixed_arguments={"table": "order"})
    client = client_of(overlaid)
    assert tool_names(client) == ["export_orders"]
    entry = listed(client, "export_orders")
    assert entry["description"] == "Export the orders."
    assert set(entry["inputSchema"]["properties"]) == {"tenant", "limit"}
    result = client.result("tools/call", {"name": "export_orders", "arguments": {"table": "x", "limit": 2}})
    assert result["content"][0]["text"] == "order@public:2:False"
    assert client.request("tools/call", {"name": "export_rows", "arguments": {"table": "x"}})["error"][
        "message"] == "Tool not found: export_rows"
    assert overlaid.known_tool("export_orders").fixed_arguments == {"table": "order"}


def test_a_row_whose_curation_no_longer_fits_the_code_leaves_the_tool_out(overlaid, caplog):
    PrimitiveSetting.objects.create(server=NAME, kind=Kind.TOOL, name="export_rows",
                                    fixed_arguments={"limit": "many"})
    assert tool_names(client_of(overlaid)) == []  # not served without its fixed value
    assert "is left out of the registry: fixed value 'many'" in caplog.text


def test_a_renamed_tool_never_takes_the_name_of_another(overlaid):
    @overlaid.tool
    def other() -> str:
        return "other"

    PrimitiveSetting.objects.create(server=NAME, kind=Kind.TOOL, name="export_rows", exposed_name="other")
    client = client_of(overlaid)
    assert tool_names(client) == ["other"]
    assert client.result("tools/call", {"name": "other", "arguments": {}})["content"][0]["text"] == "other"


def test_the_admin_form_saves_the_curation_and_refuses_what_cannot_hold(admin_client, announced):
    admin_client.get(LIST)
    slow = row(Kind.TOOL, "slow_count")
    page = admin_client.get(f"{LIST}{slow.pk}/change/")
    assert b'name="exposed_name"' in page.content and b"Arguments in code" in page.content
    refusals = [
        ({"exposed_name": "echo"}, "'echo' is the name of another tool registered in code."),
        ({"exposed_name": "no spaces"}, "invalid tool name 'no spaces'"),
        ({"hidden_arguments": '["count"]'}, "Argument 'count' of tool 'slow_count' is required and has no "
                                            "default: it cannot be hidden; fix it to a value instead."),
        ({"fixed_arguments": '{"count": "three"}'}, "does not match its schema"),
        ({"hidden_arguments": '{"delay": 1}'}, "Give a JSON list of argument names"),
    ]
    for fields, message in refusals:
        response = change(admin_client, slow, **fields)
        assert response.status_code == 200 and message in str(form_errors(response)), fields
    assert announced == []
    response = change(admin_client, slow, exposed_name="count_slowly", hidden_arguments='["delay"]',
                      fixed_arguments='{"count": 2}')
    assert response.status_code == 302, form_errors(response)
    slow.refresh_from_db()
    assert (slow.exposed_name, slow.hidden_arguments, slow.fixed_arguments) == (
        "count_slowly", ["delay"], {"count": 2})
    assert announced == [(mcp_server.get_server().name, {"tools"})]
    echo = row(Kind.TOOL, "echo")
    taken = change(admin_client, echo, exposed_name="count_slowly")
    assert "'count_slowly' is already the exposed name of the tool slow_count." in str(form_errors(taken))
    prompt = PrimitiveSetting.objects.filter(kind=Kind.PROMPT).first()
    refused = change(admin_client, prompt, exposed_name="renamed")
    assert "Only tools have an exposed name" in str(form_errors(refused))


async def test_a_background_tool_renamed_in_admin_runs_with_fixed_arguments_and_is_audited_so(
        audit_on):  # noqa: F811
    """The call is queued, run (here: this process's runner) and audited under the exposed name;
    the runner finds the curated tool, fixed arguments included."""
    from mcp_server.models import ToolCall

    server = Server("curated-background")

    @server.tool(background=True)
    def slow_sum(a: int, b: int) -> str:
        """Add, in the background."""
        return str(a + b)

    server.overlay = RegistryOverlay(server)
    await run_in_thread(PrimitiveSetting.objects.create, server=server.name, kind=Kind.TOOL, name="slow_sum",
                        exposed_name="add_ten", fixed_arguments={"b": 10})
    transport = StreamableHTTPTransport(server, enable_json_response=True)
    app = transport.as_asgi()
    session = await open_session(app, {})
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "add_ten", "arguments": {"a": 2, "b": 99}}}
    _raw, body = await post_json(app, message, {}, session)
    assert body["result"]["content"][0]["text"] == "12"
    await transport.close()
    [row] = await audit_rows(session_id=session)
    call = await run_in_thread(ToolCall.objects.get)
    assert (row.name, row.outcome, call.tool) == ("add_ten", "ok", "add_ten")
    # What the call's record keeps: the arguments its curated schema declares (b is not one).
    assert row.arguments == {"a": 2}


def test_the_rest_api_takes_the_same_curation_with_the_same_checks():
    client = api(user_with("view_primitivesetting", "change_primitivesetting"))
    refusals = [
        ({"exposed_name": "echo"}, "exposed_name", "'echo' is the name of another tool registered in code."),
        ({"hidden_arguments": ["count"]}, "non_field_errors", "Argument 'count' of tool 'slow_count' is "
                                                              "required and has no default"),
        ({"fixed_arguments": {"delay": "soon"}}, "non_field_errors", "does not match its schema"),
        ({"fixed_arguments": ["delay"]}, "fixed_arguments", "Give a JSON object"),
    ]
    for body, field, message in refusals:
        refused = client.patch(API + "tools/slow_count/", body, format="json")
        assert refused.status_code == 400 and message in refused.json()[field][0], refused.json()
    assert not PrimitiveSetting.objects.exists()
    curation = {"exposed_name": "count_slowly", "hidden_arguments": ["delay"],
                "fixed_arguments": {"count": 2}}
    saved = client.patch(API + "tools/slow_count/", curation, format="json")
    assert saved.status_code == 200, saved.content
    assert {key: saved.json()[key] for key in ("exposed_name", "hidden_arguments", "fixed_arguments")} == {
        "exposed_name": "count_slowly", "hidden_arguments": ["delay"], "fixed_arguments": {"count": 2}}
    # Hiding what is fixed is checked against the row as saved.
    both = client.patch(API + "tools/slow_count/", {"hidden_arguments": ["count"]}, format="json")
    assert "is both hidden and fixed" in both.json()["non_field_errors"][0]
