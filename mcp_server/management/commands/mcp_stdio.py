"""``python manage.py mcp_stdio``: serve the default MCP server on stdin and stdout."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand

from mcp_server.settings import mcp_settings
from mcp_server.site import get_server
from mcp_server.transports.stdio import StdioTransport


class Command(BaseCommand):
    help = "Serve the project's MCP server over stdio (JSON-RPC lines on stdin/stdout)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--max-line-bytes", type=int, default=None,
            help="longest accepted line in bytes (default: MCP_SERVER['STDIO_MAX_LINE_BYTES'])",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # stdout carries protocol messages only: every log line goes to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, force=True)
        max_line_bytes = options["max_line_bytes"] or mcp_settings.STDIO_MAX_LINE_BYTES
        transport = StdioTransport(get_server(), max_line_bytes=max_line_bytes)
        try:
            transport.open()
        except KeyboardInterrupt:
            sys.stderr.write("mcp stdio: interrupted\n")
            sys.stderr.flush()
            sys.exit(130)
