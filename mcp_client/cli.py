"""``python -m mcp_client SERVER [COMMAND ...]``: look at and use an MCP server from a shell.

SERVER is a URL (Streamable HTTP) or a command line that starts a stdio server, in quotes:

    python -m mcp_client http://127.0.0.1:8000/mcp
    python -m mcp_client "python manage.py mcp_stdio" call add a=2 b=3
    python -m mcp_client "python manage.py mcp_stdio" read demo://readme
    python -m mcp_client "python manage.py mcp_stdio" prompt greeting name=Ada

Without a command it shows the server, the protocol era it negotiated, and lists its tools, prompts
and resources. ``--mode`` picks how to connect: ``auto`` probes ``server/discover`` and falls back to
the ``initialize`` handshake, ``modern`` insists on the 2026-07-28 lifecycle, ``legacy`` goes
straight to the handshake; without it the client's default applies. A tool's
progress is drawn as a bar on stderr; ``--log-level info`` shows the server's log messages there.
``--oauth`` authorizes with OAuth 2.1 in a browser and keeps the tokens for the next command
(``mcp_client.cli_oauth``).
When the server asks the user something (elicitation) the questions are asked on the terminal;
with no terminal the request is declined. When a stdio server fails a call or exits, the last lines
it wrote on its stderr (its traceback, say) follow the error; a 401 suggests ``--oauth``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from typing import Any, TextIO

from mcp_protocol.log_levels import LEVELS

from .client import Client
from .errors import ClientError, HTTPStatusError, ServerError, TransportError, UnauthorizedError
from .transports.http import HTTPTransport
from .transports.stdio import StdioTransport
from .types import Page

BAR_WIDTH = 30
CELL_WIDTH = 60
MODES = ["auto", "modern", "legacy"]
LOG_LEVELS = list(LEVELS)


class ToolFailed(ClientError):
    """The tool's result says it failed (``isError``): its content is shown, then this."""


def is_url(server: str) -> bool:
    return server.startswith(("http://", "https://"))


def transport_for(server: str, read_timeout: float | None, oauth: Any = None) -> Any:
    if is_url(server):
        return HTTPTransport(server, timeout=read_timeout or 30.0, oauth=oauth)
    words = shlex.split(server)
    if not words:
        raise SystemExit("SERVER is empty: give a URL or a command line")
    return StdioTransport(words[0], words[1:], read_timeout=read_timeout)


def parse_arguments(pairs: list[str], input_schema: dict | None = None, *,
                    strings: bool = False) -> dict[str, Any]:
    """``key=value`` pairs; a value is JSON (``3``, ``true``, ``[1,2]``) unless the tool's
    schema says the property is a string, or it is not valid JSON (or ``strings``: prompts)."""
    properties = (input_schema or {}).get("properties", {})
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"arguments are key=value, not {pair!r}")
        if strings or properties.get(key, {}).get("type") == "string":
            arguments[key] = value
            continue
        try:
            arguments[key] = json.loads(value)
        except ValueError:
            arguments[key] = value
    return arguments


