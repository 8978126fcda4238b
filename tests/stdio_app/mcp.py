"""Tools of the test-only app, registered onto the default server by autodiscovery."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from typing import Annotated

import mcp_server
from mcp_protocol import methods
from mcp_protocol.cancellation import CancelledError
from mcp_server import (
    Elicit,
    ElicitationResult,
    InputRequiredResult,
    ListRoots,
    MCPError,
    Resolve,
    ServerContext,
)
from mcp_server.logging_levels import LEVELS
from project.demo.mcp import confirmation

# What ask_client(request="elicit") asks for.
COLOUR_SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string", "title": "Colour"}},
    "required": ["colour"],
}


@mcp_server.tool
async def sleepy(seconds: float) -> str:
    """Sleep without blocking the server: other requests are answered meanwhile."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@mcp_server.tool
def announce() -> str:
    """Send notifications/tools/list_changed through the stdio transport; says whether it was sent."""
    sent = mcp_server.get_server().transport.send_notification(methods.NOTIFICATIONS_TOOLS_LIST_CHANGED)
    return f"sent={sent}"


def _record(text: str) -> None:
    """A line on stderr, where tests read what a handler saw (stdout carries protocol only)."""
    print(f"stdio_app: {text}", file=sys.stderr, flush=True)


@mcp_server.tool
async def ask_client(request: str, server_context: ServerContext, timeout: float | None = None,
                     catch: bool = True) -> str:
    """Send one request to the client: "elicit", "sample", "roots" or "ping".

    Waits at most ``timeout`` seconds (default: the server's SERVER_TO_CLIENT_REQUEST_TIMEOUT).
    Returns ``{"result": ...}`` as JSON text; a failure is returned as ``{"error": {type, code,
    message}}`` when ``catch``, otherwise raised (so an MCPError answers the call with its code).
    Every outcome is also written to stderr.
    """
    label = f"ask_client({request}) of request {server_context.request_id!r}"
    try:
        if request == "elicit":
            result = await server_context.create_form_elicitation(
                "Which colour?", COLOUR_SCHEMA, timeout=timeout
            )
        elif request == "sample":
            result = await server_context.create_sampling_message(
                [{"role": "user", "content": {"type": "text", "text": "What is 2 + 2?"}}], 64,
                system_prompt="Answer briefly.", temperature=0.5, stop_sequences=["END"],
                metadata={"purpose": "test"}, include_context="thisServer",
                model_preferences={"hints": [{"name": "small"}], "speedPriority": 0.75},
                timeout=timeout,
            )
        elif request == "roots":
            result = await server_context.list_roots(timeout=timeout)
        elif request == "ping":
            result = await server_context.ping(timeout=timeout)
        else:
            raise ValueError(f"unknown request {request!r}")
    except (MCPError, CancelledError) as exc:
        _record(f"{label} -> {type(exc).__name__}: {exc}")
        if catch and isinstance(exc, MCPError):
            return json.dumps({"error": {"type": type(exc).__name__, "code": exc.code,
                                         "message": exc.message}})
        raise
    _record(f"{label} -> result")
    return json.dumps({"result": result})


@mcp_server.tool
async def log_every_level(server_context: ServerContext) -> str:
    """Log once per level to the session (``ServerContext``) and once server-wide (``Server``).

    Returns the levels each path reported as sent.
    """
    session: list[str] = []
    server_wide: list[str] = []
    for index, level in enumerate(LEVELS):
        if await server_context.notify_log_message({"index": index, "level": level}, level,
                                                   logger="stdio_app"):
            session.append(level)
        if mcp_server.get_server().notify_log_message(f"server-wide {level}", level):
            server_wide.append(level)
    return json.dumps({"session": session, "server": server_wide})


@mcp_server.tool
async def wait_for_cancel(server_context: ServerContext, limit: float = 60.0) -> str:
    """Poll ``cancelled()`` until the request is cancelled (at most ``limit`` s), then return normally.

    Says on stderr when it starts, so a test knows the call has reached its tool.
    """
    _record(f"wait_for_cancel of request {server_context.request_id!r} is waiting")
    deadline = time.monotonic() + limit
    while not server_context.cancelled() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if not server_context.cancelled():
        return "never cancelled"
    _record(f"wait_for_cancel of request {server_context.request_id!r} saw the cancellation: "
            f"{server_context.cancellation.reason}")
    return "stopped early"


