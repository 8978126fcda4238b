"""Try it in admin (mcp_server.try_it): the page, its permission, and a run streamed as events,
through the default server's own dispatch as the logged-in user."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import AsyncClient, Client
from django.urls import reverse

from mcp_protocol.versions import LATEST_HANDSHAKE_VERSION
from mcp_server import Server, Tool, get_server
from mcp_server.background import launch
from mcp_server.models import PrimitiveSetting, ToolCall
from mcp_server.registry import access
from mcp_server.registry.overlay import RegistryOverlay
from mcp_server.try_it import runner
from mcp_server.try_it.views import PERMISSION

from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_lived_connections")]

PASSWORD = "a long test password"


def staff(username: str, *permissions: str) -> User:
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label,
                                                         codename=codename))
    return user


def url(name: str) -> str:
    return reverse("mcp_server_try_it", args=[name])


def parse(body: bytes) -> list[tuple[str, Any]]:
    """The events of a text/event-stream body, as (event, data)."""
    events = []
    for block in body.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            fields = dict(line.split(": ", 1) for line in lines)
            events.append((fields["event"], json.loads(fields["data"])))
    return events


async def logged_in(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def run(client: AsyncClient, name: str, data: dict) -> list[tuple[str, Any]]:
    response = await client.post(url(name), data)
    assert response.status_code == 200, response
    assert response["Content-Type"] == "text/event-stream"
    chunks = [chunk async for chunk in response.streaming_content]
    return parse(b"".join(chunks))


@pytest.fixture(autouse=True)
async def _connections_closed():
    """The async tests' ORM work runs on asgiref's thread: its connection is closed after each,
    so none is left open when the test database is dropped."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture(autouse=True)
def _wire_checked(monkeypatch):
    """Every message between the page's session and the server is checked against the schema of
    its revision: the request, what the tool sends, and the response."""
    handle, send = Server.handle_async, runner.PageOutbound.send

    async def checked_handle(server: Server, message: Any, session: Any = None) -> Any:
        check_client_message(message, session.protocol_version)
        response = await handle(server, message, session)
        if response is not None:
            check_server_message(response, session.protocol_version, message["method"])
        return response

    async def checked_send(outbound: Any, message: dict, **kwargs: Any) -> bool:
        check_server_message(message, LATEST_HANDSHAKE_VERSION)
        return await send(outbound, message, **kwargs)

    monkeypatch.setattr(Server, "handle_async", checked_handle)
    monkeypatch.setattr(runner.PageOutbound, "send", checked_send)


@pytest.fixture
def added_tools():
    """Tools added to the default server for one test."""
    server, names = get_server(), []

    def add(tool: Tool) -> Tool:
        server.add_tool(tool)
        names.append(tool.name)
        return tool

    yield add
    for name in names:
        server.tools.pop(name, None)


@pytest.fixture
def admin_shaped_registry():
    """The default server reads the registry rows, as a deployed project does."""
    server = get_server()
    saved = server.overlay
    server.overlay = RegistryOverlay(server)
    access.forget_grants()
    yield server
    server.overlay = saved
    access.forget_grants()


# The page --------------------------------------------------------------------------------------
def test_the_page_shows_a_form_built_from_the_tools_input_schema(added_tools):
    schema = {"properties": {"mode": {"type": "string", "enum": ["fast", "slow"], "default": "slow",
                                      "description": "How to go"},
                             "items": {"type": "array"}, "on": {"type": "boolean"}},
              "required": ["items"]}
    added_tools(Tool.define(lambda arguments: "ok", name="shaped", input_schema=schema))
    client = Client()
    client.force_login(staff("editor", PERMISSION))
    add = client.get(url("add"))
    assert add.status_code == 200
    page = add.content.decode()
    assert '<input type="number" name="a" step="any" required id="id_a">' in page
    assert '<input type="number" name="b" step="any" required id="id_b">' in page
    assert "Add two numbers" in page and 'id="try-it-form"' in page
    shaped = client.get(url("shaped")).content.decode()
    assert '<option value="&quot;slow&quot;" selected>slow</option>' in shaped
    assert '<div class="help" id="id_mode_helptext"><div>How to go</div></div>' in shaped
    assert '<label for="id_items" class="required">items:</label>' in shaped
    assert '<textarea name="items" cols="60" rows="4"' in shaped
    assert '<select name="on" id="id_on">' in shaped
    # An unknown tool is a 404.
    assert client.get(url("no_such_tool")).status_code == 404


