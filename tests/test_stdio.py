"""The stdio transport: ``manage.py mcp_stdio`` as a subprocess, and StdioTransport on in-memory pipes.

Every line the server writes is checked against the negotiated revision's schema (tests/wire.py);
deliberately malformed client lines are written raw.
"""

from __future__ import annotations

import asyncio
import io
import json
import queue
import signal
from typing import Any

import pytest

from mcp_protocol import methods
from mcp_server import Configuration, Server, StdioTransport
from mcp_server.management.commands.mcp_stdio import Command
from mcp_server.settings import DEFAULTS
from mcp_server.transports.stdio import DEFAULT_MAX_LINE_BYTES, FrameTooLargeError

from .harness import CLIENT_INFO, StdioServer
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
# The demo project plus tests/stdio_app (the async `sleepy` tool and the `announce` tool).
TEST_SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}


class Stdio(StdioServer):
    """StdioServer that can also hand back raw lines and wait for stderr."""

    def read_line(self, timeout: float = PATIENCE) -> bytes | None:
        """The next line exactly as written (its message is still checked); None at the end."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output from mcp_stdio in {timeout}s; stderr:\n{self.stderr}") from None
        if line is not None:
            check_server_message(json.loads(line), self.revision)
        return line

    def ping(self) -> None:
        """A ping still answers: the server survived whatever came before."""
        assert self.request("ping")["result"] == {}


def ping_line(request_id: Any, *, width: int | None = None) -> bytes:
    """A ping request, padded with spaces to ``width`` bytes (newline not included)."""
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()
    return line.ljust(width) if width is not None else line


# --- STDIO-01: newline-delimited JSON-RPC -------------------------------------------------------

@pytest.mark.feature("STDIO-01", "CORE-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_one_utf8_response_line_per_request_flushed_while_stdin_stays_open(revision):
    with Stdio(revision=revision) as server:
        assert server.initialize(revision)["protocolVersion"] == revision
        text = "héllo ✓ 日本語"
        request = {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": text}}}
        check_client_message(request, revision)
        # Two requests in one write: each still gets its own line. stdin stays open, so the
        # answers only arrive if every write is flushed.
        server.write_line(json.dumps(request) + "\n" + ping_line(7).decode())
        answers = {}
        for _ in range(2):
            line = server.read_line()
            assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
            message = json.loads(line.decode("utf-8"))
            answers[message["id"]] = (line, message)
        line, message = answers["req-1"]  # a string id comes back as the same string
        check_server_message(message, revision, "tools/call")
        assert message["result"]["content"] == [{"type": "text", "text": text}]
        assert text.encode("utf-8") in line  # UTF-8 on the wire, not \u escapes
        assert answers[7][1] == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert server.close() == 0


@pytest.mark.feature("STDIO-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_slow_request_does_not_hold_up_later_ones(revision):
    with Stdio(env=TEST_SETTINGS, revision=revision) as server:
        server.initialize(revision)
        # The slow call waits for the client's answer to a ping, which comes only once the
        # quick request was answered.
        slow = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                "params": {"name": "ask_client", "arguments": {"request": "ping"}}}
        server.send(slow)
        server.send({"jsonrpc": "2.0", "id": "quick", "method": "ping"})
        seen = [server.read(), server.read()]  # the quick answer and the slow call's ping, either order
        assert {"jsonrpc": "2.0", "id": "quick", "result": {}} in seen
        [asked] = [m for m in seen if m.get("method") == "ping"]
        server.send({"jsonrpc": "2.0", "id": asked["id"], "result": {}})
        second = server.read()
        check_server_message(second, revision, "tools/call")
        assert second["id"] == "slow"
        assert second["result"]["content"] == [{"type": "text", "text": '{"result": {}}'}]
        assert server.close() == 0


@pytest.mark.feature("STDIO-01", "CORE-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_blank_lines_and_notifications_get_no_reply(revision):
    with Stdio(revision=revision) as server:
        server.initialize(revision)
        server.write_line(b"\n")
        server.write_line(b"   \t \n")
        server.write_line(b"\r\n")
        server.send({"jsonrpc": "2.0", "method": "notifications/no_such_thing"}, check=False)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # Had anything above been answered, that answer would come before the ping's.
        server.write_line(ping_line("after"))
        assert server.read() == {"jsonrpc": "2.0", "id": "after", "result": {}}
        assert server.close() == 0


# --- Bad input over stdio: the errors of CORE, and the server lives on ------------------------

def _message(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


BAD_LINES = [
    # name, raw line, expected code, expected id, the feature ID it checks
    ("truncated-json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, None, ("CORE-02",)),
    ("plain-text", b"hello there", -32700, None, ("CORE-02",)),
    ("invalid-utf8", b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\xff\xfe"}}', -32700, None,
     ("CORE-02",)),
    ("jsonrpc-1.0", json.dumps({"jsonrpc": "1.0", "id": 3, "method": "ping"}).encode(), -32600, 3,
     ("CORE-03",)),
    ("jsonrpc-missing", json.dumps({"id": 4, "method": "ping"}).encode(), -32600, 4, ("CORE-03",)),
    ("jsonrpc-number", json.dumps({"jsonrpc": 2.0, "id": 5, "method": "ping"}).encode(), -32600, 5,
     ("CORE-03",)),
    ("id-float", _message(id=1.5, method="ping"), -32600, None, ("CORE-04",)),
    ("id-object", _message(id={"a": 1}, method="ping"), -32600, None, ("CORE-04",)),
    ("id-bool", _message(id=True, method="ping"), -32600, None, ("CORE-04",)),
    ("id-string-with-spaces", _message(id="two words", method="ping"), -32600, None, ("CORE-04",)),
    ("method-not-string", _message(id=6, method=42), -32600, 6, ("CORE-05",)),
    ("method-rpc-prefix", _message(id=7, method="rpc.discover"), -32600, 7, ("CORE-05",)),
    ("params-string", _message(id=8, method="ping", params="x"), -32602, 8, ("CORE-06",)),
    ("params-number", _message(id=9, method="tools/list", params=3), -32602, 9, ("CORE-06",)),
    ("params-missing-tool-name", _message(id=10, method="tools/call", params={}), -32602, 10, ()),
    ("unknown-method", _message(id=11, method="no/such/method"), -32601, 11, ("CORE-07",)),
    ("notification-with-id", _message(id=12, method="notifications/initialized"), -32601, 12,
     ("CORE-09",)),
    ("not-an-object", b"42", -32600, None, ("CORE-11",)),
    ("empty-batch", b"[]", -32600, None, ("CORE-10",)),
]


@pytest.fixture(scope="module", params=REVISIONS)
def long_lived_server(request):
    """One server per revision for the whole bad-input table: it must survive every line of it."""
    with Stdio(revision=request.param) as server:
        server.initialize(request.param)
        yield server
        assert server.close() == 0
        assert "Traceback" not in server.stderr, server.stderr


@pytest.mark.feature("STDIO-01", "CORE-02", "CORE-03", "CORE-04", "CORE-05", "CORE-06", "CORE-07",
                     "CORE-09", "CORE-10", "CORE-11")
@pytest.mark.parametrize(("line", "code", "expected_id"),
                         [pytest.param(line, code, id_, id=name) for name, line, code, id_, _ in BAD_LINES])
def test_bad_input_gets_the_core_error_and_the_server_lives_on(long_lived_server, line, code, expected_id):
    server = long_lived_server
    assert server.process.poll() is None, f"mcp_stdio exited; stderr:\n{server.stderr}"
    server.write_line(line)
    answer = server.read()
    assert answer is not None, f"mcp_stdio closed; stderr:\n{server.stderr}"
    assert answer["error"]["code"] == code, answer
    assert answer["id"] == expected_id, answer
    if code == -32700:
        assert answer["error"]["message"].startswith("Parse error")
    if code == -32601 and expected_id == 11:
        assert answer["error"]["data"] == "no/such/method"
    if line == b"42":
        assert answer["error"]["message"] == "Request must be an object"
    server.ping()


@pytest.mark.feature("STDIO-01", "CORE-10", "CORE-11", "CORE-04", "CORE-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_batch_mixing_good_and_bad_elements(revision):
    with Stdio(revision=revision) as server:
        server.initialize(revision)
        batch = [
            {"jsonrpc": "2.0", "id": 20, "method": "ping"},
            5,
            {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 21, "method": "no/such"},
            {"jsonrpc": "2.0", "id": 22, "method": "tools/call",
             "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        ]
        server.write_line(json.dumps(batch))
        answers = server.read()
        assert isinstance(answers, list) and len(answers) == 5, answers  # the notification: none
        assert answers[0] == {"jsonrpc": "2.0", "id": 20, "result": {}}
        assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
        assert answers[1]["error"]["message"] == "Request must be an object"
        assert answers[2]["id"] is None and answers[2]["error"]["code"] == -32600
        assert answers[3]["id"] == 21 and answers[3]["error"]["code"] == -32601
        check_server_message(answers[4], revision, "tools/call")
        assert answers[4]["result"]["structuredContent"] == {"sum": 3}
        # A batch with a single answer is unwrapped; an all-notification batch gives no output.
        server.write_line(json.dumps([{"jsonrpc": "2.0", "id": 23, "method": "ping"},
                                      {"jsonrpc": "2.0", "method": "notifications/initialized"}]))
        assert server.read() == {"jsonrpc": "2.0", "id": 23, "result": {}}
        server.write_line(json.dumps([{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 2))
        server.ping()
        assert server.close() == 0


# --- STDIO-02: max_line_bytes -------------------------------------------------------------------

@pytest.mark.feature("STDIO-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_over_long_line_closes_the_connection_after_answering_earlier_lines(revision):
    with Stdio("--max-line-bytes", "1024", revision=revision) as server:
        server.initialize(revision)
        # One write: the line before the long one is answered, the one after it never is.
        server.write_line(ping_line("before") + b"\n" + b"x" * 2000 + b"\n" + ping_line("after"))
        assert server.read() == {"jsonrpc": "2.0", "id": "before", "result": {}}
        assert server.read() is None  # stdout closed
        assert server.process.wait(PATIENCE) == 1
        stderr = server.wait_for_stderr("closing the connection")
        assert "mcp stdio: closing the connection: stdio frame exceeds limit of 1024 bytes" in stderr


@pytest.mark.feature("STDIO-02")
def test_stdio_max_line_bytes_setting_is_the_commands_default():
    env = {**TEST_SETTINGS, "MCP_TEST_STDIO_MAX_LINE_BYTES": "256"}
    with Stdio(env=env) as server:
        server.initialize()
        server.write_line(ping_line("fits", width=255))  # 255 bytes + newline = the limit
        assert server.read() == {"jsonrpc": "2.0", "id": "fits", "result": {}}
        server.write_line(ping_line("too-long", width=256))
        assert server.read() is None
        assert server.process.wait(PATIENCE) == 1
        assert "stdio frame exceeds limit of 256 bytes" in server.wait_for_stderr("exceeds limit")


@pytest.mark.feature("STDIO-02")
@pytest.mark.parametrize("value", ["0", "-1"])
def test_non_positive_max_line_bytes_is_refused_by_the_command(value):
    with Stdio("--max-line-bytes", value) as server:
        assert server.process.wait(PATIENCE) == 1
        assert server.read() is None
        stderr = server.wait_for_stderr("CommandError")
        assert f"CommandError: max_line_bytes must be a positive integer, not {value}" in stderr


@pytest.mark.feature("STDIO-02", "STDIO-07")
def test_command_help_documents_the_exit_statuses():
    text = " ".join(Command().create_parser("manage.py", "mcp_stdio").format_help().split())
    assert "Exit status: 0 when stdin reaches its end; 1 when the server closes the connection" in text
    assert "130 on SIGINT" in text
    assert "--max-line-bytes" in text


# --- STDIO-03: one session per process ----------------------------------------------------------

@pytest.mark.feature("STDIO-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_one_session_per_process(revision):
    with Stdio(revision=revision) as server:
        assert server.initialize(revision)["protocolVersion"] == revision
        again = server.request("initialize", {
            "protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO,
        })
        assert again["error"]["code"] == -32600
        assert "already initialized" in again["error"]["message"]
        server.ping()
        assert server.close() == 0


# --- STDIO-06: notifications --------------------------------------------------------------------

@pytest.mark.feature("STDIO-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_notification_from_a_tool_is_written_to_stdout(revision):
    with Stdio(env=TEST_SETTINGS, revision=revision) as server:
        server.initialize(revision)
        response = server.request("tools/call", {"name": "announce", "arguments": {}})
        assert response["result"]["content"] == [{"type": "text", "text": "sent=True"}]
        assert server.notifications == [
            {"jsonrpc": "2.0", "method": methods.NOTIFICATIONS_TOOLS_LIST_CHANGED}
        ]
        assert server.close() == 0


# --- STDIO-07: interrupt ------------------------------------------------------------------------

@pytest.mark.feature("STDIO-07")
@pytest.mark.parametrize(("busy", "inherited"), [(False, signal.default_int_handler),
                                                 (True, signal.default_int_handler),
                                                 (False, signal.SIG_IGN)],
                         ids=["idle", "tool-in-flight", "started-with-sigint-ignored"])
def test_sigint_exits_with_130_and_a_short_message(busy, inherited):
    # A child inherits an ignored SIGINT (a shell's `&`, a client shielding itself from Ctrl-C).
    previous = signal.signal(signal.SIGINT, inherited)
    try:
        server = Stdio(env=TEST_SETTINGS)
    finally:
        signal.signal(signal.SIGINT, previous)
    with server:
        server.initialize()
        if busy:
            server.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                         "params": {"name": "sleepy", "arguments": {"seconds": 60}}})
        server.ping()  # the server is reading, and the long call (if any) is in flight
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(PATIENCE) == 130
        stderr = server.wait_for_stderr("interrupted").strip()
        assert stderr == "mcp stdio: interrupted", stderr


# --- StdioTransport on in-memory pipes ----------------------------------------------------------

def make_server(**kwargs: Any) -> Server:
    server = Server("stdio-unit", **kwargs)

    @server.tool
    def echo(message: str) -> str:
        return message

    return server


def serve_lines(server: Server, data: bytes, *, revision: str = "2025-11-25",
                **kwargs: Any) -> tuple[StdioTransport, list[dict], str]:
    """Run a transport over ``data`` until its end; returns it, the checked answers and stderr."""
    stdout, stderr = io.BytesIO(), io.StringIO()
    transport = StdioTransport(server, stdin=io.BytesIO(data), stdout=stdout, stderr=stderr, **kwargs)
    transport.open()
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, revision)
    return transport, answers, stderr.getvalue()


def client_line(message: dict, revision: str = "2025-11-25") -> bytes:
    check_client_message(message, revision)
    return json.dumps(message).encode() + b"\n"


@pytest.mark.feature("STDIO-02")
@pytest.mark.parametrize("value", [0, -1, None, 1.5, True, "1024"])
def test_transport_refuses_a_non_positive_or_missing_max_line_bytes(value):
    with pytest.raises(ValueError, match="max_line_bytes must be a positive integer"):
        StdioTransport(make_server(), max_line_bytes=value, stdin=io.BytesIO(), stdout=io.BytesIO())


@pytest.mark.feature("STDIO-02")
def test_max_line_bytes_defaults_to_4_mib():
    transport = StdioTransport(make_server(), stdin=io.BytesIO(), stdout=io.BytesIO())
    assert transport.max_line_bytes == DEFAULT_MAX_LINE_BYTES == 4 * 1024 * 1024
    assert DEFAULTS["STDIO_MAX_LINE_BYTES"] == 4 * 1024 * 1024


@pytest.mark.feature("STDIO-02")
def test_frame_reaching_the_limit_without_newline_is_reported_and_closes():
    reported: list[tuple[BaseException, dict]] = []
    server = make_server(configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append((exc, context))
    ))
    data = ping_line(1, width=63) + b"\n" + ping_line(2, width=64) + b"\n" + ping_line(3) + b"\n"
    transport, answers, stderr = serve_lines(server, data, max_line_bytes=64)
    assert answers == [{"jsonrpc": "2.0", "id": 1, "result": {}}]  # 63 bytes + newline fit
    assert len(reported) == 1
    exc, context = reported[0]
    assert isinstance(exc, FrameTooLargeError) and "stdio frame exceeds limit" in str(exc)
    assert "request" not in context and "server_context" not in context
    assert transport.error is exc
    assert "closing the connection: stdio frame exceeds limit of 64 bytes" in stderr


@pytest.mark.feature("STDIO-01")
def test_end_of_input_is_a_clean_close():
    transport, answers, stderr = serve_lines(make_server(), ping_line(1) + b"\n" + ping_line(2))
    assert [a["id"] for a in answers] == [1, 2]  # the last line needs no newline
    assert transport.error is None and stderr == ""


@pytest.mark.feature("STDIO-03")
def test_transport_serves_one_session_the_servers():
    server = make_server()
    initialize = client_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"roots": {}}, "clientInfo": CLIENT_INFO}})
    level = client_line({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                         "params": {"level": "error"}})
    transport, answers, _ = serve_lines(server, initialize + level)
    assert [a["id"] for a in answers] == [1, 2] and all("result" in a for a in answers)
    assert transport.session is server.session and server.transport is transport
    assert server.session.client_info == CLIENT_INFO
    assert server.client_capabilities == {"roots": {}}
    assert server.session.log_level == "error"


@pytest.mark.feature("STDIO-01")
async def test_requests_run_concurrently_on_the_transport():
    server = make_server()
    released = asyncio.Event()

    @server.tool
    async def wait_for_release() -> str:
        await released.wait()
        return "released"

    @server.tool
    async def release() -> str:
        released.set()
        return "done"

    call = {"jsonrpc": "2.0", "method": "tools/call"}
    data = client_line({**call, "id": "w", "params": {"name": "wait_for_release"}}) \
        + client_line({**call, "id": "r", "params": {"name": "release"}})
    stdout = io.BytesIO()
    transport = StdioTransport(server, stdin=io.BytesIO(data), stdout=stdout, stderr=io.StringIO())
    # Handled one after the other, the first call would wait forever for the second.
    await asyncio.wait_for(transport.serve(), timeout=PATIENCE)
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, "2025-11-25", "tools/call")
    assert [a["id"] for a in answers] == ["r", "w"]
    assert answers[1]["result"]["content"] == [{"type": "text", "text": "released"}]


@pytest.mark.feature("STDIO-06")
def test_send_notification_writes_and_flushes_the_frame():
    class Recording(io.BytesIO):
        def __init__(self) -> None:
            super().__init__()
            self.flushed: list[bytes] = []

        def flush(self) -> None:
            self.flushed.append(self.getvalue())

    stdout = Recording()
    server = make_server()
    transport = StdioTransport(server, stdin=io.BytesIO(), stdout=stdout)
    assert transport.send_notification(methods.NOTIFICATIONS_TOOLS_LIST_CHANGED) is True
    assert transport.send_notification(methods.NOTIFICATIONS_MESSAGE,
                                       {"level": "info", "data": "hi"}) is True
    assert server.notify_prompts_list_changed() is True  # the server's broadcasts go the same way
    lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for line in lines:
        check_server_message(line, "2025-11-25")
    assert lines == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}},
        {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"},
    ]
    assert stdout.flushed[-1] == stdout.getvalue()  # flushed after the last write


@pytest.mark.feature("STDIO-06", "CFG-02")
@pytest.mark.parametrize("failure", ["closed", "broken-pipe"])
def test_send_notification_returns_false_and_reports_a_failed_write(failure):
    class BrokenPipe(io.BytesIO):
        def write(self, data: Any) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    reported: list[tuple[BaseException, dict]] = []
    server = make_server(configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append((exc, context))
    ))
    stdout = BrokenPipe() if failure == "broken-pipe" else io.BytesIO()
    if failure == "closed":
        stdout.close()
    transport = StdioTransport(server, stdin=io.BytesIO(), stdout=stdout)
    assert transport.send_notification(methods.NOTIFICATIONS_TOOLS_LIST_CHANGED) is False
    assert len(reported) == 1
    exc, context = reported[0]
    assert isinstance(exc, OSError | ValueError)
    assert context == {"notification": methods.NOTIFICATIONS_TOOLS_LIST_CHANGED}
