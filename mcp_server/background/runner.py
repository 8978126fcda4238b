"""Which runner background calls use, and how they are handed to Celery.

``MCP_SERVER["BACKGROUND_CALLS"]``: ``"auto"`` (the default) uses Celery when the project sets
``CELERY_BROKER_URL``, else runs them in the web process; ``"celery"`` and ``"local"`` force one.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from mcp_protocol.errors import InternalError

from ..settings import mcp_settings

CHOICES = ("auto", "celery", "local")
TASK_NAME = "mcp_server.run_tool_call"


def runner_name() -> str:
    """``"celery"`` or ``"local"``, as configured."""
    choice = mcp_settings.BACKGROUND_CALLS
    if choice not in CHOICES:
        raise ImproperlyConfigured(f"MCP_SERVER['BACKGROUND_CALLS'] must be one of {CHOICES}, not {choice!r}")
    if choice == "auto":
        return "celery" if getattr(settings, "CELERY_BROKER_URL", None) else "local"
    return choice


def celery_enabled() -> bool:
    return runner_name() == "celery"


def broker_url() -> str:
    """The project's ``CELERY_BROKER_URL`` with its password masked, fit for logs and errors."""
    url = str(getattr(settings, "CELERY_BROKER_URL", None) or "")
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return "(a broker URL that cannot be read)"


# How to send background calls to workers, in the lines a project writes into its settings.
TO_CELERY = ('set CELERY_BROKER_URL in the settings of the web processes too, not only the '
             'worker\'s: CELERY_BROKER_URL = "redis://127.0.0.1:6379/1" (and run '
             '"celery -A <project> worker")')
KEEP_LOCAL = 'MCP_SERVER["BACKGROUND_CALLS"] = "local"'


def where_calls_run() -> tuple[int, str]:
    """Where this process sends background tool calls, as a log level and a sentence: a warning
    when they run here only because no broker is configured (the setting chose nothing)."""
    if runner_name() == "celery":
        return logging.INFO, f"background tool calls go to Celery workers through the broker {broker_url()}"
    if mcp_settings.BACKGROUND_CALLS == "local":
        return logging.INFO, ('background tool calls run in this process (MCP_SERVER["BACKGROUND_CALLS"] '
                              '= "local")')
    return logging.WARNING, ("background tool calls run in this web process: CELERY_BROKER_URL is not set "
                             f"here. To run them on Celery workers, {TO_CELERY}; to keep them here "
                             f"and say so, {KEEP_LOCAL}")


def enqueue(call_id: str, task_id: str | None = None) -> None:
    """Queue the call's Celery task (blocking: it talks to the broker), by the name the workers
    know it by (``mcp_server.tasks``). At most once: the task is acknowledged when a worker takes
    it, so a worker that dies does not get it run again (an idempotent call is queued again by the
    process that finds its worker dead: recovery.py)."""
    from celery import current_app

    try:
        current_app.send_task(TASK_NAME, (call_id,), task_id=task_id or call_id, ignore_result=True)
    except Exception as exc:  # the broker refused or did not answer
        raise InternalError(f"The background call could not be queued: {type(exc).__name__}") from exc


def revoke(call_id: str) -> None:
    """Tell the workers to drop the queued task (blocking). A worker that took it anyway finds its
    record cancelled and does not run it."""
    from celery import current_app

    current_app.control.revoke(call_id)
