"""Tests that need a real service skip when it is absent, unless the run requires services.

``MCP_TESTS_REQUIRE_SERVICES=1`` (set by ``.ci/run``) turns every such skip into a failure.
"""

from __future__ import annotations

import os
import socket

import pytest

REQUIRED = os.environ.get("MCP_TESTS_REQUIRE_SERVICES") == "1"


def reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false; fail instead when services are required."""
    if condition:
        return
    if REQUIRED:
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)
