"""``python -m mcp_client``: the command line for people, against our server over stdio and the
official SDK's server over Streamable HTTP.

Most tests call ``mcp_client.cli.main`` in process (stdout and stderr captured, the terminal's
answers scripted); one runs the real ``python -m mcp_client`` entry point.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from mcp_client import cli
from mcp_client.cli import TerminalElicitation, main, parse_arguments

from .client_support import (
    CheckedHTTPTransport,
    CheckedStdioTransport,
    FakeHTTPServer,
    every_message_checked,
)
from .harness import REPO
from .http_harness import database_env

OUR_SERVER = f"{sys.executable} {REPO / 'manage.py'} mcp_stdio"


@pytest.fixture(autouse=True)
def _stdio_app(monkeypatch):
    """The children the CLI spawns serve the demo plus tests/stdio_app."""
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "tests.stdio_settings")


@pytest.fixture(autouse=True)
def _every_client_message_checked(monkeypatch):
    """The CLI's transports check every message in both directions (tests/client_support.py)."""
    monkeypatch.setattr(cli, "StdioTransport", CheckedStdioTransport)
    monkeypatch.setattr(cli, "HTTPTransport", CheckedHTTPTransport)
    yield from every_message_checked()


def run(*argv: str, ask=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err, ask=ask)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.feature("CACHE-06")
def test_without_a_command_it_shows_the_server_and_lists_everything():
    code, out, err = run(OUR_SERVER)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "django-mcp-demo 0.1.0 (protocol 2026-07-28, modern era)"
    # Each list's title carries the server's cache hints for it (CACHE-06).
    hints = " (cache: ttl 0 ms, private)"
    assert {"Prompts" + hints, "Resources" + hints, "Resource templates" + hints} <= set(lines)
    tools = lines[lines.index("Tools" + hints) + 1:lines.index("Prompts" + hints)]
    assert tools[0].split() == ["name", "description"] and set(tools[1]) <= {"-", " "}
    assert ["echo", "Echo a message back."] in rows("\n".join(tools))
    assert any(line.startswith("slow_count ") and line.endswith("…") for line in tools)  # cut at 60
    greeting = ["greeting", "name, language, style", "Write a greeting to someone in a language and style"]
    assert greeting in rows(out)
    assert ["demo://readme", "readme", "text/plain"] in rows(out)
    assert ["demo://users/{user_id}/profile", "user_profile"] in rows(out)


@pytest.mark.feature("CACHE-06")
def test_a_handshake_era_overview_shows_no_cache_hints():
    code, out, err = run("--mode", "legacy", OUR_SERVER)
    assert code == 0, err
    lines = out.splitlines()
    assert "handshake era" in lines[0] and {"Tools", "Prompts", "Resources"} <= set(lines)
    assert "cache:" not in out


def rows(out: str) -> list[list[str]]:
    """A table's rows, each as the cells its columns hold (at least two spaces between columns)."""
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in out.splitlines()]


@pytest.mark.parametrize(("command", "expected"), [
    ("tools", ["add", "Add two numbers"]),
    ("prompts", ["greeting", "Write a greeting to someone in a language and style"]),
    ("resources", ["demo://readme", "readme"]),
])
def test_one_list(command, expected):
    code, out, _ = run(OUR_SERVER, command)
    assert code == 0 and expected in rows(out)


def test_call_a_tool_with_key_value_arguments():
    code, out, err = run(OUR_SERVER, "call", "add", "a=2", "b=3.5")
    assert code == 0, err
    text, structured = out.split("\n", 1)
    assert json.loads(text) == {"sum": 5.5} and json.loads(structured) == {"sum": 5.5}
    # A property the schema types as a string keeps the text as it is.
    code, out, _ = run(OUR_SERVER, "call", "echo", "message=[1, 2]")
    assert code == 0 and out == "[1, 2]\n"


