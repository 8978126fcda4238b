"""Safe defaults of the demo project's settings, and the system check on DNS rebinding protection."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings

from .harness import REPO

READ_SETTINGS = (
    "import json, project.settings as s; "
    "print(json.dumps({'debug': s.DEBUG, 'secret_key': s.SECRET_KEY}))"
)


def demo_settings(**env: str) -> subprocess.CompletedProcess:
    """Import ``project.settings`` in a fresh interpreter, with only ``env`` of the DJANGO_* variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run([sys.executable, "-c", READ_SETTINGS], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def read(**env: str) -> dict:
    done = demo_settings(**env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_debug_is_off_unless_asked_for():
    assert read(DJANGO_SECRET_KEY="a-real-secret")["debug"] is False
    assert read(DJANGO_SECRET_KEY="a-real-secret", DJANGO_DEBUG="0")["debug"] is False
    assert read(DJANGO_SECRET_KEY="a-real-secret", DJANGO_DEBUG="true")["debug"] is False
    assert read(DJANGO_SECRET_KEY="a-real-secret", DJANGO_DEBUG="1")["debug"] is True


def test_the_secret_key_comes_from_the_environment():
    assert read(DJANGO_SECRET_KEY="a-real-secret")["secret_key"] == "a-real-secret"
    assert read(DJANGO_SECRET_KEY="a-real-secret", DJANGO_DEVELOPMENT="1")["secret_key"] == "a-real-secret"


@pytest.mark.parametrize("env", [{}, {"DJANGO_SECRET_KEY": ""}, {"DJANGO_DEBUG": "0"}],
                         ids=["unset", "empty", "debug-off"])
def test_a_missing_secret_key_outside_development_is_an_error(env):
    done = demo_settings(**env)
    assert done.returncode != 0
    assert "django.core.exceptions.ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in done.stderr
    assert "DJANGO_DEVELOPMENT=1" in done.stderr  # says how to run on a development machine


@pytest.mark.parametrize("env", [{"DJANGO_DEBUG": "1"}, {"DJANGO_DEVELOPMENT": "1"}])
def test_development_uses_a_key_named_insecure(env):
    found = read(**env)
    assert found["secret_key"].startswith("django-insecure-")
    assert found["debug"] is (env.get("DJANGO_DEBUG") == "1")


def test_the_development_key_fails_the_deploy_checks():
    """Django's own deploy check flags the development key (its ``django-insecure-`` prefix)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=REPO,
                          env={**clean, "DJANGO_DEVELOPMENT": "1"}, capture_output=True, text=True,
                          timeout=120)
    assert "security.W009" in done.stdout + done.stderr


# The system check ---------------------------------------------------------------------------------
def mcp_warnings() -> list:
    return [m for m in run_checks() if m.id.startswith("mcp_server.")]


def test_no_warning_with_the_defaults():
    """Background tools with no broker warn that they run in the web process (test_first_hour_checks.py)
    until the project says it wants that."""
    with override_settings(ALLOWED_HOSTS=["localhost", "mcp.example.com"], CELERY_BROKER_URL=None,
                           MCP_SERVER={}):
        assert [m.id for m in mcp_warnings()] == ["mcp_server.W023"]
    with override_settings(ALLOWED_HOSTS=["localhost", "mcp.example.com"],
                           MCP_SERVER={"BACKGROUND_CALLS": "local"}):
        assert mcp_warnings() == []


def test_allowed_hosts_star_warns_that_rebinding_protection_is_off():
    with override_settings(ALLOWED_HOSTS=["*"], MCP_SERVER={"BACKGROUND_CALLS": "local"}):
        [warning] = mcp_warnings()
    assert warning.id == "mcp_server.W002"
    assert warning.msg.startswith("ALLOWED_HOSTS contains '*'")
    assert "DNS rebinding protection is effectively off" in warning.msg


def test_the_endpoints_own_allowed_hosts_take_precedence():
    with override_settings(ALLOWED_HOSTS=["*"], MCP_SERVER={"ALLOWED_HOSTS": ["mcp.example.com"],
                                                             "BACKGROUND_CALLS": "local"}):
        assert mcp_warnings() == []
    with override_settings(ALLOWED_HOSTS=["localhost"], MCP_SERVER={"ALLOWED_HOSTS": ["*"],
                                                                    "BACKGROUND_CALLS": "local"}):
        [warning] = mcp_warnings()
    assert warning.id == "mcp_server.W002"
    assert warning.msg.startswith("MCP_SERVER['ALLOWED_HOSTS'] contains '*'")


def test_rebinding_protection_switched_off_warns():
    with override_settings(ALLOWED_HOSTS=["localhost"], MCP_SERVER={"DNS_REBINDING_PROTECTION": False,
                                                                    "BACKGROUND_CALLS": "local"}):
        [warning] = mcp_warnings()
    assert warning.id == "mcp_server.W001"
    assert "DNS_REBINDING_PROTECTION'] is False" in warning.msg


def test_manage_py_check_reports_the_warning():
    out, err = io.StringIO(), io.StringIO()
    with override_settings(ALLOWED_HOSTS=["*"], MCP_SERVER={}):
        call_command("check", stdout=out, stderr=err)
    assert "mcp_server.W002" in out.getvalue() + err.getvalue()