def test_only_staff_holding_the_permission_reach_it():
    anonymous = Client().get(url("add"))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("admin:login"))
    not_staff = Client()
    not_staff.force_login(User.objects.create_user("visitor", password=PASSWORD))
    assert not_staff.get(url("add")).status_code == 302
    without = Client()
    without.force_login(staff("viewer", "mcp_server.view_primitivesetting"))
    assert without.get(url("add")).status_code == 403
    assert without.post(url("add"), {"a": "2", "b": "3"}).status_code == 403
    holder = Client()
    holder.force_login(staff("editor", PERMISSION))
    assert holder.get(url("add")).status_code == 200


def test_invalid_arguments_get_field_errors_and_nothing_runs(added_tools):
    calls = []
    added_tools(Tool.define(lambda arguments: calls.append(arguments) or "ran", name="picky", input_schema={
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}, "n": {"type": "integer"}},
        "required": ["code"]}))
    client = Client()
    client.force_login(staff("editor", PERMISSION))
    refused = client.post(url("picky"), {"code": "abc", "n": "x"})
    assert refused.status_code == 400
    fields = refused.content.decode()
    assert "Enter a whole number." in fields
    assert client.post(url("picky"), {"code": "abc"}).status_code == 400
    schema_error = client.post(url("picky"), {"code": "abc"}).content.decode()
    assert "&#x27;abc&#x27; does not match &#x27;^[A-Z]+$&#x27;" in schema_error
    assert calls == []


# A run -----------------------------------------------------------------------------------------
async def test_the_stream_carries_progress_then_the_result():
    user = await sync_to_async(staff)("editor", PERMISSION)
    client = await logged_in(user)
    events = await run(client, "slow_count", {"count": "3", "delay": "0.01"})
    assert [kind for kind, _data in events] == ["progress", "progress", "progress", "result"]
    assert [data["progress"] for _kind, data in events[:3]] == [1, 2, 3]
    assert events[2][1] == {"progress": 3, "total": 3, "message": "counted 3"}
    assert events[3][1] == {"content": [{"type": "text", "text": "Counted to 3"}], "isError": False}
    add = await run(client, "add", {"a": "2", "b": "3"})
    assert add == [("result", {"content": [{"type": "text", "text": '{"sum": 5}'}],
                               "structuredContent": {"sum": 5}, "isError": False})]


async def test_each_event_is_sent_when_it_happens(added_tools):
    """The progress is on the wire while the tool still waits: nothing is held back for the end."""
    gate = asyncio.Event()

    async def gated(arguments: dict, server_context: Any) -> str:
        await server_context.report_progress(1, total=2, message="waiting for the test")
        await gate.wait()
        return "opened"

    added_tools(Tool.define(gated, name="gated"))
    client = await logged_in(await sync_to_async(staff)("editor", PERMISSION))
    response = await client.post(url("gated"), {})
    chunks = aiter(response.streaming_content)
    first = await asyncio.wait_for(anext(chunks), PATIENCE)
    assert parse(first) == [("progress", {"progress": 1, "total": 2, "message": "waiting for the test"})]
    gate.set()
    rest = parse(b"".join([chunk async for chunk in chunks]))
    assert rest == [("result", {"content": [{"type": "text", "text": "opened"}], "isError": False})]


async def test_log_messages_reach_the_page_at_every_level():
    client = await logged_in(await sync_to_async(staff)("editor", PERMISSION))
    events = await run(client, "diagnose", {})
    assert [(kind, data["level"]) for kind, data in events[:-1]] == [
        ("log", "debug"), ("log", "info"), ("log", "warning"), ("log", "error")]
    assert events[1][1] == {"level": "info", "logger": "diagnose", "data": {"check": "the database answers"}}
    assert events[-1][0] == "result"


async def test_requests_to_the_client_are_refused_with_a_clear_message():
    client = await logged_in(await sync_to_async(staff)("editor", PERMISSION))
    [(kind, error)] = await run(client, "confirm_action", {"action": "deploy"})
    assert kind == "error"
    assert error["message"] == f"elicitation/create: {runner.REQUESTS_REFUSED}"


async def test_a_restricted_tool_is_not_found_for_a_user_without_its_permission(admin_shaped_registry):
    await PrimitiveSetting.objects.acreate(server=get_server().name, kind="tool", name="add",
                                           permission="mcp_server.view_session")
    editor = await logged_in(await sync_to_async(staff)("editor", PERMISSION))
    [(kind, error)] = await run(editor, "add", {"a": "2", "b": "3"})
    # What an MCP client of this user gets: the unknown-tool error.
    assert (kind, error["code"], error["message"]) == ("error", -32602, "Tool not found: add")
    holder = await logged_in(await sync_to_async(staff)("holder", PERMISSION, "mcp_server.view_session"))
    [(kind, result)] = await run(holder, "add", {"a": "2", "b": "3"})
    assert (kind, result["structuredContent"]) == ("result", {"sum": 5})