def test_a_progress_bar_follows_the_progress_notifications():
    code, out, err = run(OUR_SERVER, "call", "slow_count", "count=3", "delay=0.01")
    assert code == 0 and out == "Counted to 3\n"
    frames = err.split("\r")[1:]
    assert [frame.split()[1] for frame in frames] == ["1/3", "2/3", "3/3"]
    assert frames[0].startswith("[" + "#" * 10 + "." * 20 + "] 1/3 counted 1")
    assert frames[-1].startswith("[" + "#" * 30 + "] 3/3 counted 3") and err.endswith("\n")


def test_log_messages_at_the_chosen_level():
    code, out, err = run(OUR_SERVER, "call", "log_every_level", "--log-level", "critical")
    assert code == 0
    shown = [line for line in err.splitlines() if line.startswith("[") and "stdio_app" in line]
    assert [line.split()[0] for line in shown] == ["[critical", "[alert", "[emergency"]
    assert json.loads(out)["session"] == ["critical", "alert", "emergency"]


def test_read_a_resource_and_get_a_prompt():
    code, out, _ = run(OUR_SERVER, "read", "demo://users/42/profile")
    assert code == 0 and json.loads(out) == {"id": "42", "name": "User 42"}
    code, out, _ = run(OUR_SERVER, "prompt", "greeting", "name=Ada", "style=true")
    assert code == 0 and out == "[user] Write a true greeting in english for Ada.\n"


def test_the_user_answers_an_elicitation_on_the_terminal():
    answers = iter(["y", "loud", "high", ""])  # confirm, a wrong choice, a right one, then send
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return next(answers)

    # confirm_action asks live: a request of the handshake era.
    code, out, err = run(OUR_SERVER, "--mode", "legacy", "call", "confirm_action", "action=ship", ask=ask)
    assert code == 0, err
    assert out == "Done: ship (priority high)\n"
    assert "The server asks: Do you want to ship?" in err
    assert asked == ["  Confirm [false]: ", "  Priority (low/normal/high) [\"normal\"]: ",
                     "  Priority (low/normal/high) [\"normal\"]: ", "Send this answer? [Y/n] "]
    assert "choose one of low, normal, high" in err


def test_the_same_terminal_answers_an_input_required_round_of_the_modern_era():
    answers = iter(["y", ""])
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return next(answers)

    code, out, err = run(OUR_SERVER, "call", "delete_note", "title=groceries", ask=ask)
    assert code == 0, err
    assert out == "Deleted the note 'groceries'\n"
    assert "The server asks: Delete the note 'groceries'?" in err
    assert asked == ["  Delete it [false]: ", "Send this answer? [Y/n] "]


def test_without_a_terminal_an_elicitation_is_declined():
    code, out, _ = run(OUR_SERVER, "--mode", "legacy", "call", "confirm_action", "action=ship")
    assert code == 0 and out == "Not done: ship (decline)\n"
    code, out, _ = run(OUR_SERVER, "call", "delete_note", "title=groceries")
    assert code == 0 and out == "Kept the note 'groceries' (decline)\n"


def test_terminal_elicitation_keeps_defaults_and_cancels_on_end_of_input():
    schema = {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "default": 3}, "ok": {"type": "boolean"}}}
    answers = iter(["", "Ada", "x", "", "no", "n"])
    out = io.StringIO()
    elicit = TerminalElicitation(out, lambda question: next(answers))
    # A required field is asked again; "x" is no integer; an empty answer keeps the default.
    assert elicit({"message": "Who?", "requestedSchema": schema}) == {"action": "decline"}
    assert "age must be a integer" in out.getvalue()

    def ended(question: str) -> str:
        raise EOFError

    assert TerminalElicitation(io.StringIO(), ended)({"requestedSchema": schema}) == {"action": "cancel"}
    answers = iter(["Ada", "", "yes", "y"])
    assert TerminalElicitation(io.StringIO(), lambda q: next(answers))({"requestedSchema": schema}) == {
        "action": "accept", "content": {"name": "Ada", "age": 3, "ok": True}}


