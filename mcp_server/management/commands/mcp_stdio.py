"""``python manage.py mcp_stdio``: serve the default MCP server on stdin and stdout."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_server.settings import mcp_settings
from mcp_server.site import get_server
from mcp_server.transports.stdio import StdioTransport

# Exit statuses, as documented in the help text below.
EXIT_CLOSED_BY_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class Command(BaseCommand):
    help = (
        "Serve the project's MCP server over stdio (JSON-RPC lines on stdin/stdout). "
        "Exit status: 0 when stdin reaches its end; 1 when the server closes the connection "
        "itself (a line longer than --max-line-bytes, unreadable stdin) or cannot start; "
        "130 on SIGINT (Ctrl-C)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--max-line-bytes", type=int, default=None,
            help="longest accepted line in bytes; a longer one closes the connection "
                 "(default: MCP_SERVER['STDIO_MAX_LINE_BYTES'])",
        )

    def check(self, *args: Any, **kwargs: Any) -> None:
        from mcp_server.checks import for_stdio

        with for_stdio():  # no warning that background calls run in the web process: here they must
            super().check(*args, **kwargs)

    def handle(self, *args: Any, **options: Any) -> None:
        # stdout carries protocol messages only: every log line goes to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, force=True)
        max_line_bytes = options["max_line_bytes"]
        if max_line_bytes is None:  # not `or`: an explicit 0 must be refused, not replaced
            max_line_bytes = mcp_settings.STDIO_MAX_LINE_BYTES
        try:
            transport = StdioTransport(
                get_server(), max_line_bytes=max_line_bytes,
                server_to_client_request_timeout=mcp_settings.SERVER_TO_CLIENT_REQUEST_TIMEOUT,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        _take_interrupts()
        try:
            transport.open()
        except KeyboardInterrupt:
            sys.stderr.write("mcp stdio: interrupted\n")
            sys.stderr.flush()
            # os._exit, not sys.exit: the reader thread is blocked inside stdin's buffered
            # readline, and a normal interpreter shutdown then aborts ("could not acquire lock
            # for <stdin> at interpreter shutdown") instead of exiting with 130.
            os._exit(EXIT_INTERRUPTED)
        if transport.error is not None:
            sys.exit(EXIT_CLOSED_BY_ERROR)


def _take_interrupts() -> None:
    """SIGINT stops the server (exit 130) even when the process that started it had SIGINT ignored
    or blocked, which a child inherits: a non-interactive shell's ``&``, or a client or process
    manager that shields itself from Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        return  # called in process by a test or a project's code: its signals are its own
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
