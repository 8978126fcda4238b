from __future__ import annotations

import pytest

from mcp_server import Server, configuration

from .harness import InProcessClient


@pytest.fixture(autouse=True)
def _fresh_global_configuration():
    """Tests that call ``configure()`` must not leak settings into other tests."""
    saved = dict(configuration.global_configuration._values)
    yield
    configuration.global_configuration._values = saved


@pytest.fixture
def make_client():
    """``make_client(server, revision="2025-11-25", initialize=True)`` -> InProcessClient."""

    def make(server: Server, revision: str = "2025-11-25", initialize: bool = True,
             capabilities: dict | None = None) -> InProcessClient:
        client = InProcessClient(server, revision)
        if initialize:
            client.initialize(revision, capabilities)
        return client

    return make
