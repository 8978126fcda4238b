"""A server built with the official Python SDK (``mcp`` on PyPI), for interoperability tests of
our client: tools (one with structured output), prompts, resources and a template, completion,
progress, log messages, an elicitation, sampling, roots and resource subscriptions.

    python -m tests.reference_server stdio
    python -m tests.reference_server http --port 8765        # Streamable HTTP on 127.0.0.1/mcp

Our client must work against it exactly as it works against our own server.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

server = MCPServer("reference-server", instructions="The official SDK's server, for interop tests.",
                   version="2.3.0")
# The capabilities it serves are deprecated at 2026-07-28 (SEP-2577): keep stderr readable.
warnings.simplefilter("ignore")
SUBSCRIBED: set[str] = set()
LOG_LEVELS: list[str] = []


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers (structured output)."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails: the result carries isError."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def nap(seconds: float) -> str:
    """Sleep (cancellable)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def count(to: int, ctx: Context) -> str:
    """Count to ``to``, reporting progress and logging each step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, total=to, message=f"step {step}")
        await ctx.info(f"counted {step}")
    return f"counted to {to}"


class Contact(BaseModel):
    name: str = Field(description="Your name")
    email: str = Field(default="nobody@example.com", description="Where to write")
    newsletter: bool = Field(default=False, description="Subscribe?")


@server.tool()
async def sign_up(ctx: Context) -> str:
    """Ask the user for contact details through elicitation."""
    answer = await ctx.elicit("Who are you?", Contact)
    if answer.action != "accept":
        return f"not signed up ({answer.action})"
    return f"signed up {answer.data.name} <{answer.data.email}> newsletter={answer.data.newsletter}"


class Approval(BaseModel):
    approve: bool = Field(description="Go ahead?")


def ask_approval(action: str) -> Elicit[Approval]:
    return Elicit(f"Approve {action}?", Approval)


@server.tool()
def approve(action: str, approval: Annotated[Approval, Resolve(ask_approval)]) -> str:
    """Ask the user to approve ``action``: the SDK's resolver asks live in the handshake era and
    with an input_required result (SEP-2322) in the 2026-07-28 lifecycle."""
    return f"{action}: {'approved' if approval.approve else 'refused'}"


@server.tool()
async def ask_llm(question: str, ctx: Context) -> str:
    """Ask the client's model (sampling/createMessage)."""
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
        max_tokens=50, related_request_id=ctx.request_id,
    )
    return f"the model said: {result.content.text}"


@server.tool()
async def client_roots(ctx: Context) -> str:
    """The client's roots (roots/list), one URI a line."""
    result = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in result.roots)


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell subscribers that ``uri`` changed, and that the tool list changed."""
    if uri in SUBSCRIBED:
        await ctx.session.send_resource_updated(uri)
    await ctx.session.send_tool_list_changed()
    return f"touched {uri}"


@server.prompt()
def greet(name: str, style: str = "plain") -> str:
    """Greet someone."""
    return f"Write a {style} greeting for {name}."


@server.resource("ref://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return "The reference server of the interop tests."


@server.resource("ref://items/{item_id}", mime_type="application/json")
def item(item_id: str) -> str:
    """One item, by id."""
    return f'{{"id": "{item_id}"}}'


@server.completion()
async def complete(ref, argument, context) -> types.Completion | None:
    if argument.name == "style":
        values = [s for s in ("plain", "pirate", "poetic") if s.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)
    return None


async def subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


async def set_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    LOG_LEVELS.append(params.level)
    return types.EmptyResult()


lowlevel = server._lowlevel_server
lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=8000)
    options = parser.parse_args()
    if options.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port)


if __name__ == "__main__":
    main()
