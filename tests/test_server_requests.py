"""Requests from the server to the client while a request runs: roots, sampling, elicitation and
ping, their capability checks, the client's errors, timeouts and the ids they carry.

For each failure both sides are checked: what the handler sees (it may catch it), and what the
client gets when the handler lets it propagate.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from typing import Any

import pytest

from mcp_protocol import MCPError, RequestTimeoutError
from mcp_server import (
    Configuration,
    Server,
    ServerContext,
    ServerSession,
    URLElicitationRequiredError,
    ValidationError,
)
from mcp_server.elicitation import EnumSchema
from mcp_server.errors import ClientCapabilityError
from mcp_server.invoke import call_user_code
from mcp_server.outgoing import PendingRequests
from mcp_server.session import DEFAULT_REQUEST_TIMEOUT

from .peer import WAIT, Peer, connected

REVISIONS = ["2025-11-25", "2024-11-05"]
# Elicitation arrived with 2025-06-18; its URL mode and the complete notification with 2025-11-25.
ELICITATION_REVISIONS = ["2025-11-25", "2025-06-18"]
ROOTS = {"roots": [{"uri": "file:///work/project", "name": "project"}, {"uri": "file:///tmp"}]}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m-1",
           "stopReason": "endTurn"}
HELLO = [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}]
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string", "title": "Name"}},
             "required": ["name"]}


class Caught:
    """What a handler saw when it caught the exception of a server-to-client request."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []


def asking_server(caught: Caught | None = None) -> Server:
    """Tools that ask the client something; ``catch=True`` returns the error as text instead."""
    server = Server("asks")

    def outcome(value: Any) -> dict:
        return {"content": [{"type": "text", "text": "ok"}], "structuredContent": {"value": value}}

    async def run(ctx: ServerContext, ask: str, args: dict, catch: bool) -> Any:
        calls = {
            "roots": lambda: ctx.list_roots(**args),
            "sampling": lambda: ctx.create_sampling_message(**args),
            "form": lambda: ctx.create_form_elicitation(**args),
            "url": lambda: ctx.create_url_elicitation(**args),
            "ping": lambda: ctx.ping(**args),
        }
        try:
            return outcome(await calls[ask]())
        except Exception as exc:
            if not catch or caught is None:
                raise
            caught.errors.append(exc)
            return outcome(f"caught {type(exc).__name__}")

    @server.define_tool(name="ask", input_schema={"type": "object"})
    async def ask(arguments: dict, server_context: ServerContext) -> Any:
        return await run(server_context, arguments["ask"], arguments.get("args", {}),
                         arguments.get("catch", False))

    @server.define_tool(name="ask_blocking", input_schema={"type": "object"})
    def ask_blocking(arguments: dict, server_context: ServerContext) -> Any:
        calls = {
            "roots": server_context.list_roots,
            "sampling": server_context.create_sampling_message,
            "form": server_context.create_form_elicitation,
            "url": server_context.create_url_elicitation,
            "ping": server_context.ping,
        }
        try:
            return outcome(calls[arguments["ask"]](**arguments.get("args", {})))
        except Exception as exc:
            if not arguments.get("catch") or caught is None:
                raise
            caught.errors.append(exc)
            return outcome(f"caught {type(exc).__name__}")

    return server


def ask_args(ask: str, args: dict | None = None, catch: bool = False) -> dict:
    return {"ask": ask, "args": args or {}, "catch": catch}


def value_of(response: dict) -> Any:
    assert "result" in response, response
    return response["result"]["structuredContent"]["value"]


# ROOT-01 ------------------------------------------------------------------------------------------

