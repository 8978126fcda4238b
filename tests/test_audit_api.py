"""The audit trail through the REST API: read-only, for holders of the view permission,
filtered by user, client, name, outcome and dates, paginated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_server.models import AuditRecord

from .test_api import API, api, basic, user_with

pytestmark = [pytest.mark.django_db]


def row(**fields: object) -> AuditRecord:
    values = {"time": timezone.now(), "method": "tools/call", "name": "echo", "outcome": "ok",
              "duration": 0.002, **fields}
    return AuditRecord.objects.create(**values)


@pytest.fixture
def trail():
    now = timezone.now()
    return {
        "alice": row(username="alice", name="echo", arguments={"message": "hi"}, arguments_digest="d1",
                     result_size=40, time=now - timedelta(days=3)),
        "bob": row(username="bob", name="refuse", outcome="tool_error", time=now - timedelta(days=1)),
        "client": row(client_id="reporting-app", subject="svc", name="echo", time=now - timedelta(hours=1)),
        "failed": row(username="alice", name="missing", outcome="error", error_code=-32602, time=now),
        "read": row(method="resources/read", name="note://today", time=now),
    }


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return sorted(item["name"] for item in response.json()["results"])


def test_the_view_permission_is_needed_and_nothing_can_be_changed(trail):
    assert api().get(API + "audit/").status_code == 401
    assert api(user_with()).get(API + "audit/").status_code == 403
    assert api(user_with("view_toolcall")).get(API + f"audit/{trail['alice'].pk}/").status_code == 403
    viewer = api(user_with("view_auditrecord"))
    assert viewer.get(API + f"audit/{trail['alice'].pk}/").status_code == 200
    # Even holders of every permission cannot write: the API offers no such operation.
    owner = user_with("view_auditrecord", "add_auditrecord", "change_auditrecord", "delete_auditrecord")
    client = api()
    client.credentials(HTTP_AUTHORIZATION=basic(owner))
    for method in ("post", "put", "patch", "delete"):
        path = API + "audit/" + ("" if method == "post" else f"{trail['alice'].pk}/")
        assert getattr(client, method)(path, {"outcome": "ok"}, format="json").status_code == 405, method
    assert AuditRecord.objects.count() == 5


def test_rows_are_listed_newest_first_with_their_fields(trail):
    response = api(user_with("view_auditrecord")).get(API + "audit/")
    body = response.json()
    assert body["count"] == 5 and body["next"] is None
    assert [item["id"] for item in body["results"]][-1] == trail["alice"].pk  # the oldest last
    alice = body["results"][-1]
    keys = ("username", "method", "name", "outcome", "arguments", "arguments_digest", "result_size",
            "error_code", "user", "trace_id")
    assert {key: alice[key] for key in keys} == {
        "username": "alice", "method": "tools/call", "name": "echo", "outcome": "ok",
        "arguments": {"message": "hi"}, "arguments_digest": "d1", "result_size": 40, "error_code": None,
        "user": None, "trace_id": None}


def test_filters_by_user_client_name_outcome_and_dates(trail):
    viewer = api(user_with("view_auditrecord"))
    assert names(viewer.get(API + "audit/", {"user": "alice"})) == ["echo", "missing"]
    assert names(viewer.get(API + "audit/", {"client": "reporting-app"})) == ["echo"]
    assert names(viewer.get(API + "audit/", {"name": "refuse"})) == ["refuse"]
    assert names(viewer.get(API + "audit/", {"outcome": "error"})) == ["missing"]
    assert names(viewer.get(API + "audit/", {"method": "resources/read"})) == ["note://today"]
    day_before = (timezone.now() - timedelta(days=2)).date().isoformat()
    assert names(viewer.get(API + "audit/", {"until": day_before})) == ["echo"]
    since = (timezone.now() - timedelta(hours=2)).isoformat()
    assert names(viewer.get(API + "audit/", {"since": since})) == ["echo", "missing", "note://today"]
    assert viewer.get(API + "audit/", {"outcome": "fine"}).status_code == 400
    assert viewer.get(API + "audit/", {"since": "yesterday"}).status_code == 400


def test_the_list_is_paginated(trail):
    viewer = api(user_with("view_auditrecord"))
    first = viewer.get(API + "audit/", {"page_size": 2}).json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["next"]
    last = viewer.get(API + "audit/", {"page_size": 2, "page": 3}).json()
    assert len(last["results"]) == 1 and last["next"] is None
