"""A session's record as the shared state keeps it: every field survives the trip."""

from __future__ import annotations

import dataclasses

from mcp_server.http.session_store import SessionRecord


def test_a_session_record_keeps_every_field_through_the_shared_state():
    values = {"client_info": {"name": "c", "version": "1"}, "client_capabilities": {"roots": {}},
              "owner_id": 7}
    record = SessionRecord(**{field.name: values.get(field.name, f"{field.name}-value")
                              for field in dataclasses.fields(SessionRecord)})
    assert SessionRecord.loads(record.dumps()) == record