def test_errors_are_one_line_and_a_non_zero_status():
    code, _, err = run(OUR_SERVER, "call", "no_such_tool")
    assert code == 1 and err == "error: the server has no tool 'no_such_tool'\n"
    code, _, err = run(OUR_SERVER, "read", "demo://nothing")
    assert code == 1 and err.startswith("error: ") and "(code -32602)" in err
    code, _, err = run(OUR_SERVER, "call")
    assert code == 2 and err == "error: 'call' needs a target\n"
    code, _, err = run("/nonexistent/server --flag")
    assert code == 1 and err.startswith("error: cannot start the server '/nonexistent/server'")
    code, _, err = run("http://127.0.0.1:9/mcp", "tools", "--timeout", "2")
    assert code == 1 and err.startswith("error: POST http://127.0.0.1:9/mcp failed")
    with pytest.raises(SystemExit, match="key=value"):
        run(OUR_SERVER, "call", "echo", "message")


@pytest.mark.feature("CLI-04")
@pytest.mark.parametrize(("mode", "era"), [("modern", "2026-07-28, modern era"),
                                           ("legacy", "2025-11-25, handshake era")])
def test_the_mode_picks_the_era_and_the_overview_says_which(mode, era, monkeypatch):
    connects: list[dict] = []
    real_connect = cli.Client.connect

    def connect(self, **options):
        connects.append(options)
        return real_connect(self, **options)

    monkeypatch.setattr(cli.Client, "connect", connect)
    code, out, err = run(OUR_SERVER, "--mode", mode)
    assert code == 0, err
    assert out.splitlines()[0] == f"django-mcp-demo 0.1.0 (protocol {era})"
    assert ["echo", "Echo a message back."] in rows(out)
    assert connects == [{"mode": mode}]
    # A command other than the overview speaks the chosen era too.
    code, out, err = run(OUR_SERVER, "call", "add", "a=2", "b=3", "--mode", mode)
    assert code == 0 and json.loads(out.split("\n", 1)[0]) == {"sum": 5}, err


def test_the_official_server_in_either_era(reference_http):
    for mode, era in (("modern", "2026-07-28, modern era"), ("legacy", "2025-11-25, handshake era")):
        code, out, err = run(reference_http.url, "--mode", mode)
        assert code == 0, err
        assert out.splitlines()[0] == f"reference-server 2.3.0 (protocol {era})"
        assert ["greet", "name, style", "Greet someone."] in rows(out)


def legacy_only(reply) -> object:
    """A handshake-era server: no server/discover (-32601 by default), an empty tool list."""
    if reply.seen.rpc_method == "tools/list":
        return reply.result({"tools": []})
    return NotImplemented


def test_a_mode_the_server_cannot_speak_is_one_line_of_error():
    with FakeHTTPServer(legacy_only) as legacy:
        code, out, err = run(legacy.url, "--mode", "modern")
        assert code == 1 and out == ""
        assert err.startswith("error: the server does not speak the 2026-07-28 lifecycle")
        assert err.count("\n") == 1
        # Auto mode falls back to the handshake this server speaks.
        before = len(legacy.requests)
        code, out, err = run(legacy.url, "--mode", "auto")
        assert code == 0, err
        assert out.splitlines()[0] == "fake 1.0.0 (protocol 2025-11-25, handshake era)"
        sent = [seen.rpc_method for seen in legacy.requests[before:]]
        assert sent[:2] == ["server/discover", "initialize"]
    with pytest.raises(SystemExit):
        run(OUR_SERVER, "--mode", "sideways")


def test_key_value_parsing():
    schema = {"properties": {"name": {"type": "string"}, "count": {"type": "integer"}}}
    assert parse_arguments(["name=007", "count=7", "tags=[\"a\"]", "note=not json", "flag=true"], schema) == {
        "name": "007", "count": 7, "tags": ["a"], "note": "not json", "flag": True}
    assert parse_arguments(["a=1", "b=x=y"], strings=True) == {"a": "1", "b": "x=y"}


