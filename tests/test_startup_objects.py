"""Once the ASGI application is built, what start-up loaded is frozen out of the cyclic garbage
collector's walks (``gc.freeze``), once per process, unless ``FREEZE_STARTUP_OBJECTS`` is False."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_server.asgi import get_asgi_application, startup_objects


@pytest.fixture
def collector(monkeypatch):
    """The collector's collect and freeze, recorded instead of run (the test process stays as it
    is), and the process taken as not frozen yet."""
    calls: list[str] = []
    monkeypatch.setattr(startup_objects.gc, "collect", lambda: calls.append("collect") or 0)
    monkeypatch.setattr(startup_objects.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(startup_objects, "_frozen", False)
    return calls


def test_building_the_application_collects_then_freezes_once(collector):
    get_asgi_application()
    assert collector == ["collect", "freeze"]
    get_asgi_application()  # a second application in the same process freezes nothing more
    assert collector == ["collect", "freeze"]


def test_false_leaves_the_collector_alone(collector):
    with override_settings(MCP_SERVER={"FREEZE_STARTUP_OBJECTS": False}):
        assert startup_objects.freeze_startup_objects() is False
        get_asgi_application()
    assert collector == []


def test_a_value_other_than_true_or_false_is_refused(collector):
    with override_settings(MCP_SERVER={"FREEZE_STARTUP_OBJECTS": "yes"}), \
            pytest.raises(ImproperlyConfigured, match=r"FREEZE_STARTUP_OBJECTS.*True or False"):
        startup_objects.freeze_startup_objects()
    assert collector == []