@mcp_server.tool
async def progress_then_wait_for_cancel(server_context: ServerContext, limit: float = 60.0) -> str:
    """One progress notification (its client then knows the call runs), then ``wait_for_cancel``."""
    await server_context.report_progress(1, message="waiting for the cancellation")
    deadline = time.monotonic() + limit
    while not server_context.cancelled() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if not server_context.cancelled():
        return "never cancelled"
    _record(f"progress_then_wait_for_cancel of request {server_context.request_id!r} saw the "
            f"cancellation: {server_context.cancellation.reason}")
    return "stopped early"


@mcp_server.tool
async def define_extra_tool(name: str) -> str:
    """Register a tool named ``name`` on this process's server, then tell every session.

    Each process has its own in-memory registry: only the notification crosses processes.
    """
    server = mcp_server.get_server()
    server.define_tool(lambda args: name, name=name, description="Defined at run time")
    server.notify_tools_list_changed()
    return f"defined {name}"


@mcp_server.tool
async def touch_resource(uri: str) -> str:
    """``server.notify_resources_updated(uri)``: every subscribed session hears of it."""
    sent = mcp_server.get_server().notify_resources_updated(uri)
    return f"sent={sent}"


@mcp_server.tool(background=True)
def background_job(server_context: ServerContext, steps: int = 3, gate: str | None = None,
                   ask: bool = False, limit: float = 60.0, after_gate: int = 0) -> str:
    """A background call: ``steps`` progress notifications and a log message, then (with ``gate``)
    a wait until that file exists or the call is cancelled, then ``after_gate`` more progress
    notifications, then (with ``ask``) an elicitation.
    Returns, as JSON, the process it ran in, the colour the client gave and who sent the call."""
    return _background_job(server_context, steps, gate, ask, limit, after_gate)


@mcp_server.tool(background=True, annotations={"idempotent_hint": True})
def idempotent_job(server_context: ServerContext, steps: int = 3, gate: str | None = None,
                   limit: float = 60.0) -> str:
    """``background_job``, declared idempotent: run again when its worker dies mid-call."""
    return _background_job(server_context, steps, gate, False, limit, 0)


@mcp_server.tool(background=True)
def task_job(server_context: ServerContext, gate: str | None = None, ask: bool = False,
             marker: str | None = None, limit: float = 60.0) -> str | InputRequiredResult:
    """A background call for the Tasks extension's tests: (with ``ask``) asks a colour first with
    input_required, then (with ``gate``) waits until that file exists or the call is cancelled,
    writing ``marker`` when it sees the cancel. Returns, as JSON, its process and the colour."""
    colour = None
    if ask:
        answer = server_context.input_response("colour")
        if not isinstance(answer, dict):
            return InputRequiredResult({"colour": InputRequiredResult.form_elicitation(
                "Which colour?", COLOUR_SCHEMA)})
        colour = (answer.get("content") or {}).get("colour")
    if gate:
        deadline = time.monotonic() + limit
        while not os.path.exists(gate):
            if server_context.cancelled() and marker:
                with open(marker, "w") as seen:
                    seen.write(str(os.getpid()))
            server_context.raise_if_cancelled()
            if time.monotonic() > deadline:
                return json.dumps({"error": "the gate never opened"})
            server_context.cancellation.wait(0.02)
    return json.dumps({"pid": os.getpid(), "colour": colour})


def _background_job(server_context: ServerContext, steps: int, gate: str | None, ask: bool,
                    limit: float, after_gate: int) -> str:
    total = steps + after_gate
    for step in range(1, steps + 1):
        server_context.report_progress(step, total, f"step {step}")
    server_context.notify_log_message(f"background_job {server_context.request_id!r} ran", "info")
    if gate:
        deadline = time.monotonic() + limit
        while not os.path.exists(gate):
            server_context.raise_if_cancelled()
            if time.monotonic() > deadline:
                return json.dumps({"error": "the gate never opened"})
            server_context.cancellation.wait(0.02)
    for step in range(steps + 1, total + 1):
        server_context.report_progress(step, total, f"step {step}")
    server_context.raise_if_cancelled()
    colour = None
    if ask:
        answer = server_context.create_form_elicitation("Which colour?", COLOUR_SCHEMA)
        colour = (answer.get("content") or {}).get("colour")
    return json.dumps({"pid": os.getpid(), "colour": colour, "principal": _who(server_context)})


def _who(server_context: ServerContext) -> dict | None:
    """The request's principal as the tool sees it (None when nobody authenticated)."""
    principal = server_context.principal
    if principal is None:
        return None
    user = principal.user.get_username() if principal.user is not None else None
    return {"user": user, "scopes": sorted(principal.scopes), "method": principal.method}


