"""Admin of sessions and background calls, with Django's test client (in process, where the
transport's shared state is this process's memory): what each shows, "terminate" and "cancel",
and who may reach the MCP server's admin pages at all."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from mcp_server.http.event_store import request_key
from mcp_server.models import Session, ToolCall
from mcp_server.site import get_transport

from .admin_support import action

pytestmark = [pytest.mark.django_db(transaction=True)]

SESSIONS, CALLS = "/admin/mcp_server/session/", "/admin/mcp_server/toolcall/"
PAGES = ["/admin/mcp_server/primitivesetting/", "/admin/mcp_server/storedprompt/",
         "/admin/mcp_server/storedresource/", "/admin/mcp_server/storedresourcetemplate/", SESSIONS, CALLS]


def session(session_id: str, owner: User | None = None, **fields) -> Session:
    return Session.objects.create(
        id=session_id, protocol_version="2025-06-18", server=get_transport().group, owner=owner,
        client_info={"name": "inspector", "version": "1.4.2"}, last_activity=timezone.now(), **fields)


def hold(session_id: str, what: str) -> None:
    """Claim a stream or request of the session, as a process serving it does."""
    state = get_transport().state
    async_to_sync(state.add_counted)(f"stream:{session_id}:{what}", "process|token", 60,
                                     f"held:{session_id}", 60)


def held(session_id: str) -> int:
    return async_to_sync(get_transport().state.count)(f"held:{session_id}")


def test_sessions_show_client_revision_owner_and_what_they_hold_open(admin_client, django_user_model):
    alice = django_user_model.objects.create_user("alice")
    session("busy", owner=alice)
    session("idle")
    Session.objects.create(id="elsewhere", protocol_version="2025-06-18", server="another-server",
                           last_activity=timezone.now())
    hold("busy", "get")
    hold("busy", "post:i7")
    page = admin_client.get(SESSIONS)
    rows = {s.pk: s for s in page.context["cl"].result_list}
    assert set(rows) == {"busy", "idle"}  # the default server's sessions
    assert (rows["busy"].held_now, rows["idle"].held_now) == (2, 0)
    html = page.content.decode()
    for shown in ("inspector", "1.4.2", "2025-06-18", "alice", '<td class="field-open_now">2</td>'):
        assert shown in html
    detail = admin_client.get(f"{SESSIONS}busy/change/")
    assert detail.status_code == 200 and "Save" not in detail.content.decode()  # read-only


def test_terminate_ends_each_selected_session(admin_client):
    session("doomed")
    session("kept")
    hold("doomed", "get")
    transport = get_transport()
    assert async_to_sync(transport.sessions.load)("doomed") is not None
    result = action(admin_client, SESSIONS, "terminate_selected", ["doomed"])
    assert "Terminated 1 session(s) in every process." in result.content.decode()
    assert list(Session.objects.values_list("pk", flat=True)) == ["kept"]
    assert async_to_sync(transport.sessions.load)("doomed") is None  # its next request: 404
    assert held("doomed") == 0


def call(call_id: str, state: str, **fields) -> ToolCall:
    return ToolCall.objects.create(
        id=call_id, tool="count_in_background", arguments={"to": 600}, session_id="s1", request_id=7,
        request_key=request_key(7), state=state, delivery="stream", **fields)


def test_calls_are_shown_newest_first_with_their_progress_and_filtered_by_state(admin_client):
    call("older", "completed", progress=5, total=5, message="5 of 5", worker="host:1")
    call("newer", "running", progress=3, total=600, message="3 of 600", worker="host:2",
         started_at=timezone.now())
    page = admin_client.get(CALLS)
    assert [c.pk for c in page.context["cl"].result_list] == ["newer", "older"]
    html = page.content.decode()
    assert "3/600 3 of 600" in html and "host:2" in html and "{&quot;to&quot;: 600}" in html
    running = admin_client.get(CALLS, {"state__exact": "running"}).context["cl"].result_list
    assert [c.pk for c in running] == ["newer"]
    detail = admin_client.get(f"{CALLS}newer/change/")
    assert detail.status_code == 200 and "Save" not in detail.content.decode()


def test_cancel_ends_a_queued_call_and_flags_a_running_one(admin_client):
    call("queued", "queued")
    call("running", "running", runner="specific.process!abc", started_at=timezone.now())
    call("done", "completed")
    result = action(admin_client, CALLS, "cancel_selected", ["queued", "running", "done"])
    assert ("Cancelled 1 queued call(s); asked 1 running call(s) to stop; 1 had already ended."
            in result.content.decode())
    queued, running, done = (ToolCall.objects.get(pk=pk) for pk in ("queued", "running", "done"))
    assert (queued.state, queued.cancel_requested, queued.response) == ("cancelled", True, None)
    assert queued.finished_at is not None
    # The running call's flag is up: its runner sees it and ends it cancelled.
    assert (running.state, running.cancel_requested) == ("running", True)
    assert (done.state, done.cancel_requested) == ("completed", False)


def test_a_user_who_is_not_staff_cannot_reach_the_pages(client, django_user_model):
    user = django_user_model.objects.create_user("visitor", password="pw")
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="mcp_server"))
    client.force_login(user)
    for page in PAGES:
        response = client.get(page)
        assert response.status_code == 302 and response["location"].startswith("/admin/login/"), page


def test_staff_needs_the_model_permissions(client, django_user_model):
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    client.force_login(staff)
    for page in PAGES:
        assert client.get(page).status_code == 403, page
    session("s1")
    call("c1", "queued")
    # Allowed to look, not to act: neither action is offered, and a POST of one does nothing.
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_session", "view_toolcall"]))
    staff = User.objects.get(pk=staff.pk)
    for page, name, pk in ((SESSIONS, "terminate_selected", "s1"), (CALLS, "cancel_selected", "c1")):
        assert client.get(page).status_code == 200
        assert name not in client.get(page).content.decode()
        action(client, page, name, [pk])
    assert Session.objects.filter(pk="s1").exists()
    assert ToolCall.objects.get(pk="c1").state == "queued"
