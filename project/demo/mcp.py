"""The demo's tools, prompt and resources: what a new project copies to get started."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import mcp_server
from mcp_server import (
    Elicit,
    ElicitationResult,
    InputRequiredResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptResult,
    Resolve,
    ServerContext,
    Tool,
    ToolResponse,
)
from mcp_server.elicitation import EnumSchema
from mcp_server.expose import QueryPolicy, admin_action_tools, model_query_tool, viewset_tools

from . import admin as _admin  # noqa: F401 - registers the Ticket admin, whose action is a tool
from .api import TicketViewSet
from .models import Ticket


@mcp_server.tool(annotations={"read_only_hint": True, "destructive_hint": False})
async def echo(message: str) -> str:
    """Echo a message back."""
    return message


@mcp_server.register
class Add(Tool):
    """A class-based tool with an output schema: the sum comes back as structured content."""

    description = "Add two numbers"
    input_schema = {
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    output_schema = {"properties": {"sum": {"type": "number"}}, "required": ["sum"]}
    annotations = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True}

    def call(self, a: float, b: float) -> ToolResponse:
        result = {"sum": a + b}
        self.output_schema.validate_result(result)
        return ToolResponse([{"type": "text", "text": json.dumps(result)}],
                            structured_content=result)


@mcp_server.tool
async def slow_count(count: int, server_context: ServerContext, delay: float = 0.5) -> str:
    """Count to `count`, one step every `delay` seconds, reporting progress; stops when cancelled."""
    for step in range(1, count + 1):
        server_context.raise_if_cancelled()
        await asyncio.sleep(delay)
        await server_context.report_progress(step, total=count, message=f"counted {step}")
    return f"Counted to {count}"


def confirmation(action: str) -> Elicit:
    """The form confirm_action asks for; it depends on the call's ``action``."""
    return Elicit(f"Do you want to {action}?", {
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean", "title": "Confirm", "default": False},
            "priority": EnumSchema.untitled_single_select(
                ["low", "normal", "high"], default="normal", title="Priority"
            ),
        },
        "required": ["confirm"],
    })


@mcp_server.tool
async def confirm_action(action: str, answer: Annotated[ElicitationResult, Resolve(confirmation)]) -> str:
    """Ask the user, through the client, to confirm an action before it is done.

    The body runs once the user answered: a 2026-07-28 client gets the form in an input_required
    result and calls again with the answer; an older session is asked live. ``ElicitationResult``
    lets a decline or cancel reach the body too."""
    if answer.accepted and answer.content.get("confirm"):
        return f"Done: {action} (priority {answer.content.get('priority', 'normal')})"
    return f"Not done: {action} ({answer.action})"


def meeting_kind(topic: str) -> Elicit:
    return Elicit(f"How should we meet about {topic}?", {
        "type": "object",
        "properties": {"kind": EnumSchema.titled_single_select(
            [("call", "A phone call"), ("visit", "A visit")], title="Meeting")},
        "required": ["kind"],
    })


def meeting_details(kind: Annotated[dict, Resolve(meeting_kind)]) -> Elicit:
    """The second form, which depends on the answer to the first."""
    if kind["kind"] == "call":
        return Elicit("Which number should we call?", {
            "type": "object", "properties": {"where": {"type": "string", "title": "Phone number"}},
            "required": ["where"]})
    return Elicit("Where should we meet?", {
        "type": "object", "properties": {"where": {"type": "string", "title": "Address"}},
        "required": ["where"]})


@mcp_server.tool
async def arrange_meeting(topic: str, kind: Annotated[dict, Resolve(meeting_kind)],
                          details: Annotated[dict, Resolve(meeting_details)]) -> str:
    """Arrange a meeting in two questions: a call or a visit, then the number or the address.

    A decline or cancel of either form ends the call with an error result saying so."""
    return f"Arranged a {kind['kind']} about {topic}: {details['where']}"


@mcp_server.tool
def delete_note(title: str, server_context: ServerContext) -> str | InputRequiredResult:
    """Delete a note after the user confirms: one tool for both protocol eras.

    The first run returns input_required with a confirmation form. A 2026-07-28 client answers it
    and calls again with the answer; on an older session the server asks the client itself and
    runs this again. Either way the second run reads the answer and acts.
    """
    answer = server_context.input_response("confirm")
    # The request state (sealed on the wire) says which note the confirmation was asked for.
    if answer is None or server_context.request_state != title:
        return InputRequiredResult({"confirm": InputRequiredResult.form_elicitation(
            f"Delete the note {title!r}?",
            {"type": "object",
             "properties": {"confirm": {"type": "boolean", "title": "Delete it", "default": False}},
             "required": ["confirm"]},
        )}, request_state=title)
    if answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm"):
        return f"Deleted the note {title!r}"
    return f"Kept the note {title!r} ({answer.get('action')})"


