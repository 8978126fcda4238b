"""The ids of the message being served on log records (mcp_server.log_context): the filter, the
``traceparent`` it reads, the loggers it is installed on, and a tool's record in process, over
Streamable HTTP (a daphne process) and on a Celery worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_server import Configuration, Server, log_context
from mcp_server.log_context import RequestContextFilter, parse_traceparent, serving, trace_id_of

from .doc_blocks import blocks
from .harness import REPO
from .waiting import PATIENCE, wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
ATTRIBUTES = ("mcp_request_id", "mcp_session_id", "mcp_trace_id", "mcp_method")


def record(name: str = "mcp_server", **extra: object) -> logging.LogRecord:
    """A record as ``logger.info("...", extra=extra)`` makes it."""
    return logging.getLogger(name).makeRecord(name, logging.INFO, __file__, 1, "message", (), None,
                                              extra=extra or None)


def filtered(**extra: object) -> logging.LogRecord:
    entry = record(**extra)
    assert RequestContextFilter().filter(entry) is True  # it never drops a record
    return entry


def ids_of(entry: logging.LogRecord) -> tuple:
    return tuple(getattr(entry, name) for name in ATTRIBUTES)


# The filter ---------------------------------------------------------------------------------------
def test_outside_a_message_the_ids_are_none():
    assert log_context.current() is None
    assert ids_of(filtered()) == (None, None, None, None)


def test_inside_a_message_the_record_carries_its_ids_and_they_are_restored_after():
    params = {"name": "add", "_meta": {"traceparent": TRACEPARENT}}
    with serving(method="tools/call", request_id=7, session_id="s-1", params=params):
        assert log_context.current() == log_context.Ids(7, "s-1", TRACE_ID, "tools/call")
        assert ids_of(filtered()) == (7, "s-1", TRACE_ID, "tools/call")
    assert log_context.current() is None
    assert ids_of(filtered()) == (None, None, None, None)


def test_an_inner_message_keeps_what_it_does_not_name_and_the_outer_ids_come_back():
    with serving(session_id="s-1"):
        with serving(method="ping", request_id="r-2"):
            assert ids_of(filtered()) == ("r-2", "s-1", None, "ping")
        with serving(method="tools/call", request_id=3, session_id="s-2",
                     params={"_meta": {"traceparent": TRACEPARENT}}):
            assert ids_of(filtered()) == (3, "s-2", TRACE_ID, "tools/call")
        assert ids_of(filtered()) == (None, "s-1", None, None)


def test_update_adds_ids_until_the_enclosing_serving_ends_and_does_nothing_outside_one():
    from mcp_server import log_context

    log_context.update(method="ping", request_id=1)  # no serving: nothing is left behind
    assert ids_of(filtered()) == (None, None, None, None)
    with serving(session_id="s-1"):
        log_context.update(method="tools/call", request_id=4, params={"_meta": {"traceparent": TRACEPARENT}})
        assert ids_of(filtered()) == (4, "s-1", TRACE_ID, "tools/call")
    assert ids_of(filtered()) == (None, None, None, None)


def test_covers_tells_whether_the_ids_in_effect_are_a_messages_own():
    from mcp_server import log_context

    assert not log_context.covers("ping", 1, None)
    with serving(method="ping", request_id=1, session_id="s-1"):
        assert log_context.covers("ping", 1, "s-1")
        assert not log_context.covers("ping", 2, "s-1")
        assert not log_context.covers("ping", 1, None)  # a session the dispatcher made names itself
        assert not log_context.covers("tools/list", 1, "s-1")


def test_attributes_given_with_extra_are_not_overwritten():
    with serving(method="tools/call", request_id=7, session_id="s-1"):
        entry = filtered(mcp_request_id="given", mcp_trace_id="mine")
    assert ids_of(entry) == ("given", "s-1", "mine", "tools/call")
    assert ids_of(filtered(mcp_session_id="kept")) == (None, "kept", None, None)


async def test_each_task_sees_its_own_message():
    async def serve(request_id: int, started: asyncio.Event, other: asyncio.Event) -> tuple:
        with serving(method="tools/call", request_id=request_id):
            started.set()
            await other.wait()  # both are inside their message at once
            return ids_of(filtered())

    first, second = asyncio.Event(), asyncio.Event()
    results = await asyncio.gather(serve(1, first, second), serve(2, second, first))
    assert [ids[0] for ids in results] == [1, 2]


async def test_a_detached_task_carries_no_message_and_a_carried_context_carries_only_it():
    with serving(method="tools/call", request_id=5):
        inherited = asyncio.create_task(asyncio.sleep(0, "x"))
        detached = log_context.detached()
        carried = log_context.carried()
        await inherited
    assert detached.run(log_context.current) is None
    assert carried.run(log_context.current) == log_context.Ids(5, None, None, "tools/call")
    assert len(list(carried)) == 1  # nothing of the loop's other context goes to a pool thread


# traceparent --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [
    TRACEPARENT,
    f"00-{TRACE_ID}-00f067aa0ba902b7-00",  # not sampled: still a valid context
    f"01-{TRACE_ID}-00f067aa0ba902b7-01-later-fields",  # a later version may append fields
])
def test_a_valid_traceparent_gives_its_trace_id(value):
    assert parse_traceparent(value) == TRACE_ID
    assert trace_id_of({"_meta": {"traceparent": value}}) == TRACE_ID


@pytest.mark.parametrize("value", [
    "00-ab-cd-01",  # too short
    f"00-{TRACE_ID.upper()}-00f067aa0ba902b7-01",  # upper-case hex
    f"00-{TRACE_ID}-00f067aa0ba902b7-01-extra",  # version 00 has exactly four fields
    f"ff-{TRACE_ID}-00f067aa0ba902b7-01",  # version ff is invalid
    f"00-{'0' * 32}-00f067aa0ba902b7-01",  # all-zero trace id
    f"00-{TRACE_ID}-{'0' * 16}-01",  # all-zero parent id
    f"00-{TRACE_ID}-00f067aa0ba902b7-1",
    f"00_{TRACE_ID}_00f067aa0ba902b7_01",
    f" {TRACEPARENT}",
    f"{TRACEPARENT}\n",
    "",
    42,
    None,
])
def test_an_invalid_traceparent_gives_no_trace_id(value):
    assert parse_traceparent(value) is None
    with serving(method="ping", request_id=1, params={"_meta": {"traceparent": value}}):
        assert filtered().mcp_trace_id is None


@pytest.mark.parametrize("params", [None, {}, [], "x", {"_meta": None}, {"_meta": []}, {"name": "a"},
                                    {"_meta": {"progressToken": 1}}])
def test_params_without_a_traceparent_give_no_trace_id(params):
    assert trace_id_of(params) is None


# The package's loggers ----------------------------------------------------------------------------
def logger_names_in_source() -> set[str]:
    names = set()
    for package in ("mcp_server", "mcp_client"):
        for path in (REPO / package).rglob("*.py"):
            names.update(re.findall(r"""getLogger\(\s*["']([\w.]+)["']\s*\)""", path.read_text()))
    return names


def test_install_covers_every_named_logger_of_the_package():
    names = logger_names_in_source()
    assert {"mcp_server", "mcp_server.http", "mcp_client"} <= names  # the search finds them
    assert names <= set(log_context.LOGGER_NAMES), "a logger of the source is not in LOGGER_NAMES"
    for name in log_context.LOGGER_NAMES:  # installed by the app's ready()
        filters = logging.getLogger(name).filters
        assert sum(isinstance(each, RequestContextFilter) for each in filters) == 1, name
    log_context.install()  # again: nothing added twice
    for name in log_context.LOGGER_NAMES:
        assert sum(isinstance(each, RequestContextFilter) for each in logging.getLogger(name).filters) == 1


def test_no_logger_of_the_package_is_made_from_its_module_name():
    """A ``getLogger(__name__)`` would be a child logger that the list cannot name ahead."""
    for package in ("mcp_server", "mcp_client"):
        for path in (REPO / package).rglob("*.py"):
            assert "getLogger(__name__)" not in path.read_text(), path


# A tool's records, in process ---------------------------------------------------------------------
class Collect(logging.Handler):
    """A handler with the project's handler-level filter, as docs/production.md configures one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RequestContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, entry: logging.LogRecord) -> None:
        self.records.append(entry)


@contextlib.contextmanager
def collected(name: str) -> Iterator[Collect]:
    logger, handler = logging.getLogger(name), Collect()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def logging_server() -> Server:
    server = Server("logs")

    @server.tool
    def plain_tool(text: str) -> str:  # runs on a worker thread
        logging.getLogger("tests.log_tool").info("plain %s", text)
        return "ok"

    @server.tool
    async def async_tool(text: str) -> str:
        logging.getLogger("tests.log_tool").info("async %s", text)
        # A record of the package's own logger: its installed filter sets the ids.
        logging.getLogger("mcp_server").info("package %s", text)
        return "ok"

    return server


def test_a_tool_record_carries_the_ids_of_its_request_in_process(make_client, caplog):
    client = make_client(logging_server())
    caplog.set_level(logging.INFO, logger="mcp_server")
    with collected("tests.log_tool") as handler:
        first = client.request("tools/call", {"name": "plain_tool", "arguments": {"text": "a"},
                                              "_meta": {"traceparent": TRACEPARENT}})
        client.request("tools/call", {"name": "async_tool", "arguments": {"text": "b"}},
                       request_id="call-b")
    plain, async_ = handler.records
    assert plain.getMessage() == "plain a"
    # In process there is no session id.
    assert ids_of(plain) == (first["id"], None, TRACE_ID, "tools/call")
    assert async_.getMessage() == "async b"
    assert ids_of(async_) == ("call-b", None, None, "tools/call")
    [package] = [entry for entry in caplog.records if entry.getMessage() == "package b"]
    assert ids_of(package) == ("call-b", None, None, "tools/call")  # caplog's handler has no filter
    assert ids_of(filtered()) == (None, None, None, None)  # and nothing is left behind


def test_a_notification_is_served_with_its_method_and_no_request_id(make_client):
    server = logging_server()
    seen = []
    server.hooks.roots_list_changed = lambda params: seen.append(log_context.current())
    client = make_client(server, capabilities={"roots": {"listChanged": True}})
    client.notify("notifications/roots/list_changed", {"_meta": {"traceparent": TRACEPARENT}})
    assert seen == [log_context.Ids(None, None, TRACE_ID, "notifications/roots/list_changed")]


def test_a_plain_hook_fired_from_the_loop_runs_with_the_ids_and_its_failure_record_carries_them(
        make_client, caplog):
    seen = []

    def reporter(exc: BaseException, context: dict) -> None:  # on the hooks' thread pool
        seen.append(log_context.current())
        raise RuntimeError("the reporter failed too")

    server = Server("logs", configuration=Configuration(exception_reporter=reporter))

    @server.tool
    async def report() -> str:
        server.report_exception(ValueError("reported"), {"tool": "report"})  # fired, not awaited
        return "ok"

    caplog.set_level(logging.INFO, logger="mcp_server")
    client = make_client(server)
    response = client.request("tools/call", {"name": "report", "arguments": {}}, request_id="r-1")
    assert response["result"]["content"][0]["text"] == "ok"
    failed = wait_until(lambda: [entry for entry in caplog.records
                                 if entry.getMessage() == "exception_reporter failed"])
    assert seen == [log_context.Ids("r-1", None, None, "tools/call")]
    assert ids_of(failed[0]) == ("r-1", None, None, "tools/call")


@pytest.mark.django_db(transaction=True)
async def test_the_process_tasks_a_request_starts_run_outside_it(monkeypatch):
    """The transport's runtime starts lazily, on the first request that needs it: its heartbeat
    and listener outlive that request, and their records are not its."""
    from mcp_server.http import StreamableHTTPTransport
    from mcp_server.http.runtime import Runtime

    from .waiting import eventually

    seen: list = []

    async def heartbeat(self: Runtime) -> None:
        seen.append(("heartbeat", log_context.current()))

    async def receive(self: Runtime) -> None:
        seen.append(("receive", log_context.current()))

    monkeypatch.setattr(Runtime, "_heartbeat_forever", heartbeat)
    monkeypatch.setattr(Runtime, "_receive_forever", receive)
    transport = StreamableHTTPTransport(logging_server())
    try:
        with serving(method="tools/call", request_id=1, session_id="s-1"):
            await transport.ensure_runtime()
            await eventually(lambda: len(seen) == 2)
    finally:
        await transport.close()
    assert sorted(seen) == [("heartbeat", None), ("receive", None)]


# The HTTP endpoint's own records, in process ------------------------------------------------------
SESSION = "5e55" * 8


def http_records(caplog, logger: str) -> list[logging.LogRecord]:
    return [entry for entry in caplog.records if entry.name == logger]


@pytest.mark.django_db(transaction=True)
async def test_a_store_failure_warning_carries_the_session_id_the_request_named(caplog, monkeypatch):
    from mcp_server.http import StreamableHTTPTransport
    from mcp_server.http.redis_client import RedisUnavailable

    from .http_support import call_asgi, post_headers

    transport = StreamableHTTPTransport(logging_server(), enable_json_response=True)

    async def unavailable(session_id: str) -> None:
        raise RedisUnavailable("Redis does not answer")

    monkeypatch.setattr(transport.sessions, "load", unavailable)
    caplog.set_level(logging.INFO, logger="mcp_server.http")
    message = {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
    try:
        reply = await call_asgi(transport.as_asgi(), "POST", post_headers(SESSION, **{
            "mcp-protocol-version": "2025-11-25"}), [json.dumps(message).encode()])
    finally:
        await transport.close()
    assert reply.start["status"] == 503
    [warning] = http_records(caplog, "mcp_server.http")
    assert "Redis does not answer" in warning.getMessage()
    assert warning.mcp_session_id == SESSION
    assert ids_of(filtered()) == (None, None, None, None)


async def test_an_authentication_refusal_record_carries_the_session_id_the_request_named(caplog):
    from mcp_server.http import StreamableHTTPTransport

    from .auth_support import (
        AuthorizationServer,
        Keys,
        bearer,
        resource_server_from,
        resource_server_settings,
        unsigned,
    )
    from .http_support import call_asgi, post_headers

    caplog.set_level(logging.INFO, logger="mcp_server.auth")
    issuer = AuthorizationServer([Keys("key-1")])
    try:
        with resource_server_from(resource_server_settings(issuer)) as resource_server:
            transport = StreamableHTTPTransport(logging_server(), enable_json_response=True,
                                                resource_server=resource_server)
            message = {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
            try:
                reply = await call_asgi(transport.as_asgi(), "POST", {
                    **post_headers(SESSION, **{"mcp-protocol-version": "2025-11-25"}),
                    **bearer(unsigned())}, [json.dumps(message).encode()])
            finally:
                await transport.close()
    finally:
        issuer.close()
    assert reply.start["status"] == 401
    [refusal] = http_records(caplog, "mcp_server.auth")
    assert refusal.getMessage() == "JWT refused: algorithm 'none' is not allowed"
    # Refused before its body is read: the session it named is all that is known.
    assert ids_of(refusal) == (None, SESSION, None, None)


@pytest.mark.django_db(transaction=True)
async def test_a_modern_request_over_http_carries_its_request_and_trace_ids_and_no_session():
    from mcp_server.http import StreamableHTTPTransport

    from .modern_support import envelope, modern_request, post

    transport = StreamableHTTPTransport(logging_server())
    message = modern_request("tools/call", "m-1", meta={**envelope(), "traceparent": TRACEPARENT},
                             name="async_tool", arguments={"text": "modern"})
    try:
        with collected("tests.log_tool") as handler:
            reply = await post(transport.as_asgi(), message)
    finally:
        await transport.close()
    assert reply.status == 200 and reply.result["content"][0]["text"] == "ok"
    [entry] = handler.records
    assert ids_of(entry) == ("m-1", None, TRACE_ID, "tools/call")


# A background call's records, outside any message --------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_background_call_that_no_worker_took_is_logged_with_the_ids_of_its_request(caplog):
    import datetime

    from django.conf import settings
    from django.test import override_settings

    from mcp_server.background.queue_wait import expire_if_untaken
    from mcp_server.invoke import run_in_thread
    from mcp_server.models import ToolCall

    def queued_long_ago() -> ToolCall:
        call = ToolCall.objects.create(id=f"call-{uuid.uuid4().hex}", tool="slow", session_id=SESSION,
                                       request_id=12, params={"_meta": {"traceparent": TRACEPARENT}})
        ToolCall.objects.filter(id=call.id).update(
            updated_at=call.updated_at - datetime.timedelta(hours=1))
        return call

    call = await run_in_thread(queued_long_ago)
    caplog.set_level(logging.INFO, logger="mcp_server.background")
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "BACKGROUND_CALL_QUEUE_TIMEOUT": 60}):
        assert await expire_if_untaken(call) is not None
    [warning] = [entry for entry in caplog.records if entry.name == "mcp_server.background"]
    assert call.id in warning.getMessage()
    assert ids_of(warning) == (12, SESSION, TRACE_ID, "tools/call")


# The docs' JSON formatter -------------------------------------------------------------------------
def test_the_json_formatter_of_the_docs_is_the_one_the_tests_run():
    page = (REPO / "docs" / "production.md").read_text()
    [block] = [b for b in blocks(page) if b.file and b.file[0] == "mysite/logs.py"]
    assert block.text.split("\n", 1)[1].strip() in (REPO / "tests" / "log_json.py").read_text()
    namespace: dict = {}
    exec(compile(block.text, "mysite/logs.py", "exec"), namespace)
    with serving(method="tools/call", request_id=9, session_id="s-9",
                 params={"_meta": {"traceparent": TRACEPARENT}}):
        entry = filtered()
    line = json.loads(namespace["JSONFormatter"]().format(entry))
    assert {key: line[key] for key in ATTRIBUTES} == {
        "mcp_request_id": 9, "mcp_session_id": "s-9", "mcp_trace_id": TRACE_ID, "mcp_method": "tools/call"}
    assert line["message"] == "message" and line["logger"] == "mcp_server" and line["process"] == os.getpid()
    for name in ("mcp_server.log_context.RequestContextFilter", "mysite.logs.JSONFormatter"):
        assert name in page


def test_the_logging_settings_of_the_docs_write_json_lines_with_the_ids(tmp_path):
    """The page's two blocks, as a project writes them, configured in a process of their own."""
    import subprocess
    import sys

    page = (REPO / "docs" / "production.md").read_text()
    [formatter] = [b for b in blocks(page) if b.file and b.file[0] == "mysite/logs.py"]
    [settings] = [b for b in blocks(page) if b.file and "LOGGING" in b.text]
    (tmp_path / "mysite").mkdir()
    (tmp_path / "mysite" / "__init__.py").write_text("")
    (tmp_path / "mysite" / "logs.py").write_text(formatter.text)
    script = settings.text + f"""
import logging, logging.config
from mcp_server.log_context import serving
logging.config.dictConfig(LOGGING)
with serving(method="tools/call", request_id=3, session_id="s-3",
             params={{"_meta": {{"traceparent": "{TRACEPARENT}"}}}}):
    logging.getLogger("mysite.tools").info("refund 42 sent")
logging.getLogger("mysite.tools").info("outside")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=PATIENCE,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"})
    assert done.returncode == 0, done.stderr
    inside, outside = (json.loads(line) for line in done.stderr.splitlines())
    assert {key: inside[key] for key in ("message", *ATTRIBUTES)} == {
        "message": "refund 42 sent", "mcp_request_id": 3, "mcp_session_id": "s-3",
        "mcp_trace_id": TRACE_ID, "mcp_method": "tools/call"}
    assert [outside[key] for key in ATTRIBUTES] == [None] * 4


# Processes: daphne, and a Celery worker -----------------------------------------------------------
def lines_of(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def line_with(path: Path, message: str) -> dict:
    """The first JSON line of ``path`` whose message is ``message``, waited for."""
    def found() -> dict | None:
        return next((line for line in lines_of(path) if line["message"] == message), None)

    return wait_until(found, PATIENCE, f"the log line {message!r} in {path}")


@pytest.mark.django_db(transaction=True)
def test_over_streamable_http_a_tool_record_carries_the_session_request_and_trace_ids(
        django_db_blocker, tmp_path):
    from .http_support import Client, running, tool_text

    path = tmp_path / "log.jsonl"
    with running(django_db_blocker, env={"MCP_TEST_LOG_IDS": str(path)}) as server:
        client = Client(server.url)
        client.initialize()
        text = f"over http {uuid.uuid4().hex}"
        exchange = client.tool("log_line", {"text": text}, traceparent=TRACEPARENT)
        assert tool_text(exchange) == "logged"
        line = line_with(path, f"log_line: {text}")
        assert line["mcp_session_id"] == client.session_id
        assert line["mcp_request_id"] == exchange.response["id"]
        assert (line["mcp_trace_id"], line["mcp_method"]) == (TRACE_ID, "tools/call")
        assert line["process"] == server.process.pid
        # The process's own records outside any message carry none (its startup line, say).
        assert any(entry["mcp_request_id"] is None and entry["logger"].startswith("mcp_server")
                   for entry in lines_of(path))


@pytest.mark.django_db(transaction=True)
def test_a_background_call_record_on_a_celery_worker_carries_the_ids_of_its_request(
        django_db_setup, django_db_blocker, tmp_path):
    from .celery_support import redis_broker, worker_beside
    from .http_cluster import cluster, listening, new_session, require_services

    require_services()
    path = tmp_path / "log.jsonl"
    redis_db, broker_db, settings = 6, 7, {"PROCESS_HEARTBEAT_INTERVAL": 1}
    env = {"CELERY_BROKER_URL": redis_broker(broker_db), "MCP_TEST_LOG_IDS": str(path)}
    with django_db_blocker.unblock(), \
            cluster(1, redis_db=redis_db, mcp_settings=settings, env=env, wait=False) as [server], \
            worker_beside(redis_db, env, settings) as worker:
        listening([server])
        client = new_session(server.url)
        text = f"on the worker {uuid.uuid4().hex}"
        exchange = client.request("tools/call", {"name": "background_log_line", "arguments": {"text": text},
                                                 "_meta": {"traceparent": TRACEPARENT}})
        result = exchange.response["result"]
        assert not result.get("isError"), result
        assert json.loads(result["content"][0]["text"])["pid"] == worker.process.pid
        line = line_with(path, f"background_log_line: {text}")
        assert line["process"] == worker.process.pid  # written on the worker
        assert line["mcp_session_id"] == client.session_id
        assert line["mcp_request_id"] == exchange.response["id"]
        assert (line["mcp_trace_id"], line["mcp_method"]) == (TRACE_ID, "tools/call")
