"""Hooks that use the ORM, plugged into test servers by dotted path.

Each one runs a query and appends what it found, as a JSON line, to the file named by
``MCP_TEST_HOOK_LOG``; a query made on the event loop's thread raises ``SynchronousOnlyOperation``
instead, and the line is then never written (the validator's request is refused too).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from django.contrib.auth import get_user_model

from mcp_server.models import Session

_lock = threading.Lock()


def _record(hook: str, **found: Any) -> None:
    path = os.environ.get("MCP_TEST_HOOK_LOG")
    if path:
        with _lock, open(path, "a") as log:
            log.write(json.dumps({"hook": hook, **found}) + "\n")


def validate(request: Any, session_id: str) -> bool:
    """Allow a request only when its session is a row (it always is, for a known session)."""
    exists = Session.objects.filter(pk=session_id).exists()
    _record("validator", session_id=session_id, session_row=exists)
    return exists


def report(exc: BaseException, context: dict) -> None:
    users = get_user_model().objects.count()
    _record("reporter", error=f"{type(exc).__name__}: {exc}", users=users)


def instrument(data: dict) -> None:
    users = get_user_model().objects.count()
    _record("instrumentation", method=data.get("method"), users=users)


def read_log(path: Any) -> list[dict]:
    """What the hooks recorded so far."""
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [json.loads(line) for line in log.read().splitlines() if line]
