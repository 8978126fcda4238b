"""Per-primitive scopes and Django permissions (``required_scopes=``, ``permissions=``), through
the dispatcher every transport shares (in process, as stdio serves it): hidden from lists,
refused on use. Over HTTP the refusal is a 403 step-up challenge (tests/test_auth_jwt.py)."""

from __future__ import annotations

import pytest

from mcp_protocol.errors import INVALID_PARAMS, INVALID_REQUEST
from mcp_server import Prompt, Resource, ResourceTemplate, Server, ServerContext, Tool
from mcp_server.auth import Principal
from mcp_server.registry import access

READ, WRITE = "files:read", "files:write"


class Archive(Tool):
    """A class-defined tool with scopes and a permission."""

    required_scopes = (WRITE,)
    permissions = ("auth.view_user",)

    def call(self) -> str:
        return "archived"


def build_server() -> Server:
    server = Server("scopes")

    @server.tool
    def open_tool() -> str:
        """Anyone."""
        return "open"

    @server.tool(required_scopes=[READ])
    def read_files(server_context: ServerContext) -> str:
        """Needs files:read."""
        return f"read by {server_context.principal.client_id}"

    @server.tool(permissions=["auth.view_user"])
    def list_users() -> str:
        """Needs a Django permission."""
        return "users"

    server.add_tool(Archive())

    @server.prompt(required_scopes=[READ])
    def summary() -> str:
        """Needs files:read."""
        return "summarise"

    server.add_prompt(Prompt.define(lambda args: "hi", name="open_prompt"))

    @server.resource("files://secret", name="secret", required_scopes=[READ])
    def secret() -> str:
        return "s3cret"

    @server.resource_template("files://{name}/meta", name="meta", required_scopes=[WRITE])
    def meta(name: str) -> str:
        return f"meta of {name}"

    server.add_resource(Resource(uri="files://open", name="open", handler=lambda: "open"))
    return server


def names(client, method: str, key: str, field: str = "name") -> list[str]:
    return sorted(item[field] for item in client.result(method)[key])


def test_without_a_token_scoped_primitives_are_hidden_and_refused_with_a_json_rpc_error(make_client):
    client = make_client(build_server())
    assert names(client, "tools/list", "tools") == ["open_tool"]
    assert names(client, "prompts/list", "prompts") == ["open_prompt"]
    assert names(client, "resources/list", "resources", "uri") == ["files://open"]
    assert client.result("resources/templates/list")["resourceTemplates"] == []
    for method, params, scope in (
            ("tools/call", {"name": "read_files", "arguments": {}}, READ),
            ("prompts/get", {"name": "summary"}, READ),
            ("resources/read", {"uri": "files://secret"}, READ),
            ("resources/read", {"uri": "files://x/meta"}, WRITE)):
        error = client.request(method, params)["error"]
        assert error["code"] == INVALID_REQUEST, method
        assert error["data"] == {"requiredScopes": [scope]}, method
        assert error["message"].startswith("Forbidden: the "), method
    # A permission hides the tool: it is unknown, as an entry an administrator restricted.
    error = client.request("tools/call", {"name": "list_users", "arguments": {}})["error"]
    assert error["code"] == INVALID_PARAMS and "Tool not found" in error["message"]


def test_a_principal_with_the_scopes_sees_and_uses_them(make_client):
    server = build_server()
    server.session.act_for(Principal(scopes=frozenset({READ, WRITE}), client_id="app-1"))
    client = make_client(server)
    assert names(client, "tools/list", "tools") == ["open_tool", "read_files"]  # no permissions: no user
    assert names(client, "prompts/list", "prompts") == ["open_prompt", "summary"]
    assert names(client, "resources/list", "resources", "uri") == ["files://open", "files://secret"]
    assert names(client, "resources/templates/list", "resourceTemplates") == ["meta"]
    result = client.result("tools/call", {"name": "read_files", "arguments": {}})
    assert result["content"][0]["text"] == "read by app-1"
    assert client.result("resources/read", {"uri": "files://x/meta"})["contents"][0]["text"] == "meta of x"
    # Scopes are each needed: files:read alone does not open what needs files:write.
    server.session.act_for(Principal(scopes=frozenset({READ})))
    assert client.request("resources/read", {"uri": "files://x/meta"})["error"]["data"] == {
        "requiredScopes": [WRITE]}


@pytest.mark.django_db(transaction=True)
def test_django_permissions_show_a_primitive_to_the_users_who_hold_them(make_client,
                                                                        short_lived_connections):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    users = get_user_model()
    holder = users.objects.create_user("holder")
    holder.user_permissions.add(Permission.objects.get(codename="view_user", content_type__app_label="auth"))
    other = users.objects.create_user("other")
    root = users.objects.create_superuser("root", password="x")
    access.forget_grants()
    server = build_server()
    client = make_client(server)
    for user, expected in ((holder, ["list_users", "open_tool"]), (other, ["open_tool"]),
                           (root, ["archive", "list_users", "open_tool"])):
        scopes = frozenset({WRITE}) if user is root else frozenset()
        server.session.act_for(Principal(user=users.objects.get(pk=user.pk), scopes=scopes))
        assert server.session.user_id == user.pk
        assert names(client, "tools/list", "tools") == expected, user
    # The superuser lacks files:write now: the class-defined tool is refused for its scope.
    server.session.act_for(Principal(user=root))
    assert client.request("tools/call", {"name": "archive", "arguments": {}})["error"]["data"] == {
        "requiredScopes": [WRITE]}
    server.session.act_for(Principal(user=holder))
    result = client.result("tools/call", {"name": "list_users", "arguments": {}})
    assert result["content"][0]["text"] == "users"


@pytest.mark.parametrize("build, message", [
    (lambda: Tool.define(lambda arguments: "", name="t", required_scopes="files:read"), "list of scopes"),
    (lambda: Tool.define(lambda arguments: "", name="t", required_scopes=["files read"]), "is not a scope"),
    (lambda: Tool.define(lambda arguments: "", name="t", permissions=["view_user"]), "app_label.codename"),
    (lambda: Resource(uri="x://y", name="y", required_scopes=['a"b']), "is not a scope"),
    (lambda: ResourceTemplate(uri_template="x://{y}", name="y", permissions="auth.view_user"), "list of"),
    (lambda: Prompt.define(lambda args: "", name="p", required_scopes=[""]), "is not a scope"),
])
def test_requirements_that_cannot_be_checked_are_refused_when_defined(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tool_hidden_by_a_permission_is_unknown_to_the_modern_header_checks_too():
    """Its x-mcp-header arguments are not checked (that would tell it exists): "not found", as for
    a tool that does not exist."""
    from mcp_server.http import StreamableHTTPTransport

    from .modern_support import post
    from .test_modern_http import build_server as build_modern_server
    from .test_modern_http import call

    server, _state = build_modern_server()
    server.tools["query"].permissions = ("auth.view_user",)
    transport = StreamableHTTPTransport(server)
    try:
        app = transport.as_asgi()
        reply = await post(app, call("query", 1, region="us-west1", limit=42, query="select"),
                           {"mcp-param-region": "eu-west1"})  # the wrong header: not looked at
        assert reply.error == {"code": -32602, "message": "Tool not found: query", "data": {"name": "query"}}
        unknown = await post(app, call("nothing", 2, query="q"))
        assert reply.status == unknown.status
    finally:
        await transport.close()
