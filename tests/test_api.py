"""The REST API (``/api/mcp/``): Django model permissions, validation as 400 with field messages,
every operation, the OpenAPI schema, and a change made through it reaching a daphne process."""

from __future__ import annotations

import base64
import itertools

import httpx
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from mcp_server.api.permissions import CROSS_SITE
from mcp_server.models import PrimitiveSetting, Session, StoredPrompt, StoredResource, ToolCall
from mcp_server.site import get_server, get_transport

from .http_cluster import (
    cluster,
    ends,
    events_until,
    new_session,
    open_stream,
    post_checked,
    require_services,
)
from .http_harness import HTTPClient
from .waiting import PATIENCE

API = "/api/mcp/"
PASSWORD = "a long test password"
_users = itertools.count()


def user_with(*codenames: str, staff: bool = True) -> User:
    """A fresh user (staff by default) holding these permissions of mcp_server's models."""
    user = User.objects.create_user(f"user{next(_users)}", password=PASSWORD, is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="mcp_server",
                                                         codename__in=codenames))
    return user


def api(user: User | None = None) -> APIClient:
    """A client logged in as ``user`` (its Django session: no password hashing per request)."""
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


def basic(user: User) -> str:
    return "Basic " + base64.b64encode(f"{user.username}:{PASSWORD}".encode()).decode()


def session_row(session_id: str, **fields) -> Session:
    from django.utils import timezone

    return Session.objects.create(id=session_id, protocol_version="2025-11-25", server=get_transport().group,
                                  client_info={"name": "probe", "version": "1.2"},
                                  last_activity=timezone.now(), **fields)


def call_row(call_id: str, state: str = ToolCall.State.RUNNING, **fields) -> ToolCall:
    return ToolCall.objects.create(id=call_id, server=get_transport().group, tool="slow_count",
                                   arguments={"count": 5}, state=state, **fields)


# Permissions ------------------------------------------------------------------------------------
ENDPOINTS = ["tools/", "tools/echo/", "registered-prompts/", "prompts/", "resources/",
             "resource-templates/", "sessions/", "calls/", "audit/", "schema/", ""]


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_anonymous_gets_401_with_a_basic_challenge(endpoint):
    response = api().get(API + endpoint)
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Basic ")


