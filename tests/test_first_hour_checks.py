"""System checks and log lines for what a new project gets wrong in its first hour: an ``mcp.py``
beside the settings module that autodiscovery never reads, background calls that run in the web
process because only the worker names a broker, and hints that give the lines to write."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from mcp_server import site
from mcp_server.checks import check_background_calls

from .harness import REPO

BACKGROUND_HERE = "mcp_server.W023"


def ids(messages: list) -> list[str]:
    return [m.id for m in messages]


# An mcp.py beside the settings module ----------------------------------------------------------
SETTINGS = """from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS
import os
if os.environ.get("MYSITE_INSTALLED"):
    INSTALLED_APPS = [*INSTALLED_APPS, "mysite"]
"""
MCP = '''import mcp_server


@mcp_server.tool
def order_status(order: int) -> str:
    """Where an order is."""
    return "shipped"
'''
SHOW_TOOLS = ("import django; django.setup(); from mcp_server.site import get_server; "
              "print('order_status' in get_server().tools)")


def in_project(tmp_path, *command: str, **env: str) -> subprocess.CompletedProcess:
    """``command`` run in a project made as ``startproject mysite`` makes it: ``mysite/settings.py``,
    and the user's ``mysite/mcp.py`` beside it."""
    package = tmp_path / "mysite"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(SETTINGS)
    (package / "mcp.py").write_text(MCP)
    clean = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env={
        **clean, "DJANGO_SETTINGS_MODULE": "mysite.settings", "PYTHONPATH": f"{tmp_path}:{REPO}", **env})


def test_an_mcp_py_beside_the_settings_but_not_in_an_installed_app_is_a_warning(tmp_path):
    done = in_project(tmp_path, sys.executable, "-m", "django", "check")
    assert done.returncode == 0, done.stderr
    report = done.stdout + done.stderr
    assert "?: (mcp_server.W050) mysite/mcp.py is beside the settings module (mysite.settings), but " \
           "'mysite' is not in INSTALLED_APPS" in report
    assert 'HINT: Add the project package to INSTALLED_APPS: INSTALLED_APPS += ["mysite"]; or move ' \
           "mysite/mcp.py into an app" in report
    # What the warning is about: the tool is not served.
    served = in_project(tmp_path, sys.executable, "-c", SHOW_TOOLS)
    assert served.stdout.strip() == "False", served.stderr
    # The hint's line, written: no warning, and the tool is served.
    done = in_project(tmp_path, sys.executable, "-m", "django", "check", MYSITE_INSTALLED="1")
    assert done.returncode == 0 and "W050" not in done.stdout + done.stderr, done.stderr
    served = in_project(tmp_path, sys.executable, "-c", SHOW_TOOLS, MYSITE_INSTALLED="1")
    assert served.stdout.strip() == "True", served.stderr


def test_the_package_of_the_test_settings_has_no_mcp_py_and_no_warning():
    assert "mcp_server.W050" not in ids(run_checks())


# Where background calls run ----------------------------------------------------------------------
def test_background_tools_without_a_broker_warn_that_they_run_in_the_web_process():
    with override_settings(CELERY_BROKER_URL=None, MCP_SERVER={}):
        [warning] = [m for m in run_checks() if m.id == BACKGROUND_HERE]
    assert warning.msg.startswith("Background tool calls (")
    assert "run in the web process: CELERY_BROKER_URL is not set in these settings" in warning.msg
    assert 'CELERY_BROKER_URL = "redis://127.0.0.1:6379/1"' in warning.hint
    assert 'MCP_SERVER["BACKGROUND_CALLS"] = "local"' in warning.hint


def test_mcp_stdio_starts_without_it_for_there_every_call_runs_in_process():
    """``manage.py mcp_stdio`` runs the system checks too, on its stderr: not this one."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "CELERY_BROKER_URL": ""}
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "mcp_stdio"], input="", cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and "W023" not in done.stderr, done.stderr
    check = subprocess.run([sys.executable, str(REPO / "manage.py"), "check"], cwd=REPO,
                           capture_output=True, text=True, timeout=120, env=env)
    assert "mcp_server.W023" in check.stdout + check.stderr


def test_no_such_warning_once_the_choice_is_written_down():
    with override_settings(CELERY_BROKER_URL=None, MCP_SERVER={"BACKGROUND_CALLS": "local"}):
        assert BACKGROUND_HERE not in ids(check_background_calls())
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:6379/1", MCP_SERVER={}):
        assert BACKGROUND_HERE not in ids(check_background_calls())


@pytest.mark.parametrize("value", [0, -1, "60", True, float("nan")])
def test_a_queue_timeout_that_is_not_seconds_is_an_error(value):
    with override_settings(MCP_SERVER={"BACKGROUND_CALL_QUEUE_TIMEOUT": value}):
        [error] = [m for m in check_background_calls() if m.id == "mcp_server.E023"]
    assert "BACKGROUND_CALL_QUEUE_TIMEOUT'] must be a positive number of seconds or None" in error.msg
    for good in (None, 0.5, 600):
        with override_settings(MCP_SERVER={"BACKGROUND_CALL_QUEUE_TIMEOUT": good}):
            assert "mcp_server.E023" not in ids(check_background_calls())


def test_the_endpoint_says_where_background_calls_run_when_it_starts(caplog):
    caplog.set_level(logging.INFO, logger="mcp_server")
    with override_settings(CELERY_BROKER_URL=None, MCP_SERVER={"NAME": "first-hour"}):
        site.get_transport()
    [line] = [r for r in caplog.records if "background tool calls" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith("background tool calls run in this web process: "
                                        "CELERY_BROKER_URL is not set here.")
    assert 'MCP_SERVER["BACKGROUND_CALLS"] = "local"' in line.getMessage()
    assert "background tools: " in line.getMessage()
    caplog.clear()
    with override_settings(CELERY_BROKER_URL="redis://:s3cret@127.0.0.1:6379/1",
                           MCP_SERVER={"NAME": "first-hour-celery"}):
        site.get_transport()
    [line] = [r for r in caplog.records if "background tool calls" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("background tool calls go to Celery workers through the broker "
                                        "redis://:***@127.0.0.1:6379/1 (")


# Hints give the lines to write ----------------------------------------------------------------
def test_no_hint_points_at_the_demo_project():
    source = (REPO / "mcp_server" / "checks.py").read_text()
    assert "demo project" not in source and "project/settings.py" not in source
    settings = [
        ({"DNS_REBINDING_PROTECTION": False}, ["*"], "mcp_server.W001",
         'ALLOWED_HOSTS = ["mcp.example.com"]'),
        ({}, ["*"], "mcp_server.W002", 'ALLOWED_HOSTS = ["mcp.example.com"]'),
        ({"BACKGROUND_CALLS": "celery"}, ["localhost"], "mcp_server.E021",
         '"BACKEND": "channels_redis.core.RedisChannelLayer"'),
        ({"BACKGROUND_CALLS": "celery"}, ["localhost"], "mcp_server.E022",
         '"REDIS_URL": "redis://127.0.0.1:6379/0"'),
    ]
    in_memory = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    for mcp, hosts, check_id, line in settings:
        with override_settings(MCP_SERVER=mcp, ALLOWED_HOSTS=hosts, CHANNEL_LAYERS=in_memory):
            [message] = [m for m in run_checks() if m.id == check_id]
        assert line in message.hint, (check_id, message.hint)
