"""``python manage.py mcp_calls``: the background tool calls, newest first; ``--cancel ID``.

What runs where: each call's tool, state, progress, the worker running it (host:pid) and its
session. A cancel sets the call's flag, which the tool sees within half a second wherever it
runs; a call still queued is cancelled at once and its task revoked.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_server.background.launch import cancel_call
from mcp_server.models import ToolCall
from mcp_server.site import get_transport


class Command(BaseCommand):
    help = "List background tool calls (newest first), or cancel one with --cancel ID."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--state", choices=[choice for choice, _label in ToolCall.State.choices],
                            help="only calls in this state (e.g. running)")
        parser.add_argument("--limit", type=int, default=20, help="how many calls to show (default 20)")
        parser.add_argument("--cancel", metavar="ID", help="cancel the call with this id")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["cancel"]:
            self._cancel(options["cancel"])
            return
        calls = ToolCall.objects.order_by("-created_at")
        if options["state"]:
            calls = calls.filter(state=options["state"])
        rows = list(calls[:max(0, options["limit"])])
        if not rows:
            self.stdout.write("No background tool calls.")
            return
        for call in rows:
            self.stdout.write(_line(call))

    def _cancel(self, call_id: str) -> None:
        call = async_to_sync(cancel_call)(get_transport(), call_id)
        if call is None:
            raise CommandError(f"No background tool call {call_id!r}.")
        if call.state == ToolCall.State.CANCELLED and call.started_at is None:
            self.stdout.write(f"Cancelled {call_id} before it started.")
        elif call.finished:
            self.stdout.write(f"{call_id} had already ended: {call.state}.")
        else:
            self.stdout.write(f"Asked {call_id} to stop; it runs on {call.worker or '?'}.")


def _line(call: ToolCall) -> str:
    progress = ""
    if call.progress is not None:
        progress = f" {call.progress:g}" + (f"/{call.total:g}" if call.total is not None else "")
    where = f" on {call.worker}" if call.worker else ""
    session = f" session {call.session_id}" if call.session_id else ""
    return (f"{call.id}  {call.created_at:%Y-%m-%d %H:%M:%S}  {call.state:<9}  {call.tool}"
            f"{progress}{where}{session}")
