"""The registry as administrators shape it (mcp_server.registry), served in process: switches,
overrides and restrictions of what code registers, and prompts and resources defined as rows."""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.files.base import ContentFile

from mcp_server import Prompt, Server
from mcp_server.models import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate
from mcp_server.registry import access
from mcp_server.registry.overlay import RegistryOverlay
from mcp_server.registry.stored import check_prompt, check_resource_template
from mcp_server.session import ServerSession

from .harness import InProcessClient
from .waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

NAME = "overlay-test"
Kind = PrimitiveSetting.Kind


@pytest.fixture
def server():
    server = Server(NAME)

    @server.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool
    def wipe() -> str:
        """Delete everything."""
        return "wiped"

    server.add_prompt(Prompt.define(lambda args: "hello", name="hello"))

    server.overlay = RegistryOverlay(server)
    access.forget_grants()
    yield server
    access.forget_grants()


def client_of(server: Server, user: User | None = None) -> InProcessClient:
    server.session = ServerSession(server)  # a new connection
    client = InProcessClient(server)
    client.initialize()
    server.session.user_id = user.pk if user is not None else None
    return client


def tool_names(client: InProcessClient) -> list[str]:
    return [tool["name"] for tool in client.result("tools/list")["tools"]]


def setting(kind: str, name: str, **fields) -> PrimitiveSetting:
    return PrimitiveSetting.objects.create(server=NAME, kind=kind, name=name, **fields)


def changed(server: Server) -> None:
    """What a save's message does in each process."""
    server.overlay.invalidate()


def test_a_disabled_tool_is_gone_from_the_list_and_unknown_to_calls(server):
    client = client_of(server)
    assert tool_names(client) == ["echo", "wipe"]
    setting(Kind.TOOL, "wipe", enabled=False)
    changed(server)
    assert tool_names(client) == ["echo"]
    hidden = client.request("tools/call", {"name": "wipe", "arguments": {}})
    never = client.request("tools/call", {"name": "nothing", "arguments": {}})
    # The same error as a tool that never existed, but for its name: nothing tells them apart.
    assert hidden["error"]["code"] == never["error"]["code"] == -32602
    assert hidden["error"]["message"] == "Tool not found: wipe"