def test_a_url_reaches_the_official_server_over_http(reference_http):
    code, out, err = run(reference_http.url)
    assert code == 0, err
    assert out.splitlines()[0] == "reference-server 2.3.0 (protocol 2026-07-28, modern era)"
    assert ["ref://readme", "readme", "text/plain"] in rows(out)
    assert ["greet", "name, style", "Greet someone."] in rows(out)
    code, out, err = run(reference_http.url, "call", "count", "to=2", "--log-level", "info")
    assert code == 0 and out.startswith("counted to 2\n")
    assert "[info] counted 1" in err and "2/2 step 2" in err


def test_the_entry_point(tmp_path):
    """The real ``python -m mcp_client``, its server behind tests/stdio_tap (which checks every line)."""
    report = tmp_path / "tap-report"
    tapped = f"env MCP_TAP_REPORT={report} {sys.executable} -m tests.stdio_tap"
    finished = subprocess.run([sys.executable, "-m", "mcp_client", tapped, "call", "add", "a=1", "b=1"],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout.split("\n", 1)[0]) == {"sum": 2}
    summary = report.read_text()
    assert "VIOLATION" not in summary and ", 0 violations; mcp_stdio exited with 0" in summary
    finished = subprocess.run([sys.executable, "-m", "mcp_client", "--help"], capture_output=True, text=True,
                              timeout=60)
    assert finished.returncode == 0 and "a URL, or a command line in quotes" in finished.stdout


@pytest.mark.feature("TASK-13")
@pytest.mark.django_db(transaction=True)
def test_a_task_shows_its_status_while_it_runs(monkeypatch):
    for name, value in database_env().items():  # the server records the call in the test database
        monkeypatch.setenv(name, value)
    code, out, err = run(OUR_SERVER, "call", "count_in_background", "to=2")
    assert code == 0, err
    assert out == "Counted to 2\n"
    assert "[task working]" in err and "[task completed]" in err


def test_a_failed_tool_shows_the_tail_of_the_servers_stderr(tmp_path, monkeypatch):
    """A forgotten ``migrate``: the client learns only that the tool failed; the server's stderr
    says why, and the command shows its last lines."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'never-migrated.sqlite3'}")
    code, out, err = run(OUR_SERVER, "call", "shape_registry", "kind=tool", "name=x")
    assert code == 1 and out == "Internal error occurred\n"
    first, heading, *tail = err.splitlines()
    assert first == "error: the tool shape_registry failed"
    assert heading.startswith("the server's stderr (last ") and heading.endswith(" lines):")
    assert 0 < len(tail) <= 20 and all(line.startswith("  | ") for line in tail)
    assert any("no such table" in line for line in tail), err


def test_a_server_that_exits_shows_its_last_lines_and_no_more(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text("import sys\nfor i in range(100):\n    print(f'line {i}', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    code, out, err = run(f"{sys.executable} {script}", "tools")
    assert code == 1 and out == ""
    first, heading, *tail = err.splitlines()
    assert first == "error: the server process exited with status 3; its last words: line 99"
    assert heading == "the server's stderr (last 20 lines):"
    assert tail == [f"  | line {i}" for i in range(80, 100)]


def test_the_stderr_of_a_server_that_answers_is_not_shown():
    code, _, err = run(OUR_SERVER, "call", "no_such_tool")
    assert code == 1 and err == "error: the server has no tool 'no_such_tool'\n"


def unauthorized(reply) -> None:
    reply.status(401, b'{"error": "invalid_token"}', content_type="application/json",
                 headers={"www-authenticate": 'Bearer resource_metadata="http://127.0.0.1:9/x"'})


def test_a_401_suggests_oauth():
    with FakeHTTPServer(unauthorized) as protected:
        code, out, err = run(protected.url, "tools")
    assert code == 1 and out == ""
    first, hint = err.splitlines()
    assert first.startswith("error: HTTP 401")
    assert hint == (f"hint: the server wants authorization; run the command again with --oauth "
                    f"(python -m mcp_client {protected.url} --oauth ...)")
