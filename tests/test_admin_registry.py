"""Admin of what code registers (PrimitiveSetting), with Django's test client: every registered
primitive has its row, the overrides and restrictions are checked, the switch actions announce a
change once, and "Try it" links only where the project routes it."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import override_settings
from django.urls import path

import mcp_server
from mcp_server.models import PrimitiveSetting

from .admin_support import action, form_errors

pytestmark = [pytest.mark.django_db(transaction=True)]

LIST = "/admin/mcp_server/primitivesetting/"
Kind = PrimitiveSetting.Kind


def server_name() -> str:
    return mcp_server.get_server().name


def row(kind: str, name: str) -> PrimitiveSetting:
    return PrimitiveSetting.objects.get(server=server_name(), kind=kind, name=name)


def change(client, setting: PrimitiveSetting, **fields):
    """POST the change form of ``setting`` with its current values, ``fields`` replacing some."""
    data = {"title": setting.title, "description": setting.description, "annotations": "",
            "permission": setting.permission, "groups": [g.pk for g in setting.groups.all()],
            **({"enabled": "on"} if setting.enabled else {})}
    data.update(fields)
    data = {key: value for key, value in data.items() if value is not None}
    return client.post(f"{LIST}{setting.pk}/change/", data)


def test_every_registered_primitive_has_a_row_once_the_list_is_shown(admin_client, announced):
    server = mcp_server.get_server()
    assert not PrimitiveSetting.objects.exists()
    page = admin_client.get(LIST, {"all": ""})
    assert page.status_code == 200
    expected = {(Kind.TOOL, name) for name in server.tools} \
        | {(Kind.PROMPT, name) for name in server.prompts} \
        | {(Kind.RESOURCE, uri) for uri in server.resources} \
        | {(Kind.RESOURCE_TEMPLATE, uri) for uri in server.resource_templates}
    assert {("tool", "echo"), ("prompt", "greeting"), ("resource", "demo://readme"),
            ("resource_template", "demo://users/{user_id}/profile")} <= expected
    rows = set(PrimitiveSetting.objects.filter(server=server.name).values_list("kind", "name"))
    assert rows == expected
    assert all(PrimitiveSetting.objects.values_list("enabled", flat=True))
    shown = {(r.kind, r.name) for r in page.context["cl"].result_list}
    assert shown == expected
    admin_client.get(LIST)  # shown again: no duplicate
    assert PrimitiveSetting.objects.count() == len(expected)
    assert announced == []  # new rows change nothing anyone sees: no list_changed


def test_the_list_filters_by_kind_and_enabled_and_searches_by_name(admin_client):
    admin_client.get(LIST)
    PrimitiveSetting.objects.filter(kind=Kind.TOOL, name="add").update(enabled=False)
    tools = admin_client.get(LIST, {"kind__exact": "tool", "q": "echo"}).context["cl"].result_list
    assert [(r.kind, r.name) for r in tools] == [("tool", "echo")]
    disabled = admin_client.get(LIST, {"enabled__exact": "0"}).context["cl"].result_list
    assert [(r.kind, r.name) for r in disabled] == [("tool", "add")]


def test_overrides_and_a_restriction_are_saved_and_announced_once(admin_client, announced):
    admin_client.get(LIST)
    editors, readers = Group.objects.create(name="editors"), Group.objects.create(name="readers")
    echo = row(Kind.TOOL, "echo")
    response = change(admin_client, echo, enabled=None, title="Echo back",
                      description="Says it again", annotations='{"readOnlyHint": false}',
                      permission="mcp_server.view_session", groups=[editors.pk, readers.pk])
    assert response.status_code == 302, form_errors(response)
    echo.refresh_from_db()
    assert (echo.enabled, echo.title, echo.description, echo.annotations, echo.permission) == (
        False, "Echo back", "Says it again", {"readOnlyHint": False}, "mcp_server.view_session")
    assert set(echo.groups.all()) == {editors, readers}
    # The row and its groups are one save: one list_changed, not one per signal.
    assert announced == [(server_name(), {"tools"})]


def test_name_and_kind_are_read_only(admin_client):
    admin_client.get(LIST)
    echo = row(Kind.TOOL, "echo")
    response = change(admin_client, echo, name="renamed", kind="prompt", title="T")
    assert response.status_code == 302
    echo.refresh_from_db()
    assert (echo.kind, echo.name, echo.title) == ("tool", "echo", "T")
    assert admin_client.get(f"{LIST}add/").status_code == 403  # rows come from code


def test_annotations_are_checked_and_only_tools_have_them(admin_client):
    admin_client.get(LIST)
    unknown = change(admin_client, row(Kind.TOOL, "echo"), annotations='{"fast_hint": true}')
    assert form_errors(unknown)["annotations"][0].startswith("unknown tool annotation 'fast_hint'")
    not_bool = change(admin_client, row(Kind.TOOL, "echo"), annotations='{"read_only_hint": "yes"}')
    assert form_errors(not_bool)["annotations"][0].startswith(
        "tool annotation 'read_only_hint' must be True or False")
    not_json = change(admin_client, row(Kind.TOOL, "echo"), annotations="{read_only_hint: true}")
    assert form_errors(not_json)["annotations"] == ["Enter a valid JSON."]
    prompt = change(admin_client, row(Kind.PROMPT, "greeting"), annotations='{"read_only_hint": true}')
    assert form_errors(prompt)["annotations"] == [
        "Only tools have annotations; a prompt has none: leave this empty."]
    assert row(Kind.TOOL, "echo").annotations is None and row(Kind.PROMPT, "greeting").annotations is None


def test_a_restriction_must_name_an_existing_permission(admin_client):
    admin_client.get(LIST)
    for wrong in ("mcp_server.fly", "view_session", "nowhere.view_session"):
        response = change(admin_client, row(Kind.TOOL, "echo"), permission=wrong)
        assert form_errors(response)["permission"] == [
            f'There is no permission "{wrong}". Name an existing one as "app_label.codename", '
            'for example "mcp_server.view_session".']
    assert row(Kind.TOOL, "echo").permission == ""


def test_a_row_no_longer_registered_is_shown_so_and_cannot_be_enabled(admin_client, announced):
    gone = PrimitiveSetting.objects.create(server=server_name(), kind=Kind.TOOL, name="retired",
                                           enabled=False)
    announced.clear()
    page = admin_client.get(LIST, {"q": "retired"})
    [shown] = page.context["cl"].result_list
    assert shown.pk == gone.pk
    assert 'alt="False"' in page.content.decode().split('class="field-is_registered"')[1][:200]
    refused = change(admin_client, gone, enabled="on")
    assert form_errors(refused)["enabled"] == ["tool retired is no longer registered in code: it cannot "
                                               "be enabled."]
    result = action(admin_client, LIST, "enable_selected", [gone.pk, row(Kind.TOOL, "echo").pk])
    assert "No longer registered in code, so not enabled: tool retired." in result.content.decode()
    gone.refresh_from_db()
    assert gone.enabled is False
    assert announced == []  # echo was enabled already, retired stays off: nothing changed
    # Disabling it, or editing it otherwise, still works.
    assert change(admin_client, gone, description="old").status_code == 302


def test_switch_actions_update_in_one_go_and_announce_once(admin_client, announced):
    admin_client.get(LIST)
    tools = [row(Kind.TOOL, name) for name in ("echo", "add", "slow_count")]
    result = action(admin_client, LIST, "disable_selected", [t.pk for t in tools])
    assert "3 disabled, 0 left as they were." in result.content.decode()
    assert not PrimitiveSetting.objects.filter(pk__in=[t.pk for t in tools], enabled=True).exists()
    assert announced == [(server_name(), {"tools"})]

    announced.clear()
    mixed = [*tools[:2], row(Kind.PROMPT, "greeting"), row(Kind.RESOURCE, "demo://readme")]
    result = action(admin_client, LIST, "enable_selected", [r.pk for r in mixed])
    assert "2 enabled, 2 left as they were." in result.content.decode()
    assert announced == [(server_name(), {"tools"})]  # the prompt and resource did not change

    announced.clear()
    action(admin_client, LIST, "disable_selected", [r.pk for r in mixed])
    assert announced == [(server_name(), {"tools", "prompts", "resources"})]  # once, every list
    announced.clear()
    action(admin_client, LIST, "disable_selected", [r.pk for r in mixed])
    assert announced == []


# The project's URLs without the inspector's.
urlpatterns = [path("admin/", admin.site.urls)]


def test_try_it_links_each_tool_only_where_the_project_routes_it(admin_client):
    page = admin_client.get(LIST, {"all": ""}).content.decode()
    assert '<a href="/admin/mcp_server/try/echo/">Try it</a>' in page
    assert '<a href="/admin/mcp_server/try/add/">Try it</a>' in page
    assert page.count(">Try it</a>") == len(mcp_server.get_server().tools)
    detail = admin_client.get(f"{LIST}{row(Kind.TOOL, 'echo').pk}/change/").content.decode()
    assert '<a href="/admin/mcp_server/try/echo/">Try it</a>' in detail
    with override_settings(ROOT_URLCONF=__name__):
        assert "Try it" not in admin_client.get(LIST, {"all": ""}).content.decode()


def test_the_admin_header_names_the_mcp_server(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert '<a href="/admin/">Django MCP demo administration</a>' in page  # templates/admin/base_site.html
    assert "<title>Site administration | Django MCP demo admin</title>" in page