@pytest.mark.django_db
def test_a_wrong_password_gets_401_and_the_right_one_gets_in():
    user = user_with("view_primitivesetting")
    client = api()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"nobody:wrong").decode())
    assert client.get(API + "tools/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=basic(user))
    assert client.get(API + "tools/").status_code == 200


@pytest.mark.django_db
def test_staff_without_the_model_permission_gets_403_for_every_operation():
    session_row("s-perm")
    call_row("c-perm")
    prompt = StoredPrompt.objects.create(server=get_server().name, name="p",
                                         messages=[{"role": "user", "text": "hi"}])
    client = api(user_with())  # staff, no permission at all
    attempts = [
        ("get", "tools/", None), ("patch", "tools/echo/", {"enabled": False}),
        ("get", "registered-resources/demo://readme/", None),
        ("get", "prompts/", None), ("post", "prompts/", {"name": "q", "messages": []}),
        ("patch", f"prompts/{prompt.pk}/", {"title": "x"}), ("delete", f"prompts/{prompt.pk}/", None),
        ("get", "resources/", None), ("get", "resource-templates/", None),
        ("get", "sessions/", None), ("delete", "sessions/s-perm/", None),
        ("get", "calls/", None), ("get", "calls/c-perm/", None), ("post", "calls/c-perm/cancel/", None),
    ]
    for method, path, data in attempts:
        response = getattr(client, method)(API + path, data, format="json")
        assert response.status_code == 403, (method, path, response.status_code)
    assert not PrimitiveSetting.objects.exists()
    assert StoredPrompt.objects.get().title == ""
    assert Session.objects.filter(id="s-perm").exists()
    assert not ToolCall.objects.get(id="c-perm").cancel_requested


@pytest.mark.django_db
def test_each_permission_opens_only_its_own_operation():
    call_row("c-view")
    viewer = api(user_with("view_primitivesetting", "view_toolcall", "add_toolcall", "add_storedprompt"))
    assert viewer.get(API + "tools/").status_code == 200
    assert viewer.patch(API + "tools/echo/", {"enabled": False}, format="json").status_code == 403
    assert viewer.get(API + "calls/c-view/").status_code == 200
    # cancel is an action of its own: it needs the change permission, not add.
    assert viewer.post(API + "calls/c-view/cancel/").status_code == 403
    assert viewer.get(API + "prompts/").status_code == 403  # add without view
    created = viewer.post(API + "prompts/", {"name": "hello", "messages": [{"role": "user", "text": "hi"}]},
                          format="json")
    assert created.status_code == 201, created.content


# Validation -------------------------------------------------------------------------------------
PROMPT_ERRORS = [
    ({"name": "p", "arguments": [{"name": "not an identifier"}], "messages": [{"role": "user", "text": "x"}]},
     "arguments", "letters, digits and _"),
    ({"name": "p", "arguments": [], "messages": [{"role": "user", "text": "Hi {who}"}]},
     "messages", "{who}, which no argument declares"),
    ({"name": "p", "messages": [{"role": "system", "text": "x"}]}, "messages", '"user" or "assistant"'),
    ({"name": "p", "messages": []}, "messages", "non-empty list"),
    ({"name": "greeting", "messages": [{"role": "user", "text": "x"}]}, "name", "registered in code"),
    ({"name": "p", "messages": [{"role": "user", "text": "x"}], "permission": "auth.fly"},
     "permission", 'No permission "auth.fly"'),
    ({"name": "p", "messages": [{"role": "user", "text": "x"}], "groups": ["nobody"]}, "groups", "nobody"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field", "message"), PROMPT_ERRORS)
def test_an_invalid_prompt_is_400_with_the_field_s_message(body, field, message):
    response = api(user_with("add_storedprompt")).post(API + "prompts/", body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert message in response.json()[field][0]
    assert not StoredPrompt.objects.exists()


@pytest.mark.django_db
def test_invalid_resources_templates_and_settings_are_400_with_field_messages(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client = api(user_with("add_storedresource", "change_storedresource", "add_storedresourcetemplate",
                           "change_primitivesetting"))
    StoredPrompt.objects.create(server=get_server().name, name="taken",
                                messages=[{"role": "user", "text": "x"}])
    cases = [
        ("resources/", {"uri": "note://a", "name": "a"}, "json", "text", "needs a text or a file"),
        ("resources/", {"uri": "note://a", "name": "a", "text": "x",
                        "file": SimpleUploadedFile("a.txt", b"x")}, "multipart", "file", "not both"),
        ("resources/", {"uri": "demo://readme", "name": "a", "text": "x"}, "json", "uri",
         "registered in code"),
        ("resource-templates/", {"uri_template": "note://fixed", "name": "t", "text": "x"}, "json",
         "uri_template", "has no {variable}"),
        ("resource-templates/", {"uri_template": "note://{id}", "name": "t", "text": "{other}"}, "json",
         "text", "{other}, which the URI template does not have"),
    ]
    for path, body, form, field, message in cases:
        response = client.post(API + path, body, format=form)
        assert response.status_code == 400, (path, body, response.content)
        assert message in response.json()[field][0], response.json()
    assert api(user_with("add_storedprompt")).post(API + "prompts/", {
        "name": "taken", "messages": [{"role": "user", "text": "x"}]}, format="json").json() == {
        "name": ["A prompt 'taken' exists already."]}
    bad = client.patch(API + "tools/echo/", {"annotations": {"read_only_hint": "yes"}}, format="json")
    assert bad.status_code == 400 and "must be True or False" in bad.json()["annotations"][0]
    bad = client.patch(API + "tools/echo/", {"permission": "mcp_server"}, format="json")
    assert bad.status_code == 400 and "app_label.codename" in bad.json()["permission"][0]
    assert not PrimitiveSetting.objects.exists() and not StoredResource.objects.exists()


# Operations -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_tools_list_with_their_settings_and_a_patch_makes_the_row(django_capture_on_commit_callbacks):
    editors = Group.objects.create(name="editors")
    client = api(user_with("view_primitivesetting", "change_primitivesetting"))
    tools = {tool["name"]: tool for tool in client.get(API + "tools/").json()["results"]}
    assert set(tools) == set(get_server().tools)
    assert tools["add"]["code"]["description"] == "Add two numbers"
    assert tools["add"]["enabled"] is True and tools["add"]["updated_at"] is None
    with django_capture_on_commit_callbacks() as announced:
        response = client.patch(API + "tools/add/", {
            "enabled": False, "title": "Sum", "annotations": {"read_only_hint": False},
            "permission": "mcp_server.view_session", "groups": ["editors"]}, format="json")
    assert response.status_code == 200, response.content
    assert announced, "the save announces the change to every process"
    row = PrimitiveSetting.objects.get(kind="tool", name="add", server=get_server().name)
    assert (row.enabled, row.title, row.annotations, row.permission) == (
        False, "Sum", {"read_only_hint": False}, "mcp_server.view_session")
    assert list(row.groups.all()) == [editors]
    shown = client.get(API + "tools/add/").json()
    assert shown["enabled"] is False and shown["groups"] == ["editors"] and shown["updated_at"]
    # A second change edits the same row.
    assert client.patch(API + "tools/add/", {"enabled": True}, format="json").json()["title"] == "Sum"
    assert PrimitiveSetting.objects.get().enabled is True
    assert client.get(API + "tools/nope/").status_code == 404
    assert client.patch(API + "tools/nope/", {"enabled": False}, format="json").status_code == 404
    assert client.put(API + "tools/add/", {"enabled": False}, format="json").status_code == 405


@pytest.mark.django_db
def test_registered_prompts_resources_and_templates_are_named_by_name_or_uri():
    client = api(user_with("view_primitivesetting", "change_primitivesetting"))
    assert [p["name"] for p in client.get(API + "registered-prompts/").json()["results"]] == ["greeting"]
    resources = client.get(API + "registered-resources/").json()["results"]
    # The demo's skill (SEP-2640) is made of resources too, one per file.
    assert [r["uri"] for r in resources] == ["demo://readme", "skill://note-keeping/SKILL.md",
                                             "skill://note-keeping/references/TITLES.md"]
    assert "annotations" not in resources[0]
    response = client.patch(API + "registered-resources/demo://readme/", {"enabled": False}, format="json")
    assert response.status_code == 200, response.content
    template = "demo://users/{user_id}/profile"
    response = client.patch(API + "registered-resource-templates/demo:%2F%2Fusers%2F%7Buser_id%7D%2Fprofile/",
                            {"description": "A user's profile"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["uri_template"] == template
    assert set(PrimitiveSetting.objects.values_list("kind", "name")) == {
        ("resource", "demo://readme"), ("resource_template", template)}


@pytest.mark.django_db
def test_prompts_resources_and_templates_defined_in_admin_full_crud(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    codenames = [f"{verb}_{model}" for verb in ("view", "add", "change", "delete")
                 for model in ("storedprompt", "storedresource", "storedresourcetemplate")]
    client = api(user_with(*codenames))
    prompt = client.post(API + "prompts/", {
        "name": "hello", "arguments": [{"name": "who", "required": True}],
        "messages": [{"role": "user", "text": "Say hello to {who}"}]}, format="json")
    assert prompt.status_code == 201, prompt.content
    url = f"{API}prompts/{prompt.json()['id']}/"
    assert StoredPrompt.objects.get().server == get_server().name
    assert client.patch(url, {"title": "Hello"}, format="json").json()["title"] == "Hello"
    refused = client.patch(url, {"messages": [{"role": "user", "text": "{whom}"}]}, format="json")
    assert refused.status_code == 400 and "messages" in refused.json()
    assert [p["name"] for p in client.get(API + "prompts/").json()["results"]] == ["hello"]
    assert client.delete(url).status_code == 204 and not StoredPrompt.objects.exists()

    text = client.post(API + "resources/", {"uri": "note://a", "name": "a", "text": "A"}, format="json")
    assert text.status_code == 201, text.content
    upload = client.post(API + "resources/", {"uri": "note://logo", "name": "logo",
                                              "file": SimpleUploadedFile("logo.png", b"\x89PNG")},
                         format="multipart")
    assert upload.status_code == 201, upload.content
    assert upload.json()["mime_type"] == "image/png"
    assert upload.json()["file"].startswith("mcp_resources/logo")
    assert StoredResource.objects.get(uri="note://logo").file.read() == b"\x89PNG"
    # From a file to a text: the file goes in the same change.
    swapped = client.patch(f"{API}resources/{upload.json()['id']}/", {"file": None, "text": "now text"},
                           format="json")
    assert swapped.status_code == 200, swapped.content
    assert swapped.json()["file"] is None and swapped.json()["text"] == "now text"

    template = client.post(API + "resource-templates/", {"uri_template": "note://{id}", "name": "note",
                                                         "text": "Note {id}"}, format="json")
    assert template.status_code == 201, template.content
    url = f"{API}resource-templates/{template.json()['id']}/"
    assert client.patch(url, {"text": "{nope}"}, format="json").status_code == 400
    assert client.put(url, {"uri_template": "note://{key}", "name": "note", "text": "Key {key}"},
                      format="json").json()["uri_template"] == "note://{key}"
    assert client.delete(url).status_code == 204


@pytest.mark.django_db(transaction=True)
def test_sessions_are_listed_and_delete_ends_one(short_lived_connections):
    owner = User.objects.create_user("alice")
    session_row("s-old")
    session_row("s-new", owner=owner)
    Session.objects.create(id="s-elsewhere", protocol_version="2025-11-25", server="another-server",
                           last_activity=Session.objects.get(id="s-new").last_activity)
    client = api(user_with("view_session", "delete_session"))
    listed = client.get(API + "sessions/").json()["results"]
    assert [s["id"] for s in listed] == ["s-new", "s-old"]  # most recent first, this server's only
    assert listed[0] | {"created_at": None, "last_activity": None} == {
        "id": "s-new", "client_name": "probe", "client_version": "1.2", "protocol_version": "2025-11-25",
        "owner": "alice", "origin": "", "created_at": None, "last_activity": None}
    assert client.delete(API + "sessions/s-new/").status_code == 204
    assert set(Session.objects.values_list("id", flat=True)) == {"s-old", "s-elsewhere"}
    assert client.delete(API + "sessions/s-elsewhere/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_calls_are_listed_filtered_and_cancelled(short_lived_connections):
    call_row("c-queued", state=ToolCall.State.QUEUED, session_id="s1", request_id=7, request_key="7")
    call_row("c-running", runner="nobody-listens", worker="host:1")
    call_row("c-done", state=ToolCall.State.COMPLETED)
    client = api(user_with("view_toolcall", "change_toolcall"))
    listed = client.get(API + "calls/").json()["results"]
    assert {c["id"] for c in listed} == {"c-queued", "c-running", "c-done"}
    running = client.get(API + "calls/", {"state": "running"}).json()["results"]
    assert [c["id"] for c in running] == ["c-running"] and running[0]["worker"] == "host:1"
    bad = client.get(API + "calls/", {"state": "sleeping"})
    assert bad.status_code == 400 and "Unknown state" in bad.json()["state"][0]
    assert client.get(API + "calls/c-queued/").json()["arguments"] == {"count": 5}

    queued = client.post(API + "calls/c-queued/cancel/")
    assert queued.status_code == 200, queued.content
    assert queued.json()["state"] == "cancelled"  # never started: cancelled at once
    asked = client.post(API + "calls/c-running/cancel/").json()
    assert (asked["state"], asked["cancel_requested"]) == ("running", True)  # the tool sees the flag
    assert client.post(API + "calls/c-done/cancel/").json()["state"] == "completed"
    assert client.post(API + "calls/nope/cancel/").status_code == 404


@pytest.mark.feature("TASK-11")
@pytest.mark.django_db(transaction=True)
def test_tasks_are_listed_beside_running_calls_and_filtered(short_lived_connections):
    call_row("c-stream")
    call_row("c-task", task=True, delivery="task", state=ToolCall.State.INPUT_REQUIRED,
             input_requests={"colour": {"method": "elicitation/create", "params": {"message": "?"}}})
    client = api(user_with("view_toolcall"))
    listed = {c["id"]: c for c in client.get(API + "calls/").json()["results"]}
    assert set(listed) == {"c-stream", "c-task"}
    assert (listed["c-task"]["task"], listed["c-task"]["state"]) == (True, "input_required")
    assert listed["c-task"]["input_requests"]["colour"]["method"] == "elicitation/create"
    assert [c["id"] for c in client.get(API + "calls/", {"task": "true"}).json()["results"]] == ["c-task"]
    assert [c["id"] for c in client.get(API + "calls/", {"task": "false"}).json()["results"]] == ["c-stream"]
    assert client.get(API + "calls/", {"task": "maybe"}).status_code == 400


# The OpenAPI schema -----------------------------------------------------------------------------
EVERY_OPERATION = {
    ("/api/mcp/tools/", "get"), ("/api/mcp/tools/{name}/", "get"), ("/api/mcp/tools/{name}/", "patch"),
    *{(f"/api/mcp/registered-{kind}/", "get") for kind in ("prompts", "resources", "resource-templates")},
    ("/api/mcp/registered-prompts/{name}/", "get"), ("/api/mcp/registered-prompts/{name}/", "patch"),
    ("/api/mcp/registered-resources/{uri}/", "get"), ("/api/mcp/registered-resources/{uri}/", "patch"),
    ("/api/mcp/registered-resource-templates/{uri_template}/", "get"),
    ("/api/mcp/registered-resource-templates/{uri_template}/", "patch"),
    *{(f"/api/mcp/{kind}/", method) for kind in ("prompts", "resources", "resource-templates")
      for method in ("get", "post")},
    *{(f"/api/mcp/{kind}/{{id}}/", method) for kind in ("prompts", "resources", "resource-templates")
      for method in ("get", "put", "patch", "delete")},
    ("/api/mcp/sessions/", "get"), ("/api/mcp/sessions/{id}/", "get"), ("/api/mcp/sessions/{id}/", "delete"),
    ("/api/mcp/calls/", "get"), ("/api/mcp/calls/{id}/", "get"), ("/api/mcp/calls/{id}/cancel/", "post"),
    ("/api/mcp/audit/", "get"), ("/api/mcp/audit/{id}/", "get"),
}


@pytest.mark.django_db
def test_the_openapi_schema_describes_every_endpoint():
    response = api(user_with()).get(API + "schema/")  # any authenticated user: the API's shape
    assert response.status_code == 200, response.content
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    described = {(path, method) for path, operations in schema["paths"].items() for method in operations}
    assert described == EVERY_OPERATION
    ids = [op["operationId"] for operations in schema["paths"].values() for op in operations.values()]
    assert len(ids) == len(set(ids))
    calls = schema["paths"]["/api/mcp/calls/"]["get"]["parameters"]
    assert {"name": "state", "in": "query"}.items() <= next(p for p in calls if p["name"] == "state").items()
    # Every reference resolves, and the writable fields are described.
    references = {ref.rsplit("/", 1)[1] for ref in _refs(schema["paths"])}
    assert references <= set(schema["components"]["schemas"])
    assert {"enabled", "annotations", "permission", "groups"} <= set(
        schema["components"]["schemas"]["RegisteredTool"]["properties"])


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


# Through a daphne process serving MCP -----------------------------------------------------------
REDIS_DB = 2
LIST_CHANGED = "notifications/tools/list_changed"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    require_services()
    with django_db_blocker.unblock(), cluster(1, redis_db=REDIS_DB) as (server,):
        yield server


def tool_names(client: HTTPClient, url: str) -> set[str]:
    return {tool["name"] for tool in client.request("tools/list", {}, url=url).response["result"]["tools"]}


@pytest.mark.django_db(transaction=True)
def test_a_tool_disabled_through_the_api_leaves_tools_list_of_the_server(server):
    user = user_with("change_primitivesetting")
    base = server.url.removesuffix("/mcp") + API
    client = new_session(server.url)
    stream = open_stream(client, server.url)
    try:
        assert "echo" in tool_names(client, server.url)
        response = httpx.patch(base + "tools/echo/", json={"enabled": False}, timeout=PATIENCE,
                               headers={"Authorization": basic(user)})
        assert response.status_code == 200, response.text
        assert response.json()["enabled"] is False
        events_until(stream, LIST_CHANGED)
        assert "echo" not in tool_names(client, server.url)
        refused = client.request("tools/call", {"name": "echo", "arguments": {"message": "x"}},
                                 url=server.url)
        assert refused.response["error"]["message"] == "Tool not found: echo"
        anonymous = httpx.patch(base + "tools/add/", json={"enabled": False}, timeout=PATIENCE)
        assert anonymous.status_code == 401
        assert "add" in tool_names(client, server.url)
    finally:
        stream.close()
        PrimitiveSetting.objects.filter(name="echo").delete()


@pytest.mark.django_db(transaction=True)
def test_a_session_terminated_through_the_api_ends_on_the_server(server):
    user = user_with("delete_session")
    base = server.url.removesuffix("/mcp") + API
    client = new_session(server.url)
    stream = open_stream(client, server.url)
    try:
        response = httpx.delete(f"{base}sessions/{client.session_id}/", timeout=PATIENCE,
                                headers={"Authorization": basic(user)})
        assert response.status_code == 204, response.text
        ends(stream)  # the session's GET stream ends, wherever it is held
        after = post_checked(client, {"jsonrpc": "2.0", "id": 99, "method": "ping"}, server.url)
        assert after.status_code == 404
    finally:
        stream.close()


@pytest.mark.django_db(transaction=True)
def test_a_cross_site_form_posting_with_cached_basic_credentials_changes_nothing(server):
    """A browser attaches the Basic credentials it cached for this site to a form another site's
    page posts here: such a change is refused, while API clients (no Origin) and this site's own
    pages go on working."""
    user = user_with("add_storedresource", "change_primitivesetting", "view_primitivesetting")
    site = server.url.removesuffix("/mcp")
    credentials = {"Authorization": basic(user)}
    from_evil = {**credentials, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    planted = httpx.post(site + API + "resources/", data={"uri": "note://planted", "name": "p", "text": "P"},
                         headers=from_evil, timeout=PATIENCE)
    assert planted.status_code == 403 and CROSS_SITE in planted.text
    assert httpx.post(site + API + "resources/", data={"uri": "note://planted", "name": "p", "text": "P"},
                      headers={**credentials, "Origin": "null"}, timeout=PATIENCE).status_code == 403
    disabled = httpx.patch(site + API + "tools/echo/", json={"enabled": False}, timeout=PATIENCE,
                           headers={**credentials, "Origin": "https://evil.example"})
    assert disabled.status_code == 403
    assert not StoredResource.objects.filter(uri="note://planted").exists()
    assert not PrimitiveSetting.objects.filter(name="echo").exists()
    # Reading changes nothing (a cross-site page cannot read the answer either), and changes from
    # this site or from a client that is no browser go through.
    assert httpx.get(site + API + "tools/", headers=from_evil, timeout=PATIENCE).status_code == 200
    own = httpx.post(site + API + "resources/", data={"uri": "note://own", "name": "own", "text": "O"},
                     headers={**credentials, "Origin": site, "Sec-Fetch-Site": "same-origin"},
                     timeout=PATIENCE)
    assert own.status_code == 201, own.text
    scripted = httpx.post(site + API + "resources/", json={"uri": "note://api", "name": "api", "text": "A"},
                          headers=credentials, timeout=PATIENCE)
    assert scripted.status_code == 201, scripted.text
    StoredResource.objects.filter(uri__in=["note://own", "note://api"]).delete()