@mcp_server.tool(annotations={"read_only_hint": True})
async def diagnose(server_context: ServerContext) -> str:
    """Run the demo's checks, logging each finding at its level (debug to error).

    A handshake-era client sees those at or above the level it set with logging/setLevel; a
    2026-07-28 client those at or above the logLevel of this request's envelope, and none when
    it names no level.
    """
    findings = [("debug", "read the configuration"), ("info", "the database answers"),
                ("warning", "the cache is cold"), ("error", "the mail relay does not answer")]
    for level, finding in findings:
        await server_context.notify_log_message({"check": finding}, level=level, logger="diagnose")
    return f"{len(findings)} checks run: 1 error, 1 warning"


LANGUAGES = ["english", "french", "german", "italian", "spanish"]
STYLES = ["casual", "formal", "pirate"]


# A background call holds a worker for as long as it runs: its schema bounds how long (a client's
# to=10**18 would hold one until cancelled); arguments outside it are refused before any is queued.
MAX_COUNT = 600  # ten minutes


@mcp_server.tool(background=True, input_schema={
    "properties": {"to": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": 5}}})
def count_in_background(server_context: ServerContext, to: int = 5) -> str:
    """Count to ``to`` (at most 600), one step a second, with progress: a long call, run by a Celery
    worker when the project has a broker (CELERY_BROKER_URL), else in the web process. Cancel it
    any time.

    The same code serves every client: a 2026-07-28 client that declares the Tasks extension gets
    a task handle at once and polls it (its progress is the task's statusMessage); any other
    client keeps the request open and gets progress notifications on its stream."""
    for step in range(1, to + 1):
        if server_context.cancellation.wait(1.0):  # a second, or less if cancelled
            server_context.raise_if_cancelled()
        server_context.report_progress(step, to, f"{step} of {to}")
    return f"Counted to {to}"


@mcp_server.register
class Greeting(Prompt):
    title = "Greeting"
    description = "Write a greeting to someone in a language and style"
    arguments = [
        PromptArgument("name", description="Who to greet", required=True),
        PromptArgument("language", description="Language of the greeting"),
        PromptArgument("style", description="casual, formal or pirate"),
    ]

    def template(self, args: dict) -> PromptResult:
        language = args.get("language", "english")
        style = args.get("style", "casual")
        return PromptResult(
            description=f"A {style} greeting in {language}",
            messages=[PromptMessage(
                "user", f"Write a {style} greeting in {language} for {args['name']}."
            )],
        )


@mcp_server.get_server().completion_handler
def complete(params: dict) -> dict:
    """Suggest values for the greeting prompt's arguments."""
    ref, argument = params["ref"], params["argument"]
    choices = {"language": LANGUAGES, "style": STYLES}.get(argument["name"], [])
    if ref.get("type") != "ref/prompt" or ref.get("name") != "greeting":
        choices = []
    values = [c for c in choices if c.startswith(argument["value"].lower())]
    return {"completion": {"values": values, "hasMore": False}}


@mcp_server.resource("demo://readme", name="readme", title="About this server",
                     mime_type="text/plain")
def readme() -> str:
    return "This is the django-mcp-sdk demo server. Try the echo and add tools."


@mcp_server.resource_template("demo://users/{user_id}/profile", name="user_profile",
                              title="User profile", mime_type="application/json")
def user_profile(user_id: str) -> mcp_server.TextContents:
    profile = {"id": user_id, "name": f"User {user_id}"}
    return mcp_server.TextContents(uri=f"demo://users/{user_id}/profile", text=json.dumps(profile),
                                   mime_type="application/json")


# The tickets' REST API (project/demo/api.py) as tools: ticket_list, ticket_retrieve, ... each runs
# the ViewSet's own permissions, throttle, FilterSet and pagination, as the caller's Django user.
for ticket_tool in viewset_tools(TicketViewSet, prefix="ticket", actions=[
        "list", "retrieve", "create", "partial_update", "destroy", "close"]):
    mcp_server.register(ticket_tool)

# Django code as tools (docs/django_tools.md). The ticket admin's "close the selected tickets"
# action, for staff who may change tickets; and read-only queries of tickets, for users who may
# view them, within what the policy lists (the body is fenced as untrusted text in results).
for _action in admin_action_tools(Ticket, actions=["close_tickets"]):
    mcp_server.register(_action)

mcp_server.register(model_query_tool({Ticket: QueryPolicy(
    fields=["id", "title", "body", "status", "priority", "owner", "created_at"],
    filter_fields={"status": ["exact", "in"], "priority": ["exact", "lte", "gte"],
                   "title": ["icontains"], "owner": ["exact", "isnull"],
                   "created_at": ["gte", "lt"]},
    ordering=["priority", "created_at", "id"],
    aggregates=["count", "sum", "avg", "min", "max"],
    group_by=["status", "priority", "owner"],
)}, name="query_records"))
