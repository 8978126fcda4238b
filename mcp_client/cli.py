"""``python -m mcp_client SERVER [COMMAND ...]``: look at and use an MCP server from a shell.

SERVER is a URL (Streamable HTTP) or a command line that starts a stdio server, in quotes:

    python -m mcp_client http://127.0.0.1:8000/mcp
    python -m mcp_client "python manage.py mcp_stdio" call add a=2 b=3
    python -m mcp_client "python manage.py mcp_stdio" read demo://readme
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any, TextIO

from .client import Client
from .errors import ClientError
from .transports.http import HTTPTransport
from .transports.stdio import StdioTransport

BAR_WIDTH = 30


def transport_for(server: str, read_timeout: float | None) -> Any:
    if server.startswith(("http://", "https://")):
        return HTTPTransport(server)
    words = shlex.split(server)
    if not words:
        raise SystemExit("SERVER is empty: give a URL or a command line")
    return StdioTransport(words[0], words[1:], read_timeout=read_timeout)


def parse_arguments(pairs: list[str], input_schema: dict | None = None) -> dict[str, Any]:
    """``key=value`` pairs; a value is JSON (``3``, ``true``, ``[1,2]``) unless the tool's
    schema says the property is a string, or it is not valid JSON."""
    properties = (input_schema or {}).get("properties", {})
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"arguments are key=value, not {pair!r}")
        if properties.get(key, {}).get("type") == "string":
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
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [min(60, max(len(row[i]) for row in cells)) for i in range(len(headers))]
    for index, row in enumerate(cells):
        out.write("  ".join(cell[:60].ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
        if index == 0:
            out.write("  ".join("-" * width for width in widths) + "\n")


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

    def done(self) -> None:
        if self.shown:
            self.out.write("\n")


def show_overview(client: Client, out: TextIO) -> None:
    info = client.server_implementation or {}
    out.write(f"{info.get('name', '?')} {info.get('version', '')} (protocol {client.protocol_version})\n")
    capabilities = client.server_capabilities
    if "tools" in capabilities:
        out.write("\nTools\n")
        table([[t.name, t.description or ""] for t in client.tools()], ["name", "description"], out)
    if "prompts" in capabilities:
        out.write("\nPrompts\n")
        table([[p.name, ", ".join(a.get("name", "") for a in p.arguments), p.description or ""]
               for p in client.prompts()], ["name", "arguments", "description"], out)
    if "resources" in capabilities:
        out.write("\nResources\n")
        table([[r.uri, r.name, r.mime_type or ""] for r in client.resources()], ["uri", "name", "type"], out)
        templates = client.resource_templates()
        if templates:
            out.write("\nResource templates\n")
            table([[t.uri_template, t.name] for t in templates], ["template", "name"], out)


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_client", description=__doc__.split("\n\n")[0])
    parser.add_argument("server", help="a URL, or a command line in quotes")
    parser.add_argument("command", nargs="?", default="list",
                        choices=["list", "tools", "prompts", "resources", "call", "read", "prompt"])
    parser.add_argument("target", nargs="?", help="tool, resource URI or prompt name")
    parser.add_argument("arguments", nargs="*", help="key=value arguments")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a silent server")
    options = parser.parse_args(argv)
    client = Client(transport_for(options.server, options.timeout))
    try:
        client.connect()
        return run(client, options, out, err)
    except ClientError as exc:
        err.write(f"error: {exc}\n")
        return 1
    finally:
        client.shutdown()


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
        bar = ProgressBar(err)
        result = client.call_tool(options.target, parse_arguments(options.arguments, schema), on_progress=bar)
        bar.done()
        for block in result.content:
            out.write((block.get("text") if block.get("type") == "text" else json.dumps(block)) + "\n")
        if result.structured_content is not None:
            out.write(json.dumps(result.structured_content, indent=2) + "\n")
        return 1 if result.is_error else 0
    if command == "read":
        for contents in client.read_resource(options.target):
            out.write(contents.get("text", f"<{len(contents.get('blob', ''))} base64 characters>") + "\n")
        return 0
    result = client.get_prompt(options.target, parse_arguments(options.arguments))
    for message in result["messages"]:
        content = message.get("content", {})
        text = content.get("text") if content.get("type") == "text" else json.dumps(content)
        out.write(f"[{message.get('role')}] {text}\n")
    return 0