def table(rows: list[list[str]], headers: list[str], out: TextIO) -> None:
    if not rows:
        out.write("(none)\n")
        return
    cells = [headers, *[[_cell(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
        if index == 0:
            out.write("  ".join("-" * width for width in widths) + "\n")


def _cell(value: Any) -> str:
    """One line, at most CELL_WIDTH characters (an ellipsis says when it was cut)."""
    text = " ".join(str(value).split())
    return text if len(text) <= CELL_WIDTH else text[:CELL_WIDTH - 1] + "…"


class ProgressBar:
    def __init__(self, out: TextIO):
        self.out = out
        self.shown = False

    def __call__(self, params: dict) -> None:
        progress, total = params.get("progress", 0), params.get("total")
        message = params.get("message") or ""
        if total:
            filled = int(BAR_WIDTH * min(1.0, progress / total))
            bar = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {progress:g}/{total:g}"
        else:
            bar = f"[{progress:g}]"
        self.out.write(f"\r{bar} {message}"[:120].ljust(80))
        self.out.flush()
        self.shown = True

    def task_status(self, task: Any) -> None:
        """A task's status and message (the Tasks extension): its progress."""
        self.out.write(f"\r[task {task.status}] {task.status_message or ''}"[:120].ljust(80))
        self.out.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.out.write("\n")


def era(client: Client) -> str:
    """Which lifecycle the connection speaks, in words."""
    return "modern era" if client.is_modern else "handshake era"


def show_overview(client: Client, out: TextIO) -> None:
    info = client.server_implementation or {}
    out.write(f"{info.get('name', '?')} {info.get('version', '')} (protocol {client.protocol_version}, "
              f"{era(client)})\n")
    capabilities = client.server_capabilities
    if "tools" in capabilities:
        tools = _section("Tools", client.list_tools, client.tools, out)
        table([[t.name, t.description or ""] for t in tools], ["name", "description"], out)
    if "prompts" in capabilities:
        prompts = _section("Prompts", client.list_prompts, client.prompts, out)
        table([[p.name, ", ".join(a.get("name", "") for a in p.arguments), p.description or ""]
               for p in prompts], ["name", "arguments", "description"], out)
    if "resources" in capabilities:
        resources = _section("Resources", client.list_resources, client.resources, out)
        table([[r.uri, r.name, r.mime_type or ""] for r in resources], ["uri", "name", "type"], out)
        page = client.list_resource_templates()
        templates = page.items if page.next_cursor is None else client.resource_templates()
        if templates:
            out.write(f"\nResource templates{_hints(page)}\n")
            table([[t.uri_template, t.name] for t in templates], ["template", "name"], out)


def _section(title: str, first_page: Callable[[], Page], every_item: Callable[[], list], out: TextIO) -> list:
    """Write the title of a list with the cache hints of its first page; the list's items (the
    first page, or every page when there are more)."""
    page = first_page()
    out.write(f"\n{title}{_hints(page)}\n")
    return page.items if page.next_cursor is None else every_item()


def _hints(page: Page) -> str:
    """The server's cache hints for a list (CACHE-06), as the overview shows them; empty without."""
    hints = [f"ttl {page.ttl_ms} ms" if page.ttl_ms is not None else "",
             page.cache_scope or ""]
    shown = ", ".join(hint for hint in hints if hint)
    return f" (cache: {shown})" if shown else ""


class TerminalElicitation:
    """Answers ``elicitation/create`` by asking each field of the form on the terminal.

    An empty answer keeps the field's default (or leaves it out); ``ask`` is ``input`` unless a
    test gives another. Interrupting (Ctrl-D, Ctrl-C) cancels.
    """

    def __init__(self, out: TextIO, ask: Callable[[str], str] = input):
        self.out = out
        self.ask = ask

    def __call__(self, params: dict) -> dict:
        if params.get("mode") == "url":
            self.out.write(f"\n{params.get('message', '')}\nOpen: {params.get('url')}\n")
            return {"action": "accept" if self._yes("Opened it?") else "decline"}
        self.out.write(f"\nThe server asks: {params.get('message', '')}\n")
        schema = params.get("requestedSchema") or {}
        required = set(schema.get("required") or [])
        content: dict[str, Any] = {}
        try:
            for name, field in (schema.get("properties") or {}).items():
                value = self._field(name, field, name in required)
                if value is not None:
                    content[name] = value
            if not self._yes("Send this answer?"):
                return {"action": "decline"}
        except (EOFError, KeyboardInterrupt):
            self.out.write("\n")
            return {"action": "cancel"}
        return {"action": "accept", "content": content}

    def _yes(self, question: str) -> bool:
        return self.ask(f"{question} [Y/n] ").strip().lower() in ("", "y", "yes")

    def _field(self, name: str, field: dict, required: bool) -> Any:
        label = field.get("title") or name
        choices = field.get("enum") or [option.get("const") for option in field.get("oneOf") or []]
        default = field.get("default")
        hint = f" ({'/'.join(map(str, choices))})" if choices else ""
        hint += f" [{json.dumps(default)}]" if default is not None else (" *" if required else "")
        while True:
            text = self.ask(f"  {label}{hint}: ").strip()
            if not text:
                if default is not None or not required:
                    return default
                continue
            kind = field.get("type")
            try:
                if kind == "boolean":
                    return text.lower() in ("y", "yes", "true", "1")
                if kind in ("integer", "number"):
                    return int(text) if kind == "integer" else float(text)
            except ValueError:
                self.out.write(f"  {label} must be a {kind}\n")
                continue
            if choices and text not in map(str, choices):
                self.out.write(f"  choose one of {', '.join(map(str, choices))}\n")
                continue
            return text


def show_log(out: TextIO) -> Callable[[dict], None]:
    def log(params: dict) -> None:
        data = params.get("data")
        text = data if isinstance(data, str) else json.dumps(data)
        logger = f" {params['logger']}" if params.get("logger") else ""
        out.write(f"[{params.get('level')}{logger}] {text}\n")

    return log


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
         ask: Callable[[str], str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_client", description=__doc__.split("\n\n")[0])
    parser.add_argument("server", help="a URL, or a command line in quotes")
    parser.add_argument("command", nargs="?", default="list",
                        choices=["list", "tools", "prompts", "resources", "call", "read", "prompt"])
    parser.add_argument("target", nargs="?", help="tool, resource URI or prompt name")
    parser.add_argument("arguments", nargs="*", help="key=value arguments")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a silent server")
    parser.add_argument("--mode", choices=MODES,
                        help="auto: the 2026-07-28 lifecycle when the server speaks it, else the "
                             "initialize handshake; modern: only the 2026-07-28 lifecycle; legacy: "
                             "only the handshake (default: the client's own default)")
    parser.add_argument("--log-level", choices=LOG_LEVELS,
                        help="show the server's log messages from this level up")
    parser.add_argument("--oauth", action="store_true",
                        help="authorize with OAuth 2.1 in a browser; the tokens are kept (mode 0600) in "
                             "$XDG_CONFIG_HOME/django-mcp-sdk/oauth/ for the next command")
    parser.add_argument("--no-browser", action="store_true",
                        help="with --oauth: print the authorization URL without opening a browser")
    options = parser.parse_intermixed_args(argv)  # URL --oauth call add a=1: flags anywhere
    if options.oauth and not is_url(options.server):
        err.write("error: --oauth needs the server's http(s) URL\n")
        return 2
    if options.no_browser and not options.oauth:
        err.write("error: --no-browser goes with --oauth\n")
        return 2
    listener = None
    try:
        oauth = None
        if options.oauth:
            from .cli_oauth import person_provider  # needs httpx, as HTTP does

            oauth, listener = person_provider(options.server, open_browser=not options.no_browser, err=err)
        client = Client(transport_for(options.server, options.timeout, oauth))
    except (ModuleNotFoundError, ClientError) as exc:  # HTTP without httpx; an insecure URL
        err.write(f"error: {exc}\n")
        if listener is not None:
            listener.close()
        return 1
    if ask is None and sys.stdin.isatty():
        ask = input
    if ask is not None:
        client.on_elicitation(TerminalElicitation(err, ask))
    else:
        client.on_elicitation(lambda params: {"action": "decline"})
    if options.log_level:
        client.on_log_message(show_log(err))
    server_failed = False
    try:
        client.connect(mode=options.mode)
        if options.log_level and "logging" in client.server_capabilities:
            client.set_logging_level(options.log_level)
        return run(client, options, out, err)
    except ClientError as exc:
        err.write(f"error: {exc}\n")
        if isinstance(exc, UnauthorizedError) and not options.oauth:
            err.write(f"hint: the server wants authorization; run the command again with --oauth "
                      f"(python -m mcp_client {shlex.quote(options.server)} --oauth ...)\n")
        # What the server said about it is on its stderr (a traceback, "no such table").
        server_failed = isinstance(exc, ToolFailed | ServerError) or (
            isinstance(exc, TransportError) and not isinstance(exc, HTTPStatusError))
        return 1
    finally:
        try:
            client.shutdown()  # a stdio server's stderr is then read to its end
        except ClientError as exc:
            err.write(f"warning: {exc}\n")
        if listener is not None:
            listener.close()
        if server_failed:
            show_stderr_tail(client.transport, err)


def show_stderr_tail(transport: Any, err: TextIO) -> None:
    """The last lines a stdio server wrote on its stderr, indented under a heading."""
    lines = getattr(transport, "stderr_lines", None)
    if not lines:
        return
    err.write(f"the server's stderr (last {len(lines)} lines):\n")
    for line in lines:
        err.write(f"  | {line}\n")


def run(client: Client, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    command = options.command
    if command == "tools":
        table([[t.name, t.description or ""] for t in client.tools()], ["name", "description"], out)
        return 0
    if command == "prompts":
        table([[p.name, p.description or ""] for p in client.prompts()], ["name", "description"], out)
        return 0
    if command == "resources":
        table([[r.uri, r.name] for r in client.resources()], ["uri", "name"], out)
        return 0
    if command == "list":
        show_overview(client, out)
        return 0
    if not options.target:
        err.write(f"error: '{command}' needs a target\n")
        return 2
    if command == "call":
        schema = next((t.input_schema for t in client.tools() if t.name == options.target), None)
        if schema is None:
            err.write(f"error: the server has no tool {options.target!r}\n")
            return 1
        bar = ProgressBar(err)
        try:
            result = client.call_tool(options.target, parse_arguments(options.arguments, schema),
                                      on_progress=bar, on_task_status=bar.task_status)
        finally:
            bar.done()
        for block in result.content:
            out.write((block.get("text") if block.get("type") == "text" else json.dumps(block)) + "\n")
        if result.structured_content is not None:
            out.write(json.dumps(result.structured_content, indent=2) + "\n")
        if result.is_error:
            raise ToolFailed(f"the tool {options.target} failed")
        return 0
    if command == "read":
        for contents in client.read_resource(options.target):
            out.write(contents.get("text", f"<{len(contents.get('blob', ''))} base64 characters>") + "\n")
        return 0
    result = client.get_prompt(options.target, parse_arguments(options.arguments, strings=True))
    for message in result["messages"]:
        content = message.get("content", {})
        text = content.get("text") if content.get("type") == "text" else json.dumps(content)
        out.write(f"[{message.get('role')}] {text}\n")
    return 0
