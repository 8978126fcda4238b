"""Two processes sharing ``DatabaseTokenStorage`` on PostgreSQL refresh at once: one refresh request
reaches the authorization server, the other process waits on the row lock, and both go on with the
new token; neither registers again.

The processes are tests/oauth_storage_child.py; the authorization server and the MCP server are the
loopback ``World`` of tests/oauth_support.py, whose token endpoint holds its answer to a refresh
until the test has seen the other process blocked on the lock in ``pg_stat_activity``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection

from mcp_client.contrib.django.storage import DatabaseTokenStorage

from .harness import REPO
from .http_harness import database_env, stop_process
from .oauth_support import Hit, World
from .services import require
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_lived_connections")]

KEY = "shared-mcp-server"
NAMES = ("mcp-oauth-child-1", "mcp-oauth-child-2")


@pytest.fixture
def world():
    world = World()
    yield world
    world.close()


def child(name: str, url: str) -> subprocess.Popen:
    env = {**os.environ, **database_env(), "DJANGO_SETTINGS_MODULE": "tests.settings", "PGAPPNAME": name,
           "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "tests.oauth_storage_child", KEY, url], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def waiting_on_a_lock() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = ANY(%s) "
                       "AND wait_event_type = 'Lock'", [list(NAMES)])
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.feature("OAUTH-18", "OAUTH-23", "CHTTP-07")
def test_two_processes_refresh_at_once_and_one_refresh_reaches_the_authorization_server(world):
    require(connection.vendor == "postgresql", "DATABASE_URL does not point at PostgreSQL")
    # What an earlier process left: a registration and tokens the MCP server no longer takes.
    world.refresh["rt-old"] = ""
    storage = DatabaseTokenStorage(KEY)
    asyncio.run(storage.save_client_information({"client_id": "client-0", "issuer": world.issuer,
                                                 "token_endpoint_auth_method": "none"}))
    asyncio.run(storage.save_tokens({"access_token": "at-old", "refresh_token": "rt-old",
                                     "token_type": "Bearer", "issuer": world.issuer,
                                     "expires_at": time.time() + 3600}))
    gate = threading.Event()
    answer_token = world.token

    def held_refresh(hit: Hit):
        if hit.form.get("grant_type") == "refresh_token":
            gate.wait(PATIENCE)
        return answer_token(hit)

    world.server.routes[("POST", "/token")] = held_refresh
    processes = [child(name, world.mcp_url) for name in NAMES]
    try:
        for process in processes:
            assert process.stdout.readline().strip() == "ready", process.stderr.read()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()

        def refreshes() -> list[Hit]:
            return [h for h in world.server.of("POST", "/token")
                    if h.form.get("grant_type") == "refresh_token"]

        # One refresh is at the authorization server (held there) while the other process waits on
        # the row lock: without the lock it would have sent the same refresh token too.
        wait_until(lambda: len(refreshes()) == 1 and len(waiting_on_a_lock()) == 1,
                   what="one refresh at the AS and the other process waiting on the lock")
        gate.set()
        outputs = []
        for process in processes:
            out, err = process.communicate(timeout=PATIENCE)
            assert process.returncode == 0, err
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        gate.set()
        for process in processes:
            stop_process(process)

    [refresh] = refreshes()
    assert refresh.form["refresh_token"] == "rt-old" and refresh.form["client_id"] == "client-0"
    assert world.server.of("POST", "/register") == []  # the stored registration, shared
    assert [o["access_token"] for o in outputs] == ["at-1", "at-1"]
    assert [o["text"] for o in outputs] == ["ok", "ok"]
    assert [o["violations"] for o in outputs] == [[], []]
    # Each process's first initialize was refused, then retried with the new token.
    bearers = [h.headers.get("authorization") for h in world.server.of("POST", "/mcp")]
    assert bearers.count("Bearer at-old") == 2 and "Bearer at-1" in bearers
    assert set(bearers) == {"Bearer at-old", "Bearer at-1"}
    stored = asyncio.run(storage.tokens())
    assert stored["access_token"] == "at-1" and stored["refresh_token"] == "rt-1"