async def test_a_tool_curated_in_admin_is_tried_under_its_exposed_name(admin_shaped_registry):
    await PrimitiveSetting.objects.acreate(server=get_server().name, kind="tool", name="add",
                                           exposed_name="add_ten", fixed_arguments={"b": 10})
    editor = await logged_in(await sync_to_async(staff)("editor", PERMISSION))
    page = (await editor.get(url("add_ten"))).content.decode()
    assert 'name="a"' in page and 'name="b"' not in page  # the curated form: b is fixed
    [(kind, result)] = await run(editor, "add_ten", {"a": "2"})
    assert (kind, result["structuredContent"]) == ("result", {"sum": 12})


async def test_a_background_tool_runs_as_a_call_recorded_for_the_user():
    user = await sync_to_async(staff)("editor", PERMISSION)
    client = await logged_in(user)
    events = await run(client, "count_in_background", {"to": "2"})
    assert events == [("progress", {"progress": 1, "total": 2, "message": "1 of 2"}),
                      ("progress", {"progress": 2, "total": 2, "message": "2 of 2"}),
                      ("result", {"content": [{"type": "text", "text": "Counted to 2"}], "isError": False})]
    call = await ToolCall.objects.aget(tool="count_in_background")
    assert (call.state, call.delivery, call.owner_id) == ("completed", "local", user.pk)
    assert call.arguments == {"to": 2}


# The runner ------------------------------------------------------------------------------------
async def call_of(tool: str, state: str) -> ToolCall:
    deadline = time.monotonic() + PATIENCE
    while True:
        call = await ToolCall.objects.filter(tool=tool).afirst()
        if call is not None and call.state == state:
            return call
        assert time.monotonic() < deadline, f"the call of {tool} is {call and call.state}, not {state}"
        await asyncio.sleep(0.05)


async def test_leaving_the_page_cancels_the_call():
    user = await sync_to_async(staff)("editor", PERMISSION)
    events = runner.run(get_server(), "count_in_background", {"to": 600}, user.pk)
    kind, data = await asyncio.wait_for(anext(events), PATIENCE)
    assert (kind, data["progress"]) == ("progress", 1)
    await events.aclose()  # what a page that goes away (or its Stop button) does to the stream
    call = await call_of("count_in_background", "cancelled")
    assert call.progress is not None and call.progress < 600


async def test_a_background_tool_runs_here_on_a_process_with_a_broker(added_tools, monkeypatch):
    """With Celery configured and this process serving HTTP, a call made in process (no HTTP
    session: Try it, server.handle()) still runs here: no worker could reach its session."""

    def queued(call_id: str) -> None:
        raise AssertionError("queued for a worker that cannot reach this call's session")

    monkeypatch.setattr(launch, "celery_enabled", lambda: True)
    monkeypatch.setattr(launch, "enqueue", queued)
    server = get_server()
    runtime = SimpleNamespace(channel="process-channel", channel_key="process-channel", calls={})
    http = SimpleNamespace(current_runtime=lambda: runtime, group="web",
                           options=SimpleNamespace(process_heartbeat_interval=PATIENCE))
    saved = list(server._transports)
    server.transport = http
    try:
        user = await sync_to_async(staff)("editor", PERMISSION)
        events = [event async for event in runner.run(server, "count_in_background", {"to": 1}, user.pk)]
    finally:
        server._transports = saved
    assert events[-1] == ("result", {"content": [{"type": "text", "text": "Counted to 1"}], "isError": False})
    call = await ToolCall.objects.aget(tool="count_in_background")
    assert (call.delivery, call.state) == ("local", "completed")


async def test_a_quiet_tool_gets_keepalives_and_loses_nothing_after_them(added_tools):
    gate = asyncio.Event()

    async def quiet(arguments: dict, server_context: Any) -> str:
        await gate.wait()
        await server_context.report_progress(1)
        return "spoke"

    added_tools(Tool.define(quiet, name="quiet"))
    events = runner.run(get_server(), "quiet", {}, None, keepalive=0.01)
    assert await asyncio.wait_for(anext(events), PATIENCE) == ("keepalive", None)
    gate.set()
    rest = [event async for event in events if event[0] != "keepalive"]
    assert rest == [("progress", {"progress": 1}),
                    ("result", {"content": [{"type": "text", "text": "spoke"}], "isError": False})]
