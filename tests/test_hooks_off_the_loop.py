"""User hooks that use the ORM: the session request validator, the exception reporter and the
instrumentation callback run on a worker thread when they are plain functions (a query on the
event loop's thread raises ``SynchronousOnlyOperation``), and are awaited when they are ``async def``.
In process, over stdio and over Streamable HTTP (a daphne process).
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.contrib.auth import get_user_model

from mcp_server import Configuration, Server, hook_calls

from .harness import StdioServer
from .http_harness import database_env
from .http_support import Client, running, tool_text, wait_until
from .orm_hooks import read_log

ORM_HOOKS = {
    "SESSION_REQUEST_VALIDATOR": "tests.orm_hooks.validate",
    "EXCEPTION_REPORTER": "tests.orm_hooks.report",
    "INSTRUMENTATION_CALLBACK": "tests.orm_hooks.instrument",
}


@pytest.fixture(autouse=True)
def _database(transactional_db):
    """The hooks query from worker threads and other processes: committed data only."""


def failing_server(configuration: Configuration) -> Server:
    server = Server("hooks", configuration=configuration)

    @server.tool
    def explode() -> str:
        raise RuntimeError("the tool exploded")

    return server


# In process -------------------------------------------------------------------------------------
def test_plain_hooks_may_use_the_orm(make_client):
    get_user_model().objects.create_user("someone")
    seen: list[tuple] = []

    def report(exc: BaseException, context: dict) -> None:
        seen.append(("reporter", str(exc), get_user_model().objects.count()))

    def instrument(data: dict) -> None:
        seen.append(("instrumentation", data["method"], get_user_model().objects.count()))

    client = make_client(failing_server(Configuration(exception_reporter=report,
                                                      instrumentation_callback=instrument)))
    result = client.result("tools/call", {"name": "explode", "arguments": {}})
    assert result["isError"] is True
    # Both hooks ran before the response was made, and their queries worked.
    assert ("reporter", "the tool exploded", 1) in seen
    assert ("instrumentation", "tools/call", 1) in seen


def test_async_hooks_are_awaited_on_the_loop(make_client):
    seen: list[tuple] = []

    async def report(exc: BaseException, context: dict) -> None:
        await asyncio.sleep(0)
        seen.append(("reporter", str(exc), threading.current_thread().name))

    async def instrument(data: dict) -> None:
        asyncio.get_running_loop()  # raises off the loop
        seen.append(("instrumentation", data["method"]))

    client = make_client(failing_server(Configuration(exception_reporter=report,
                                                      instrumentation_callback=instrument)))
    client.result("tools/call", {"name": "explode", "arguments": {}})
    assert [s[:2] for s in seen if s[0] == "reporter"] == [("reporter", "the tool exploded")]
    assert ("instrumentation", "tools/call") in seen


def test_a_report_from_code_that_cannot_await_goes_on_off_the_loop():
    """``server.report_exception`` called on the loop's thread: the ORM reporter runs anyway."""
    done = threading.Event()
    seen: list[tuple] = []

    def report(exc: BaseException, context: dict) -> None:
        seen.append((str(exc), context, get_user_model().objects.count(), threading.current_thread().name))
        done.set()

    server = Server("hooks", configuration=Configuration(exception_reporter=report))

    async def on_the_loop() -> None:
        server.report_exception(RuntimeError("late"), {"notification": "broadcast"})

    asyncio.run(on_the_loop())
    assert done.wait(30), "the reporter never ran"
    [(message, context, users, thread)] = seen
    assert (message, context, users) == ("late", {"notification": "broadcast"}, 0)
    assert thread.startswith("mcp-hook")


def test_a_failing_hook_is_logged_and_the_request_still_answered(make_client, caplog):
    def report(exc: BaseException, context: dict) -> None:
        raise ValueError("the reporter failed")

    client = make_client(failing_server(Configuration(exception_reporter=report)))
    result = client.result("tools/call", {"name": "explode", "arguments": {}})
    assert result["isError"] is True
    assert "exception_reporter failed" in caplog.text


# stdio ------------------------------------------------------------------------------------------
def test_orm_hooks_over_stdio(tmp_path):
    log = tmp_path / "hooks.jsonl"
    get_user_model().objects.create_user("someone")
    env = {"DJANGO_SETTINGS_MODULE": "tests.http_settings", "MCP_TEST_HTTP_SETTINGS": json.dumps(ORM_HOOKS),
           "MCP_TEST_HOOK_LOG": str(log), **database_env()}
    with StdioServer(env=env) as server:
        server.initialize()
        response = server.request("tools/call", {"name": "ask_client", "arguments": {"request": "bogus"}})
        assert response["result"]["isError"] is True
        assert server.request("ping")["result"] == {}
        found = wait_until(lambda: {e["hook"] for e in read_log(log)} >= {"reporter", "instrumentation"}
                           and read_log(log), timeout=30)
    assert {"hook": "reporter", "error": "ValueError: unknown request 'bogus'", "users": 1} in found
    assert {"hook": "instrumentation", "method": "tools/call", "users": 1} in found
    assert {"hook": "instrumentation", "method": "ping", "users": 1} in found


# Streamable HTTP --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hook_log(tmp_path_factory):
    return tmp_path_factory.mktemp("hooks") / "hooks.jsonl"


@pytest.fixture(scope="module")
def orm_hooked(django_db_setup, django_db_blocker, hook_log):
    env = {"MCP_TEST_HOOK_LOG": str(hook_log)}
    with running(django_db_blocker, mcp_settings=ORM_HOOKS, env=env) as server:
        yield server


def test_orm_hooks_over_http(orm_hooked, hook_log):
    get_user_model().objects.create_user("someone")
    client = Client(orm_hooked.url)
    client.initialize()
    # The validator queries the session's row on every request of the session: on the event loop
    # it would raise, and the request would get 500 instead.
    assert client.request("ping").response["result"] == {}
    exchange = client.tool("ask_client", {"request": "bogus"})
    assert exchange.response["result"]["isError"] is True, tool_text(exchange)
    found = wait_until(lambda: {e["hook"] for e in read_log(hook_log)} >= {"reporter", "instrumentation",
                                                                          "validator"}
                       and read_log(hook_log), timeout=30)
    assert {"hook": "validator", "session_id": client.session_id, "session_row": True} in found
    assert {"hook": "reporter", "error": "ValueError: unknown request 'bogus'", "users": 1} in found
    assert {"hook": "instrumentation", "method": "ping", "users": 1} in found
    assert {"hook": "instrumentation", "method": "tools/call", "users": 1} in found


def test_an_async_report_from_code_that_cannot_await_is_not_lost_when_the_loop_ends():
    """Fired as a task on the loop; a transport settles such tasks before its loop ends."""
    seen: list[str] = []

    async def report(exc: BaseException, context: dict) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        seen.append(str(exc))

    server = Server("hooks", configuration=Configuration(exception_reporter=report))

    async def on_the_loop() -> None:
        server.report_exception(RuntimeError("late"), {"notification": "broadcast"})
        await hook_calls.settle()

    asyncio.run(on_the_loop())
    assert seen == ["late"]