def test_overrides_change_what_clients_see_not_what_runs(server):
    setting(Kind.TOOL, "echo", title="Echo!", description="Says it back",
            annotations={"read_only_hint": True})
    client = client_of(server)
    entry = next(t for t in client.result("tools/list")["tools"] if t["name"] == "echo")
    assert (entry["title"], entry["description"]) == ("Echo!", "Says it back")
    assert entry["annotations"]["readOnlyHint"] is True
    called = client.result("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert called["content"][0]["text"] == "hi"
    # The code's own tool is left as it was.
    assert server.tools["echo"].title is None


def test_a_permission_restricts_a_tool_to_the_users_holding_it(server):
    permission = Permission.objects.get(codename="view_session", content_type__app_label="mcp_server")
    setting(Kind.TOOL, "wipe", permission="mcp_server.view_session")
    holder = User.objects.create_user("holder")
    holder.user_permissions.add(permission)
    other = User.objects.create_user("other")
    admin = User.objects.create_superuser("admin")
    assert tool_names(client_of(server)) == ["echo"]  # anonymous
    assert tool_names(client_of(server, other)) == ["echo"]
    refused = client_of(server, other).request("tools/call", {"name": "wipe", "arguments": {}})
    assert refused["error"]["message"] == "Tool not found: wipe"
    assert tool_names(client_of(server, holder)) == ["echo", "wipe"]
    assert tool_names(client_of(server, admin)) == ["echo", "wipe"]
    holder.is_active = False
    holder.save()
    access.forget_grants()
    assert tool_names(client_of(server, holder)) == ["echo"]


def test_groups_restrict_a_tool_to_their_members(server):
    staff = Group.objects.create(name="operators")
    restricted = setting(Kind.TOOL, "wipe")
    restricted.groups.add(staff)
    member, outsider = User.objects.create_user("member"), User.objects.create_user("outsider")
    member.groups.add(staff)
    changed(server)
    assert tool_names(client_of(server, member)) == ["echo", "wipe"]
    assert tool_names(client_of(server, outsider)) == ["echo"]


def test_a_prompt_defined_as_a_row_is_listed_and_filled_in(server):
    StoredPrompt.objects.create(
        server=NAME, name="review", title="Code review", description="Review a change",
        arguments=[{"name": "language", "required": True}, {"name": "focus"}],
        messages=[{"role": "user", "text": "Review this {language} change, looking at {focus}."},
                  {"role": "assistant", "text": "Sure: {{braces}} stay."}])
    client = client_of(server)
    listed = {p["name"]: p for p in client.result("prompts/list")["prompts"]}
    assert set(listed) == {"hello", "review"}
    assert listed["review"]["arguments"] == [{"name": "language", "required": True}, {"name": "focus"}]
    result = client.result("prompts/get", {"name": "review", "arguments": {"language": "Python",
                                                                           "focus": "naming"}})
    assert [m["content"]["text"] for m in result["messages"]] == [
        "Review this Python change, looking at naming.", "Sure: {braces} stay."]
    missing = client.request("prompts/get", {"name": "review", "arguments": {}})
    assert missing["error"]["code"] == -32602


def test_resources_defined_as_rows_are_read(server, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    StoredResource.objects.create(server=NAME, uri="docs://faq", name="faq", text="Ask away.")
    logo = StoredResource(server=NAME, uri="docs://logo", name="logo", mime_type="image/png")
    logo.file.save("logo.png", ContentFile(b"\x89PNG..."), save=True)
    StoredResourceTemplate.objects.create(server=NAME, uri_template="docs://users/{user}", name="user",
                                          text="The page of {user}.")
    client = client_of(server)
    assert {r["uri"] for r in client.result("resources/list")["resources"]} == {"docs://faq", "docs://logo"}
    assert client.result("resources/read", {"uri": "docs://faq"})["contents"][0]["text"] == "Ask away."
    blob = client.result("resources/read", {"uri": "docs://logo"})["contents"][0]
    assert (base64.b64decode(blob["blob"]), blob["mimeType"]) == (b"\x89PNG...", "image/png")
    page = client.result("resources/read", {"uri": "docs://users/ada"})["contents"][0]
    assert page["text"] == "The page of ada."
    assert client.request("resources/read", {"uri": "docs://nothing"})["error"]["message"] == \
        "Resource not found: docs://nothing"


def test_a_row_never_replaces_what_code_registers(server):
    StoredPrompt.objects.create(server=NAME, name="hello", messages=[{"role": "user", "text": "row"}])
    client = client_of(server)
    assert client.result("prompts/get", {"name": "hello"})["messages"][0]["content"]["text"] == "hello"


def test_rows_of_another_server_are_not_seen(server):
    PrimitiveSetting.objects.create(server="another", kind=Kind.TOOL, name="wipe", enabled=False)
    assert tool_names(client_of(server)) == ["echo", "wipe"]


def test_a_snapshot_is_kept_until_a_change_is_announced(server, django_assert_num_queries):
    client = client_of(server)
    tool_names(client)  # built
    with django_assert_num_queries(0):
        tool_names(client)
    setting(Kind.TOOL, "wipe", enabled=False)
    assert tool_names(client) == ["echo", "wipe"]  # not yet told
    changed(server)
    assert tool_names(client) == ["echo"]


@pytest.mark.parametrize(("arguments", "messages", "error"), [
    ([], [{"role": "user", "text": "{who}"}], "{who}, which no argument declares"),
    ([{"name": "who"}], [{"role": "user", "text": "{who.__class__}"}], "is not a placeholder"),
    ([{"name": "who"}], [{"role": "user", "text": "{who!r}"}], "is not a placeholder"),
    ([{"name": "who"}], [{"role": "user", "text": "{who"}], "unbalanced braces"),
    ([{"name": "who"}], [{"role": "system", "text": "x"}], '"role": "user" or "assistant"'),
    ([{"name": "who"}, {"name": "who"}], [{"role": "user", "text": "x"}], "same name"),
    ([{"name": "not valid"}], [{"role": "user", "text": "x"}], "letters, digits and _"),
    ([{"name": "who", "required": "yes"}], [{"role": "user", "text": "x"}], "true or false"),
    ([], [], "non-empty list"),
])
def test_prompt_definitions_are_checked(arguments, messages, error):
    with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")
                       .replace("(", r"\(").replace(".", r"\.")):
        check_prompt(arguments, messages)


def test_resource_template_definitions_are_checked():
    check_resource_template("docs://{a}/{b}", "{a} and {b}")
    with pytest.raises(ValueError, match="does not have"):
        check_resource_template("docs://{a}", "{b}")
    with pytest.raises(ValueError, match=r"no \{variable\}"):
        check_resource_template("docs://fixed", "text")


def test_a_process_that_missed_the_message_sees_the_change_marker(server):
    """No channel-layer message (stdio, or one lost): the change marker, looked at once a second."""
    from mcp_server.registry import counter

    client = client_of(server)
    assert tool_names(client) == ["echo", "wipe"]
    setting(Kind.TOOL, "wipe", enabled=False)
    counter.mark_change(server)
    wait_until(lambda: tool_names(client) == ["echo"], what="the marker to drop the snapshot")


@pytest.mark.asyncio
async def test_a_hidden_tool_is_unknown_to_the_modern_header_checks_too(short_lived_connections):
    """Its x-mcp-header arguments are not checked (that would tell it exists): "not found"."""
    from mcp_server.http import StreamableHTTPTransport

    from .modern_support import post
    from .test_modern_http import build_server, call

    server, _state = build_server()
    server.overlay = RegistryOverlay(server)
    await PrimitiveSetting.objects.acreate(server=server.name, kind=Kind.TOOL, name="query", enabled=False)
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
