"""Prompts on the server, handshake era: authoring styles, prompts/list and prompts/get (PRM)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from mcp_protocol.errors import INVALID_PARAMS
from mcp_server import (
    Audio,
    BlobContents,
    Configuration,
    EmbeddedResource,
    Image,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptResult,
    Server,
    ServerContext,
    Text,
    TextContents,
)

from .harness import StdioServer
from .waiting import PATIENCE, eventually
from .wire import check_client_message, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode("ascii")
WAV = base64.b64encode(b"RIFF....WAVEfake").decode("ascii")


def greeting(name: str, style: str) -> PromptResult:
    return PromptResult(
        description=f"A {style} greeting",
        messages=[
            PromptMessage("user", f"Greet {name} in a {style} way."),
            PromptMessage("assistant", Text(f"Hello, {name}!")),
        ],
    )


# The same prompt in each authoring style -------------------------------------------------------
GREET_ARGUMENTS = [PromptArgument("name", required=True), PromptArgument("style", required=False)]


class Greet(Prompt):
    """A subclass with ``template``."""

    title = "Greeting"
    description = "Greet someone."
    arguments = GREET_ARGUMENTS

    def template(self, args: dict) -> PromptResult:
        return greeting(args["name"], args.get("style", "casual"))


def server_with_subclass() -> Server:
    return Server("prompts", prompts=[Greet])


def server_with_define() -> Server:
    prompt = Prompt.define(
        lambda args: greeting(args["name"], args.get("style", "casual")),
        name="greet", title="Greeting", description="Greet someone.",
        arguments=[{"name": "name", "required": True}, {"name": "style", "required": False}],
    )
    return Server("prompts", prompts=[prompt])


def server_with_server_define() -> Server:
    server = Server("prompts")

    @server.define_prompt(name="greet", title="Greeting", description="Greet someone.",
                          arguments=GREET_ARGUMENTS)
    def _greet(args: dict) -> PromptResult:
        return greeting(args["name"], args.get("style", "casual"))

    return server


def server_with_decorator() -> Server:
    server = Server("prompts")

    @server.prompt(name="greet", title="Greeting")
    def _greet(name: str, style: str = "casual") -> PromptResult:
        """Greet someone."""
        return greeting(name, style)

    return server


STYLES = {
    "subclass": server_with_subclass,
    "Prompt.define": server_with_define,
    "server.define_prompt": server_with_server_define,
    "@server.prompt": server_with_decorator,
}


@pytest.mark.feature("PRM-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_every_authoring_style_lists_and_gets_the_same_prompt(make_client, revision):
    lists, gets, missing = {}, {}, {}
    for style, build in STYLES.items():
        client = make_client(build(), revision=revision)
        lists[style] = client.result("prompts/list")
        gets[style] = client.result("prompts/get", {"name": "greet",
                                                    "arguments": {"name": "Ada", "style": "formal"}})
        missing[style] = client.request("prompts/get", {"name": "greet", "arguments": {}})["error"]

    expected_entry = {
        "name": "greet", "title": "Greeting", "description": "Greet someone.",
        "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
    }
    expected_get = {
        "description": "A formal greeting",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Greet Ada in a formal way."}},
            {"role": "assistant", "content": {"type": "text", "text": "Hello, Ada!"}},
        ],
    }
    for style in STYLES:
        assert lists[style] == {"prompts": [expected_entry]}, style
        assert gets[style] == expected_get, style
        assert missing[style]["code"] == INVALID_PARAMS, style


@pytest.mark.feature("PRM-01")
def test_decorator_without_arguments_and_registration_forms(make_client):
    server = Server("prompts")

    @server.prompt
    def summarize(text: str, server_context: ServerContext) -> str:
        """Summarize a text."""
        return f"Summarize: {text}"

    @Prompt.define(name="defined")
    def defined(args: dict) -> str:
        return "defined"

    server.register(defined)
    server.register(Greet)
    client = make_client(server)
    names = [p["name"] for p in client.result("prompts/list")["prompts"]]
    assert names == ["summarize", "defined", "greet"]
    # The decorator reads arguments from the signature; server_context is not one of them.
    entry = client.result("prompts/list")["prompts"][0]
    assert entry == {"name": "summarize", "description": "Summarize a text.",
                     "arguments": [{"name": "text", "required": True}]}
    got = client.result("prompts/get", {"name": "summarize", "arguments": {"text": "abc"}})
    assert got == {"messages": [{"role": "user", "content": {"type": "text", "text": "Summarize: abc"}}]}
    assert summarize("x", None) == "Summarize: x", "the decorator returns the function unchanged"
    with pytest.raises(ValueError, match="Duplicate prompt"):
        server.register(Greet)


# prompts/list entries ------------------------------------------------------------------------
class CodeReviewPrompt(Prompt):
    title = "Code review"
    description = "Review a change"
    arguments = [
        PromptArgument("diff", title="Diff", description="The unified diff", required=True),
        {"name": "focus", "description": "What to look at"},
    ]
    icons = [{"src": "https://example.com/review.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    meta = {"com.example/owner": "reviews-team"}

    def template(self, args: dict) -> str:
        return f"Review this: {args['diff']}"


class HTTPHelper(Prompt):
    def template(self, args: dict) -> str:
        return "help"


@pytest.mark.feature("PRM-02", "PRM-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_prompts_list_entry_shape(make_client, revision):
    client = make_client(Server("p", prompts=[CodeReviewPrompt, HTTPHelper]), revision=revision)
    result = client.result("prompts/list")
    assert result == {"prompts": [
        {
            "name": "code_review_prompt",
            "title": "Code review",
            "description": "Review a change",
            "arguments": [
                {"name": "diff", "title": "Diff", "description": "The unified diff", "required": True},
                {"name": "focus", "description": "What to look at"},
            ],
            "icons": [{"src": "https://example.com/review.png", "mimeType": "image/png",
                       "sizes": ["48x48"]}],
            "_meta": {"com.example/owner": "reviews-team"},
        },
        {"name": "http_helper", "arguments": []},
    ]}


@pytest.mark.feature("PRM-02")
def test_explicit_name_wins_over_the_class_name():
    class Anything(Prompt):
        name = "custom-name"

        def template(self, args: dict) -> str:
            return "x"

    assert Anything().to_dict()["name"] == "custom-name"
    with pytest.raises(ValueError, match="non-empty name"):
        Prompt.define(lambda args: "x", name="")


@pytest.mark.feature("PRM-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_meta_appears_as_underscore_meta_in_every_style(make_client, revision):
    server = Server("p")
    meta = {"com.example/tier": "gold", "nested": {"a": [1, 2]}}
    server.add_prompt(Prompt.define(lambda args: "x", name="defined", meta=meta))
    server.define_prompt(lambda args: "x", name="server_defined", meta=meta)
    server.prompt(lambda: "x", name="decorated", meta=meta)
    server.add_prompt(CodeReviewPrompt)  # a subclass's class attribute
    client = make_client(server, revision=revision)
    entries = {p["name"]: p for p in client.result("prompts/list")["prompts"]}
    for name in ("defined", "server_defined", "decorated"):
        assert entries[name]["_meta"] == meta, name
    assert entries["code_review_prompt"]["_meta"] == {"com.example/owner": "reviews-team"}


@pytest.mark.feature("PRM-07")
def test_meta_must_be_a_dict():
    with pytest.raises(ValueError, match="meta"):
        Prompt.define(lambda args: "x", name="p", meta=["not", "a", "dict"])
    with pytest.raises(ValueError, match="meta"):
        class Bad(Prompt):
            meta = "nope"


@pytest.mark.feature("PRM-07")
def test_prompt_without_meta_has_no_meta_key(make_client):
    client = make_client(Server("p", prompts=[HTTPHelper]))
    assert "_meta" not in client.result("prompts/list")["prompts"][0]


# prompts/get results -------------------------------------------------------------------------
def rich_messages(with_audio: bool) -> list:
    messages = [
        PromptMessage("user", "plain string becomes text"),
        PromptMessage("assistant", Text("text object", annotations={"priority": 0.5})),
        PromptMessage("user", Image(PNG, "image/png")),
        PromptMessage("user", EmbeddedResource(TextContents("file:///notes.txt", "notes", "text/plain"))),
        PromptMessage("user", EmbeddedResource(BlobContents.from_bytes("file:///a.bin", b"\x00\x01",
                                                                       "application/octet-stream"))),
        {"role": "assistant", "content": {"type": "text", "text": "a plain dict message"}},
    ]
    if with_audio:
        messages.append(PromptMessage("user", Audio(WAV, "audio/wav")))
    return messages


EXPECTED_RICH = [
    {"role": "user", "content": {"type": "text", "text": "plain string becomes text"}},
    {"role": "assistant", "content": {"type": "text", "text": "text object",
                                      "annotations": {"priority": 0.5}}},
    {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
    {"role": "user", "content": {"type": "resource", "resource": {
        "uri": "file:///notes.txt", "mimeType": "text/plain", "text": "notes"}}},
    {"role": "user", "content": {"type": "resource", "resource": {
        "uri": "file:///a.bin", "mimeType": "application/octet-stream",
        "blob": base64.b64encode(b"\x00\x01").decode("ascii")}}},
    {"role": "assistant", "content": {"type": "text", "text": "a plain dict message"}},
]
EXPECTED_AUDIO = {"role": "user", "content": {"type": "audio", "data": WAV, "mimeType": "audio/wav"}}


@pytest.mark.feature("PRM-03")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_prompts_get_serializes_every_content_kind(make_client, revision):
    # Audio content exists from 2025-03-26 on; the schema check would reject it before.
    with_audio = revision >= "2025-03-26"
    server = Server("p")
    server.define_prompt(lambda args: PromptResult(rich_messages(with_audio), description="rich"),
                         name="rich")
    client = make_client(server, revision=revision)
    result = client.result("prompts/get", {"name": "rich"})
    assert result == {"description": "rich",
                      "messages": EXPECTED_RICH + ([EXPECTED_AUDIO] if with_audio else [])}


@pytest.mark.feature("PRM-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize(("returned", "expected"), [
    ("just text", {"messages": [{"role": "user", "content": {"type": "text", "text": "just text"}}]}),
    ([PromptMessage("assistant", "a list")],
     {"messages": [{"role": "assistant", "content": {"type": "text", "text": "a list"}}]}),
    ({"description": "a dict", "messages": [PromptMessage("user", "inside a dict")]},
     {"description": "a dict",
      "messages": [{"role": "user", "content": {"type": "text", "text": "inside a dict"}}]}),
    (PromptResult([PromptMessage("user", "x")]),
     {"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}]}),
], ids=["string", "list", "dict", "PromptResult-no-description"])
def test_prompts_get_result_forms(make_client, revision, returned, expected):
    server = Server("p")
    server.define_prompt(lambda args: returned, name="p")
    assert make_client(server, revision=revision).result("prompts/get", {"name": "p"}) == expected


@pytest.mark.feature("PRM-03")
def test_message_role_must_be_user_or_assistant():
    with pytest.raises(ValueError, match="role"):
        PromptMessage("system", "no such role")
    assert PromptMessage("assistant", "ok").to_dict()["role"] == "assistant"


@pytest.mark.feature("PRM-03")
def test_a_template_returning_something_else_is_an_internal_error(make_client):
    reported = []
    server = Server("p", configuration=Configuration(exception_reporter=lambda e, c: reported.append(e)))
    server.define_prompt(lambda args: 42, name="bad")
    error = make_client(server).request("prompts/get", {"name": "bad"})["error"]
    assert error == {"code": -32603, "message": "Internal error"}
    assert isinstance(reported[0], TypeError)


# Errors ------------------------------------------------------------------------------------
@pytest.mark.feature("PRM-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_unknown_prompt(make_client, revision):
    seen: list[dict] = []
    server = Server("p", prompts=[Greet],
                    configuration=Configuration(instrumentation_callback=seen.append))
    client = make_client(server, revision=revision)
    error = client.request("prompts/get", {"name": "nope", "arguments": {}})["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Prompt not found nope"
    data = seen[-1]
    assert data["method"] == "prompts/get"
    assert data["error"] == "prompt_not_found"
    assert "prompt_name" not in data


@pytest.mark.feature("PRM-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_missing_required_arguments(make_client, revision):
    called = []
    seen: list[dict] = []
    server = Server("p", configuration=Configuration(instrumentation_callback=seen.append))
    server.define_prompt(lambda args: called.append(args) or "x", name="p", arguments=[
        PromptArgument("a", required=True), PromptArgument("b", required=True),
        PromptArgument("c", required=False),
    ])
    client = make_client(server, revision=revision)
    one = client.request("prompts/get", {"name": "p", "arguments": {"a": "1"}})["error"]
    assert one == {"code": INVALID_PARAMS, "message": "Missing required arguments: b"}
    both = client.request("prompts/get", {"name": "p"})["error"]
    assert both == {"code": INVALID_PARAMS, "message": "Missing required arguments: a, b"}
    assert seen[-1]["error"] == "missing_required_arguments"
    assert called == [], "the template never runs without its required arguments"
    client.result("prompts/get", {"name": "p", "arguments": {"a": "1", "b": "2"}})
    assert called == [{"a": "1", "b": "2"}]


@pytest.mark.feature("PRM-04", "PRM-05")
def test_bad_prompts_get_params(make_client):
    client = make_client(Server("p", prompts=[Greet]))
    no_name = client.request("prompts/get", {}, check=False)["error"]
    assert no_name["code"] == INVALID_PARAMS
    bad_arguments = client.request("prompts/get", {"name": "greet", "arguments": ["Ada"]},
                                   check=False)["error"]
    assert bad_arguments["code"] == INVALID_PARAMS


# Arguments and context ---------------------------------------------------------------------
@pytest.mark.feature("PRM-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_templates_get_arguments_and_opt_in_context(make_client, revision):
    seen: dict[str, tuple] = {}

    class WithContext(Prompt):
        arguments = [PromptArgument("topic", required=True)]

        def template(self, args: dict, server_context: ServerContext) -> str:
            seen["subclass"] = (args, server_context)
            return "ok"

    class WithoutContext(Prompt):
        def template(self, args: dict) -> str:
            seen["plain"] = (args,)
            return "ok"

    server = Server("p", prompts=[WithContext, WithoutContext], server_context={"user": "ada"})

    @server.define_prompt(name="defined")
    async def defined(args: dict, server_context: ServerContext = None) -> str:
        seen["defined"] = (args, server_context)
        return "ok"

    @server.prompt
    def decorated(topic: str, server_context: ServerContext) -> str:
        seen["decorated"] = ({"topic": topic}, server_context)
        return "ok"

    client = make_client(server, revision=revision)
    for name in ("with_context", "without_context", "defined", "decorated"):
        client.result("prompts/get", {"name": name, "arguments": {"topic": "owls"},
                                      "_meta": {"progressToken": "t-1", "com.example/trace": "abc"}})
    assert seen["plain"] == ({"topic": "owls"},)
    for name in ("subclass", "defined", "decorated"):
        args, ctx = seen[name]
        assert args == {"topic": "owls"}, name
        assert isinstance(ctx, ServerContext), name
        assert ctx.method == "prompts/get"
        assert ctx["user"] == "ada", "the user-defined server_context is readable"
        assert ctx.meta == {"progressToken": "t-1", "com.example/trace": "abc"}
        assert ctx["_meta"]["com.example/trace"] == "abc"
        assert ctx.cancelled() is False
        assert ctx.protocol_version == revision


@pytest.mark.feature("PRM-06")
async def test_template_sees_cancellation_through_its_context():
    """A long template watches ``server_context``; a cancel stops it and no response is sent."""
    revision = "2025-11-25"
    started = asyncio.Event()
    observed: list[bool] = []
    server = Server("p")

    @server.define_prompt(name="slow")
    async def slow(args: dict, server_context: ServerContext) -> str:
        started.set()
        await eventually(server_context.cancelled, what="the cancel")
        observed.append(server_context.cancelled())
        return "too late"

    async def send(message: dict):
        check_client_message(message, revision)
        answer = await server.handle_async(message)
        if answer is not None:
            check_server_message(answer, revision, message.get("method"))
        return answer

    await send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    request = asyncio.ensure_future(send({"jsonrpc": "2.0", "id": 7, "method": "prompts/get",
                                          "params": {"name": "slow"}}))
    await asyncio.wait_for(started.wait(), PATIENCE)
    await send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "user gave up"}})
    assert await asyncio.wait_for(request, PATIENCE) is None
    assert observed == [True]


@pytest.mark.feature("PRM-02", "PRM-03", "PRM-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_demo_prompt_over_stdio(revision):
    with StdioServer(revision=revision) as stdio:
        stdio.initialize()
        listed = stdio.request("prompts/list")["result"]["prompts"]
        greeting_entry = next(p for p in listed if p["name"] == "greeting")
        assert greeting_entry["arguments"][0] == {"name": "name", "description": "Who to greet",
                                                  "required": True}
        got = stdio.request("prompts/get", {"name": "greeting",
                                            "arguments": {"name": "Ada", "style": "formal"}})["result"]
        assert got["messages"] == [{"role": "user", "content": {
            "type": "text", "text": "Write a formal greeting in english for Ada."}}]
        error = stdio.request("prompts/get", {"name": "nope"})["error"]
        assert (error["code"], error["message"]) == (INVALID_PARAMS, "Prompt not found nope")
        assert stdio.close() == 0