@pytest.mark.feature("ROOT-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_list_roots_asks_the_client_on_behalf_of_the_request(revision, tool):
    peer = await connected(asking_server(), revision, {"roots": {"listChanged": True}})
    peer.answer("roots/list", ROOTS)
    response = await peer.call_tool(tool, ask_args("roots"), request_id=31)
    assert value_of(response) == ROOTS
    [sent] = peer.sent
    assert sent.message == {"jsonrpc": "2.0", "id": sent.message["id"], "method": "roots/list"}
    assert sent.related_request_id == 31


# ROOT-02 ------------------------------------------------------------------------------------------

@pytest.mark.feature("ROOT-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_list_roots_needs_the_roots_capability(revision, tool):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"sampling": {}})
    # The handler sees ClientCapabilityError, and may carry on...
    assert value_of(await peer.call_tool(tool, ask_args("roots", catch=True))) == \
        "caught ClientCapabilityError"
    [error] = caught.errors
    assert isinstance(error, ClientCapabilityError) and isinstance(error, MCPError)
    assert error.method == "roots/list" and error.capability == "roots"
    # ...or let it propagate: the client gets a JSON-RPC error naming the missing capability.
    response = await peer.call_tool(tool, ask_args("roots"))
    assert response["error"]["code"] == -32603
    assert "roots/list" in response["error"]["message"] and "'roots'" in response["error"]["message"]
    assert peer.sent == [], "nothing was asked of the client"


# ROOT-03 ------------------------------------------------------------------------------------------

@pytest.mark.feature("ROOT-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_client_error_to_list_roots_raises_with_its_code_and_message(revision, tool):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"roots": {}})
    peer.answer("roots/list", error={"code": -32000, "message": "roots unavailable",
                                     "data": {"why": "locked"}})
    await peer.call_tool(tool, ask_args("roots", catch=True))
    [error] = caught.errors
    assert type(error) is MCPError
    assert (error.code, error.message, error.data) == (-32000, "roots unavailable", {"why": "locked"})
    # Uncaught, the client's error answers the tool call as it was given.
    response = await peer.call_tool(tool, ask_args("roots"))
    assert response["error"] == {"code": -32000, "message": "roots unavailable",
                                 "data": {"why": "locked"}}


# ROOT-04 ------------------------------------------------------------------------------------------

@pytest.mark.feature("ROOT-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("style", ["async", "sync"])
async def test_roots_list_changed_calls_the_registered_handler(revision, style):
    server = Server("roots")
    calls: list[tuple[dict, bool]] = []
    loop_thread = threading.get_ident()

    if style == "async":
        @server.roots_list_changed_handler
        async def changed(params: dict) -> None:
            calls.append((params, threading.get_ident() == loop_thread))
    else:
        @server.roots_list_changed_handler
        def changed(params: dict) -> None:
            calls.append((params, threading.get_ident() == loop_thread))

    peer = await connected(server, revision, {"roots": {"listChanged": True}})
    await peer.notify("notifications/roots/list_changed")
    await peer.notify("notifications/roots/list_changed", {"_meta": {"k": "v"}})
    assert calls == [({}, style == "async"), ({"_meta": {"k": "v"}}, style == "async")]
    assert peer.sent == []


@pytest.mark.feature("ROOT-04", "CFG-02")
async def test_a_failing_roots_list_changed_handler_is_reported():
    reports: list[tuple[BaseException, dict]] = []
    server = Server("roots", configuration=Configuration(
        exception_reporter=lambda exc, context: reports.append((exc, context))))

    @server.roots_list_changed_handler
    def changed(params: dict) -> None:
        raise RuntimeError("could not rescan")

    peer = await connected(server, capabilities={"roots": {"listChanged": True}})
    await peer.notify("notifications/roots/list_changed")  # still no reply
    [(exc, context)] = reports
    assert isinstance(exc, RuntimeError)
    assert context == {"notification": "notifications/roots/list_changed"}


# ROOT-06 ------------------------------------------------------------------------------------------

@pytest.mark.feature("ROOT-06")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_session_level_list_roots_works_with_a_deprecation_warning(revision):
    peer = await connected(Server("roots"), revision, {"roots": {}})
    peer.answer("roots/list", ROOTS)
    with pytest.warns(DeprecationWarning, match="SEP-2260"):
        roots = await asyncio.wait_for(peer.session.list_roots(), WAIT)
    assert roots == ROOTS
    [sent] = peer.sent
    assert sent.method == "roots/list" and sent.related_request_id is None


@pytest.mark.feature("ROOT-06", "ROOT-02")
async def test_session_level_list_roots_also_needs_the_capability():
    peer = await connected(Server("roots"), capabilities={})
    with pytest.warns(DeprecationWarning), pytest.raises(ClientCapabilityError, match="roots"):
        await asyncio.wait_for(peer.session.list_roots(), WAIT)
    assert peer.sent == []


# SMP-01 -------------------------------------------------------------------------------------------

@pytest.mark.feature("SMP-01")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_sampling_sends_camel_case_params(revision, tool):
    peer = await connected(asking_server(), revision, {"sampling": {}})
    peer.answer("sampling/createMessage", SAMPLED)
    args = {
        "messages": HELLO, "max_tokens": 100, "system_prompt": "Be brief.",
        "model_preferences": {"hints": [{"name": "claude"}], "speedPriority": 0.5},
        "include_context": "none", "temperature": 0.2, "stop_sequences": ["\n\n"],
        "metadata": {"trace": "t-1"},
    }
    assert value_of(await peer.call_tool(tool, ask_args("sampling", args))) == SAMPLED
    [sent] = peer.sent
    assert sent.method == "sampling/createMessage"
    assert sent.params == {
        "messages": HELLO, "maxTokens": 100, "systemPrompt": "Be brief.",
        "modelPreferences": {"hints": [{"name": "claude"}], "speedPriority": 0.5},
        "includeContext": "none", "temperature": 0.2, "stopSequences": ["\n\n"],
        "metadata": {"trace": "t-1"},
    }


@pytest.mark.feature("SMP-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_sampling_omits_what_is_none(revision):
    peer = await connected(asking_server(), revision, {"sampling": {}})
    peer.answer("sampling/createMessage", SAMPLED)
    args = {"messages": HELLO, "max_tokens": 5, "system_prompt": None, "temperature": None}
    await peer.call_tool("ask", ask_args("sampling", args))
    assert peer.sent[0].params == {"messages": HELLO, "maxTokens": 5}


@pytest.mark.feature("SMP-01", "SMP-02")
async def test_sampling_with_tools_when_the_client_declares_sampling_tools():
    peer = await connected(asking_server(), "2025-11-25", {"sampling": {"tools": {}}})
    peer.answer("sampling/createMessage", SAMPLED)
    weather = {"name": "weather", "inputSchema": {"type": "object",
                                                   "properties": {"city": {"type": "string"}}}}
    args = {"messages": HELLO, "max_tokens": 50, "tools": [weather], "tool_choice": {"mode": "auto"}}
    assert value_of(await peer.call_tool("ask", ask_args("sampling", args))) == SAMPLED
    assert peer.sent[0].params == {"messages": HELLO, "maxTokens": 50, "tools": [weather],
                                   "toolChoice": {"mode": "auto"}}


# SMP-02 -------------------------------------------------------------------------------------------

@pytest.mark.feature("SMP-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_sampling_needs_the_sampling_capability(revision, tool):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"roots": {}})
    args = {"messages": HELLO, "max_tokens": 5}
    assert value_of(await peer.call_tool(tool, ask_args("sampling", args, catch=True))) == \
        "caught ClientCapabilityError"
    assert caught.errors[0].capability == "sampling"
    response = await peer.call_tool(tool, ask_args("sampling", args))
    assert response["error"]["code"] == -32603
    assert "'sampling'" in response["error"]["message"]
    assert peer.sent == []


@pytest.mark.feature("SMP-02")
@pytest.mark.parametrize("extra", [{"tools": []}, {"tool_choice": {"mode": "none"}}])
async def test_sampling_tools_need_sampling_tools(extra):
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25", {"sampling": {}})
    args = {"messages": HELLO, "max_tokens": 5, **extra}
    await peer.call_tool("ask", ask_args("sampling", args, catch=True))
    [error] = caught.errors
    assert isinstance(error, ClientCapabilityError) and error.capability == "sampling.tools"
    response = await peer.call_tool("ask", ask_args("sampling", args))
    assert "'sampling.tools'" in response["error"]["message"]
    assert peer.sent == []


@pytest.mark.feature("SMP-02")
async def test_no_sampling_tools_before_2025_11_25_whatever_the_client_declares():
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-06-18", {"sampling": {"tools": {}}})
    args = {"messages": HELLO, "max_tokens": 5, "tools": []}
    await peer.call_tool("ask", ask_args("sampling", args, catch=True))
    [error] = caught.errors
    assert error.capability == "sampling.tools" and error.protocol_version == "2025-06-18"
    assert peer.sent == []


# SMP-03 -------------------------------------------------------------------------------------------

@pytest.mark.feature("SMP-03")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_each_sampling_request_is_tied_to_the_request_that_caused_it(revision):
    peer = await connected(asking_server(), revision, {"sampling": {}})
    args = {"messages": HELLO, "max_tokens": 5}
    first = peer.start_tool("ask", ask_args("sampling", args), request_id="a")
    second = peer.start_tool("ask_blocking", ask_args("sampling", args), request_id="b")
    await peer.wait_for(lambda s: len(peer.requests("sampling/createMessage")) == 2)
    by_parent = {s.related_request_id: s.message["id"] for s in peer.requests()}
    assert set(by_parent) == {"a", "b"}
    # Answered out of order: each answer reaches the handler that asked.
    await peer.respond(by_parent["b"], {**SAMPLED, "model": "for-b"})
    await peer.respond(by_parent["a"], {**SAMPLED, "model": "for-a"})
    assert value_of(await asyncio.wait_for(first, WAIT))["model"] == "for-a"
    assert value_of(await asyncio.wait_for(second, WAIT))["model"] == "for-b"


# SMP-04 -------------------------------------------------------------------------------------------

@pytest.mark.feature("SMP-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
@pytest.mark.parametrize("error", [{"code": -1, "message": "User rejected sampling request"},
                                   {"code": -32603, "message": "model unavailable"}])
async def test_client_error_or_rejection_raises_in_the_handler(revision, tool, error):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"sampling": {}})
    peer.answer("sampling/createMessage", error=error)
    args = {"messages": HELLO, "max_tokens": 5}
    await peer.call_tool(tool, ask_args("sampling", args, catch=True))
    [seen] = caught.errors
    assert isinstance(seen, MCPError) and (seen.code, seen.message) == (error["code"], error["message"])
    response = await peer.call_tool(tool, ask_args("sampling", args))
    assert response["error"] == error


# SMP-07 -------------------------------------------------------------------------------------------

@pytest.mark.feature("SMP-07")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("include_context", ["thisServer", "allServers"])
async def test_soft_deprecated_include_context_is_passed_through(revision, include_context):
    peer = await connected(asking_server(), revision, {"sampling": {}})
    peer.answer("sampling/createMessage", SAMPLED)
    args = {"messages": HELLO, "max_tokens": 5, "include_context": include_context}
    await peer.call_tool("ask", ask_args("sampling", args))
    assert peer.sent[0].params["includeContext"] == include_context


@pytest.mark.feature("SMP-07")
def test_include_context_deprecation_is_documented():
    doc = inspect.getdoc(ServerContext.create_sampling_message)
    assert "include_context" in doc and "deprecated" in doc


# ELI-01 -------------------------------------------------------------------------------------------

@pytest.mark.feature("ELI-01")
@pytest.mark.parametrize("revision", ELICITATION_REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
@pytest.mark.parametrize("answer", [{"action": "accept", "content": {"name": "Ada"}},
                                    {"action": "decline"}, {"action": "cancel"}])
async def test_form_elicitation(revision, tool, answer):
    peer = await connected(asking_server(), revision, {"elicitation": {}})
    peer.answer("elicitation/create", answer)
    args = {"message": "Who are you?", "requested_schema": NAME_FORM}
    assert value_of(await peer.call_tool(tool, ask_args("form", args), request_id=8)) == answer
    [sent] = peer.sent
    expected = {"message": "Who are you?", "requestedSchema": NAME_FORM}
    if revision >= "2025-11-25":
        expected = {"mode": "form", **expected}  # modes arrived with 2025-11-25
    assert sent.method == "elicitation/create" and sent.params == expected
    assert sent.related_request_id == 8


@pytest.mark.feature("ELI-01", "ELI-07")
async def test_form_elicitation_with_every_enum_builder():
    peer = await connected(asking_server(), "2025-11-25", {"elicitation": {"form": {}}})
    peer.answer("elicitation/create", {"action": "accept", "content": {
        "size": "m", "color": "#f00", "tags": ["a"], "toppings": ["ham"], "tier": "gold"}})
    schema = {"type": "object", "properties": {
        "size": EnumSchema.untitled_single_select(["s", "m", "l"], default="m"),
        "color": EnumSchema.titled_single_select([("#f00", "Red"), ("#0f0", "Green")], title="Color"),
        "tags": EnumSchema.untitled_multi_select(["a", "b"], default=["a"]),
        "toppings": EnumSchema.titled_multi_select([{"const": "ham", "title": "Ham"}],
                                                   description="Pick any"),
        "tier": EnumSchema.legacy_titled(["gold", "silver"], ["Gold", "Silver"]),
    }}
    answer = await peer.call_tool("ask", ask_args("form", {"message": "Order", "requested_schema": schema}))
    assert value_of(answer)["action"] == "accept"
    assert peer.sent[0].params["requestedSchema"] == schema  # and it passed the wire schema


# ELI-02 -------------------------------------------------------------------------------------------

@pytest.mark.feature("ELI-02")
@pytest.mark.parametrize("revision", ELICITATION_REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_form_elicitation_needs_the_elicitation_capability(revision, tool):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"sampling": {}})
    args = {"message": "Who?", "requested_schema": NAME_FORM}
    await peer.call_tool(tool, ask_args("form", args, catch=True))
    [error] = caught.errors
    assert isinstance(error, ClientCapabilityError) and error.capability == "elicitation.form"
    response = await peer.call_tool(tool, ask_args("form", args))
    assert response["error"]["code"] == -32603 and "elicitation" in response["error"]["message"]
    assert peer.sent == []


@pytest.mark.feature("ELI-02")
async def test_url_only_client_cannot_be_sent_a_form():
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25", {"elicitation": {"url": {}}})
    await peer.call_tool("ask", ask_args("form", {"message": "Who?", "requested_schema": NAME_FORM},
                                         catch=True))
    assert caught.errors[0].capability == "elicitation.form"
    assert peer.sent == []


@pytest.mark.feature("ELI-02")
async def test_no_elicitation_before_2025_06_18_whatever_the_client_declares():
    """A 2024-11-05 session has no ``elicitation/create`` on its wire."""
    caught = Caught()
    peer = await connected(asking_server(caught), "2024-11-05", {"elicitation": {}})
    args = {"message": "Who?", "requested_schema": NAME_FORM}
    await peer.call_tool("ask", ask_args("form", args, catch=True))
    [error] = caught.errors
    assert isinstance(error, ClientCapabilityError) and "2024-11-05" in str(error)
    assert peer.sent == []


# ELI-03 -------------------------------------------------------------------------------------------

URL_ARGS = {"message": "Sign in to continue", "url": "https://auth.example.com/start?x=1",
            "elicitation_id": "el-1"}


@pytest.mark.feature("ELI-03")
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_url_elicitation(tool):
    peer = await connected(asking_server(), "2025-11-25", {"elicitation": {"url": {}}})
    peer.answer("elicitation/create", {"action": "accept"})
    assert value_of(await peer.call_tool(tool, ask_args("url", URL_ARGS), request_id=4)) == \
        {"action": "accept"}
    [sent] = peer.sent
    assert sent.params == {"mode": "url", "message": "Sign in to continue",
                           "url": "https://auth.example.com/start?x=1", "elicitationId": "el-1"}
    assert sent.related_request_id == 4


@pytest.mark.feature("ELI-03")
@pytest.mark.parametrize("capabilities", [{"elicitation": {}}, {"elicitation": {"form": {}}}, {}])
async def test_url_elicitation_needs_elicitation_url(capabilities):
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25", capabilities)
    await peer.call_tool("ask", ask_args("url", URL_ARGS, catch=True))
    assert caught.errors[0].capability == "elicitation.url"
    response = await peer.call_tool("ask", ask_args("url", URL_ARGS))
    assert response["error"]["code"] == -32603 and "elicitation.url" in response["error"]["message"]
    assert peer.sent == []


@pytest.mark.feature("ELI-03")
async def test_no_url_elicitation_before_2025_11_25():
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-06-18", {"elicitation": {"url": {}}})
    await peer.call_tool("ask", ask_args("url", URL_ARGS, catch=True))
    [error] = caught.errors
    assert isinstance(error, ClientCapabilityError) and "2025-06-18" in str(error)
    assert peer.sent == []


# ELI-05 -------------------------------------------------------------------------------------------

@pytest.mark.feature("ELI-05")
@pytest.mark.parametrize("style", ["async", "sync"])
async def test_url_elicitation_required_error(style):
    server = Server("eli")
    needed = [{"mode": "url", "elicitationId": "el-9", "url": "https://auth.example.com/connect",
               "message": "Connect your account"}]

    if style == "async":
        @server.tool
        async def connect() -> str:
            raise URLElicitationRequiredError(needed)
    else:
        @server.tool
        def connect() -> str:
            raise URLElicitationRequiredError(needed, message="Authorization needed")

    peer = await connected(server, "2025-11-25", {"elicitation": {"url": {}}})
    response = await peer.call_tool("connect")
    assert response["error"]["code"] == -32042
    assert response["error"]["data"] == {"elicitations": needed}
    if style == "sync":
        assert response["error"]["message"] == "Authorization needed"


@pytest.mark.feature("ELI-05")
@pytest.mark.parametrize("bad", [
    {"mode": "form", "elicitationId": "e", "url": "https://x.example", "message": "m"},
    {"mode": "url", "url": "https://x.example", "message": "m"},
    {"mode": "url", "elicitationId": "e", "message": "m"},
])
def test_url_elicitation_required_error_checks_its_entries(bad):
    with pytest.raises(ValueError):
        URLElicitationRequiredError([bad])


# ELI-10 / CAN-10: timeouts --------------------------------------------------------------------------

@pytest.mark.feature("CAN-10")
def test_default_server_to_client_timeout_is_600_seconds():
    assert DEFAULT_REQUEST_TIMEOUT == 600
    assert ServerSession(Server("t")).request_timeout == 600
    assert Peer(Server("t")).session.request_timeout == 600


@pytest.mark.feature("CAN-10")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_timeout_tells_the_client_and_raises_in_the_handler(revision, tool):
    caught = Caught()
    peer = await connected(asking_server(caught), revision, {"roots": {}}, request_timeout=0.1)
    assert value_of(await peer.call_tool(tool, ask_args("roots", catch=True), request_id=1)) == \
        "caught RequestTimeoutError"
    [error] = caught.errors
    assert isinstance(error, RequestTimeoutError) and error.code == -32001
    [asked, told] = peer.sent
    assert asked.method == "roots/list"
    assert told.message == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": asked.message["id"], "reason": "timed out"}}
    assert told.related_request_id == 1
    assert len(peer.session.pending) == 0
    # An answer that comes after the deadline is ignored.
    await peer.respond(asked.message["id"], ROOTS)


@pytest.mark.feature("CAN-10")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_uncaught_timeout_answers_the_request_with_32001(revision, tool):
    peer = await connected(asking_server(), revision, {"sampling": {}}, request_timeout=0.1)
    response = await peer.call_tool(tool, ask_args("sampling", {"messages": HELLO, "max_tokens": 5}))
    assert response["error"]["code"] == -32001
    assert "sampling/createMessage" in response["error"]["message"]
    assert [s.method for s in peer.sent] == ["sampling/createMessage", "notifications/cancelled"]


@pytest.mark.feature("ELI-10", "CAN-10")
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_per_call_timeout_overrides_the_sessions(tool):
    caught = Caught()
    # A long session default: the call's own short timeout wins...
    peer = await connected(asking_server(caught), "2025-11-25", {"elicitation": {}}, request_timeout=600)
    args = {"message": "Approve?", "requested_schema": NAME_FORM, "timeout": 0.1}
    started = asyncio.get_running_loop().time()
    await peer.call_tool(tool, ask_args("form", args, catch=True))  # within WAIT, far below 600 s
    assert asyncio.get_running_loop().time() - started >= 0.1  # not before its time
    assert isinstance(caught.errors[0], RequestTimeoutError)
    assert "0.1" in str(caught.errors[0])

    # ...and a short session default gives way to a long per-call one (a human approval).
    peer = await connected(asking_server(caught), "2025-11-25", {"elicitation": {}}, request_timeout=0.05)
    peer.answer("elicitation/create", {"action": "accept", "content": {"name": "Ada"}}, delay=0.3)
    args = {**args, "timeout": 3600}
    assert value_of(await peer.call_tool(tool, ask_args("form", args))) == \
        {"action": "accept", "content": {"name": "Ada"}}
    assert [s.method for s in peer.sent] == ["elicitation/create"]


@pytest.mark.feature("CAN-10")
async def test_ping_and_roots_take_a_per_call_timeout_too():
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25", {"roots": {}})
    for ask in ("ping", "roots"):
        await peer.call_tool("ask", ask_args(ask, {"timeout": 0.05}, catch=True))
    assert [type(e) for e in caught.errors] == [RequestTimeoutError, RequestTimeoutError]
    assert [s.method for s in peer.sent] == ["ping", "notifications/cancelled",
                                             "roots/list", "notifications/cancelled"]


# PING-01 / PING-02 --------------------------------------------------------------------------------

@pytest.mark.feature("PING-01")
@pytest.mark.parametrize("revision", REVISIONS)
async def test_ping_needs_no_setup(revision):
    peer = Peer(Server("p", capabilities={}), revision)  # not even initialized
    assert await peer.request("ping", request_id=1) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    await peer.initialize()
    assert await peer.request("ping", {}, request_id="p-2") == {"jsonrpc": "2.0", "id": "p-2", "result": {}}


@pytest.mark.feature("PING-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("tool", ["ask", "ask_blocking"])
async def test_ping_the_client(revision, tool):
    peer = await connected(asking_server(), revision)  # needs no client capability
    peer.answer("ping", {})
    assert value_of(await peer.call_tool(tool, ask_args("ping"), request_id=3)) == {}
    [sent] = peer.sent
    assert sent.message == {"jsonrpc": "2.0", "id": sent.message["id"], "method": "ping"}
    assert sent.related_request_id is None, "ping is exempt from SEP-2260 association"


@pytest.mark.feature("PING-02")
@pytest.mark.parametrize("result", ["pong", None, [1]])
async def test_ping_answer_that_is_not_an_object_raises_validation_error(result):
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25")
    peer.answer("ping", result, check=False)  # a broken client
    await peer.call_tool("ask", ask_args("ping", catch=True))
    [error] = caught.errors
    assert isinstance(error, ValidationError)
    # Uncaught, it is an unexpected failure of the tool, reported without details.
    response = await peer.call_tool("ask", ask_args("ping"))
    assert response["result"]["isError"] is True
    assert response["result"]["content"] == [{"type": "text", "text": "Internal error occurred"}]


@pytest.mark.feature("PING-02")
async def test_ping_client_error_propagates():
    caught = Caught()
    peer = await connected(asking_server(caught), "2025-11-25")
    peer.answer("ping", error={"code": -32601, "message": "Method not found"})
    await peer.call_tool("ask_blocking", ask_args("ping", catch=True))
    assert isinstance(caught.errors[0], MCPError) and caught.errors[0].code == -32601
    response = await peer.call_tool("ask", ask_args("ping"))
    assert response["error"] == {"code": -32601, "message": "Method not found"}


# CORE-20 ------------------------------------------------------------------------------------------

@pytest.mark.feature("CORE-20")
async def test_server_to_client_ids_are_generated_uuids():
    server = asking_server()
    peers = [await connected(server, "2025-11-25", {"roots": {}, "sampling": {}, "elicitation": {}})
             for _ in range(2)]
    for peer in peers:
        peer.answer("roots/list", ROOTS)
        peer.answer("sampling/createMessage", SAMPLED)
        peer.answer("elicitation/create", {"action": "decline"})
        peer.answer("ping", {})
        for ask, args in (("roots", {}), ("sampling", {"messages": HELLO, "max_tokens": 1}),
                          ("form", {"message": "m", "requested_schema": NAME_FORM}), ("ping", {})):
            # The same client request id each time: the server's ids never derive from it.
            assert "result" in await peer.call_tool("ask", ask_args(ask, args), request_id=1)
    ids = [s.message["id"] for peer in peers for s in peer.requests()]
    assert len(ids) == 8 and len(set(ids)) == 8
    for request_id in ids:
        assert isinstance(request_id, str) and str(uuid.UUID(request_id)) == request_id
    # No public way to choose one.
    for function in (ServerSession.request, PendingRequests.request):
        assert not {"id", "request_id"} & set(inspect.signature(function).parameters)


# Plain def tools: on a worker thread, with the ORM, blocking requests ----------------------------

async def test_plain_def_tool_runs_on_a_worker_thread_and_blocks_on_sampling():
    server = Server("worker")
    seen: dict[str, Any] = {}

    @server.tool
    def summarize(text: str, server_context: ServerContext) -> str:
        seen["thread"] = threading.get_ident()
        result = server_context.create_sampling_message(  # blocks this thread, not the loop
            [{"role": "user", "content": {"type": "text", "text": f"Summarize: {text}"}}], 20)
        seen["result"] = result
        return result["content"]["text"]

    peer = await connected(server, "2025-11-25", {"sampling": {}})
    loop_ticks = 0

    def answer(params: dict) -> dict:
        return {**SAMPLED, "content": {"type": "text", "text": f"ticks={loop_ticks}"}}

    peer.answer("sampling/createMessage", respond=answer, delay=0.05)
    task = peer.start_tool("summarize", {"text": "long"})
    while not task.done() and loop_ticks < 10_000:  # the loop stays free while the tool waits
        loop_ticks += 1
        await asyncio.sleep(0.001)
    response = await asyncio.wait_for(task, WAIT)
    assert seen["thread"] != threading.get_ident()
    assert response["result"]["content"][0]["text"].startswith("ticks=")
    assert int(response["result"]["content"][0]["text"].split("=")[1]) > 0
    assert peer.sent[0].params["messages"][0]["content"]["text"] == "Summarize: long"


@pytest.mark.django_db(transaction=True)
async def test_plain_def_tool_uses_the_django_orm(monkeypatch):
    from django.contrib.auth.models import User
    from django.db import connections

    # Worker threads keep their connection for CONN_MAX_AGE, which would hold the test database
    # open past the test; with 0, the connection hygiene around each call closes it afterwards.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    server = Server("orm")
    threads: list[int] = []

    @server.tool
    def register_user(username: str) -> dict:
        threads.append(threading.get_ident())
        User.objects.create_user(username=username, email=f"{username}@example.com")
        user = User.objects.get(username=username)
        return {"id": user.pk, "email": user.email, "count": User.objects.count()}

    peer = await connected(server)
    response = await peer.call_tool("register_user", {"username": "ada"})
    created = response["result"]["structuredContent"]
    assert created["email"] == "ada@example.com" and created["count"] == 1
    assert threads[0] != threading.get_ident()
    stored = await call_user_code(User.objects.get, username="ada")  # with the same hygiene
    assert stored.pk == created["id"]
