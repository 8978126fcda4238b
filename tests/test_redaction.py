"""The one redaction policy of the audit trail and span attributes (MCP_SERVER REDACTED_KEYS,
REDACTION_POLICY), and the digest of arguments."""

from __future__ import annotations

from django.test import override_settings

from mcp_server.redaction import REDACTED, digest, redact, redact_keys


def scrub(name, value):
    return {"tool": name, "kept": sorted(value)}


def test_keys_containing_a_listed_name_are_redacted_at_any_depth_case_insensitively():
    value = {"query": "q", "DB_Password": "p", "nested": [{"api_key": "k", "n": 1}],
             "headers": {"Authorization": "Bearer t"}}
    assert redact_keys(value, ["password", "api_key", "authorization"]) == {
        "query": "q", "DB_Password": REDACTED, "nested": [{"api_key": REDACTED, "n": 1}],
        "headers": {"Authorization": REDACTED}}
    assert value["DB_Password"] == "p"  # a copy: the call's own arguments are untouched


def test_the_default_keys_cover_common_secrets_and_the_setting_replaces_them():
    assert redact("login", {"user": "u", "password": "p", "refresh_token": "r"}) == {
        "user": "u", "password": REDACTED, "refresh_token": REDACTED}
    with override_settings(MCP_SERVER={"REDACTED_KEYS": ["pin"]}):
        assert redact("pay", {"pin": "1234", "password": "p"}) == {"pin": REDACTED, "password": "p"}
    with override_settings(MCP_SERVER={"REDACTED_KEYS": []}):
        assert redact("pay", {"password": "p"}) == {"password": "p"}


def test_a_project_policy_replaces_the_keys():
    with override_settings(MCP_SERVER={"REDACTION_POLICY": "tests.test_redaction.scrub"}):
        assert redact("t", {"b": 1, "a": 2}) == {"tool": "t", "kept": ["a", "b"]}


def test_the_digest_is_canonical_and_tells_arguments_apart():
    assert digest({"a": 1, "b": [1, "é"]}) == digest({"b": [1, "é"], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert len(digest({})) == 64


def test_what_has_nothing_to_redact_is_kept_as_it_is_and_only_what_changed_is_copied():
    kept = {"query": "q", "page": 2, "filters": [{"field": "name"}]}
    assert redact_keys(kept, ["password"]) is kept
    value = {"query": "q", "filters": [{"field": "name"}], "auth": {"password": "p", "user": "u"}}
    redacted = redact_keys(value, ["password"])
    assert redacted == {"query": "q", "filters": [{"field": "name"}],
                        "auth": {"password": REDACTED, "user": "u"}}
    assert redacted["filters"] is value["filters"] and value["auth"]["password"] == "p"
    # A verdict kept for a key does not outlive a change of the setting.
    assert redact("t", {"pin": "1"}) == {"pin": "1"}
    with override_settings(MCP_SERVER={"REDACTED_KEYS": ["pin"]}):
        assert redact("t", {"pin": "1"}) == {"pin": REDACTED}