# What background_confirm asks for.
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Go ahead"}},
    "required": ["confirm"],
}


def _place_of(topic: str) -> Elicit:
    return Elicit(f"Where is the {topic}?", {"type": "object", "properties": {
        "place": {"type": "string", "title": "Place"}}, "required": ["place"]})


def _room_of(place: Annotated[dict, Resolve(_place_of)]) -> Elicit:
    return Elicit(f"Which room in {place['place']}?", {"type": "object", "properties": {
        "room": {"type": "integer", "title": "Room"}}, "required": ["room"]})


@mcp_server.tool
def where_am_i(roots: Annotated[list, ListRoots()]) -> str:
    """A declared ask of the client's roots (which the MCP Inspector CLI can answer): their URIs."""
    return " ".join(root["uri"] for root in roots) or "no roots"


@mcp_server.tool(background=True)
def background_meeting(topic: str, place: Annotated[dict, Resolve(_place_of)],
                       room: Annotated[dict, Resolve(_room_of)]) -> str:
    """A background call with two declared asks, the second depending on the first answer.
    Returns, as JSON, the process it ran in and the answers."""
    return json.dumps({"pid": os.getpid(), "topic": topic, "place": place["place"], "room": room["room"]})


@mcp_server.tool(background=True)
def background_confirm_action(action: str,
                              answer: Annotated[ElicitationResult, Resolve(confirmation)]) -> str:
    """The demo's confirm_action (its very resolver), run as a background call: JSON of the process
    it ran in and the outcome."""
    return json.dumps({"pid": os.getpid(), "action": answer.action, "content": answer.content})


@mcp_server.tool(background=True)
def background_confirm(action: str, server_context: ServerContext) -> str | InputRequiredResult:
    """A background call that needs the user's confirmation: its first run returns input_required
    (a form, the action as request state); run again with the answer, it returns as JSON the
    process it ran in, the action and whether it was confirmed."""
    answer = server_context.input_response("confirm")
    if answer is None or server_context.request_state != action:
        return InputRequiredResult({"confirm": InputRequiredResult.form_elicitation(
            f"Really {action}?", CONFIRM_SCHEMA)}, request_state=action)
    confirmed = answer.get("action") == "accept" and bool((answer.get("content") or {}).get("confirm"))
    return json.dumps({"pid": os.getpid(), "action": action, "confirmed": confirmed})


@mcp_server.tool
def shape_registry(kind: str, name: str, enabled: bool = True, permission: str = "",
                   exposed_name: str = "") -> str:
    """Save an administrator's setting of a registered tool, prompt or resource through this
    process's ORM, as admin does: every process hears of it."""
    from mcp_server.models import PrimitiveSetting

    PrimitiveSetting.objects.update_or_create(
        server=mcp_server.get_server().name, kind=kind, name=name,
        defaults={"enabled": enabled, "permission": permission, "exposed_name": exposed_name})
    return "saved"


@mcp_server.tool
def define_skill(name: str, description: str, instructions: str, files: str = "{}") -> str:
    """Save a skill as admin does (its supporting files a JSON object of path -> text), through
    this process's ORM: every process hears of it."""
    from mcp_server.models import StoredSkill

    StoredSkill.objects.update_or_create(
        server=mcp_server.get_server().name, name=name,
        defaults={"description": description, "instructions": instructions, "files": json.loads(files)})
    return "saved"


@mcp_server.tool(background=True)
async def background_touch(uri: str, server_context: ServerContext) -> str:
    """An ``async def`` background tool: tells subscribers that ``uri`` changed, logs at two
    levels, and returns the process it ran in."""
    await server_context.notify_resources_updated(uri)
    await server_context.notify_log_message("touched (debug)", "debug")
    await server_context.notify_log_message("touched (warning)", "warning")
    return json.dumps({"pid": os.getpid()})


@mcp_server.tool
def log_line(text: str) -> str:
    """Write ``text`` to the Python logger ``stdio_app`` (a tool's own log record), from the
    worker thread a plain tool runs on."""
    logging.getLogger("stdio_app").info("log_line: %s", text)
    return "logged"


@mcp_server.tool(background=True)
def background_log_line(text: str) -> str:
    """``log_line`` as a background call: the record is written where the call runs."""
    logging.getLogger("stdio_app").info("background_log_line: %s", text)
    return json.dumps({"pid": os.getpid()})
