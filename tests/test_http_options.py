"""The Streamable HTTP options have one source of defaults: each is the MCP_SERVER setting of its
name in upper case, with that setting's default, whether the transport is built by hand or by the
site from the settings."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from django.test import override_settings

from mcp_server import Server
from mcp_server.http.options import StreamableHTTPOptions
from mcp_server.http.transport import StreamableHTTPTransport
from mcp_server.settings import DEFAULTS

CONFIGURATION = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_each_option_is_a_setting_with_its_default():
    options = StreamableHTTPOptions()
    for name in StreamableHTTPOptions.names():
        assert name.upper() in DEFAULTS, f"{name} is no MCP_SERVER setting"
        assert getattr(options, name) == DEFAULTS[name.upper()], name


def test_each_option_is_in_the_settings_table_of_the_configuration_page():
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", CONFIGURATION.read_text(), re.MULTILINE))
    missing = [name.upper() for name in StreamableHTTPOptions.names() if name.upper() not in documented]
    assert not missing


def test_a_transport_built_by_hand_takes_the_defaults_and_the_options_it_names():
    transport = StreamableHTTPTransport(Server("by-hand"), stateless=True, max_json_depth=8)
    assert transport.options == StreamableHTTPOptions(stateless=True, max_json_depth=8)
    assert StreamableHTTPOptions(allowed_origins=None).allowed_origins == []  # None: no other origin
    given = StreamableHTTPOptions(max_sessions=5)
    assert StreamableHTTPTransport(Server("given"), options=given, max_sessions=None).options == \
        dataclasses.replace(given, max_sessions=None)


def test_an_unknown_option_is_refused_naming_the_known_ones():
    with pytest.raises(TypeError, match=r"unknown Streamable HTTP option.*max_sesions.*max_sessions"):
        StreamableHTTPTransport(Server("typo"), max_sesions=5)


def test_options_are_frozen_and_checked_when_made():
    with pytest.raises(dataclasses.FrozenInstanceError):
        StreamableHTTPOptions().stateless = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_request_bytes must be a positive integer"):
        StreamableHTTPOptions(max_request_bytes=0)


def test_the_default_transport_takes_every_option_from_the_settings():
    from mcp_server.site import build_transport, get_server

    changed = {"STATELESS": True, "MAX_SESSIONS": 7, "ALLOWED_ORIGINS": ["https://app.example"],
               "LISTEN_KEEPALIVE_INTERVAL": None, "SSE_STALL_TIMEOUT": 3}
    with override_settings(MCP_SERVER=changed):
        options = build_transport(get_server()).options
        assert options == StreamableHTTPOptions.from_settings()
    for setting, value in changed.items():
        assert getattr(options, setting.lower()) == value
    untouched = set(StreamableHTTPOptions.names()) - {name.lower() for name in changed}
    assert all(getattr(options, name) == DEFAULTS[name.upper()] for name in untouched)
