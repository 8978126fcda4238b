"""Configuration and observability through the Python API (handshake era).

``MCP_SERVER`` settings feeding the default server are tested with the settings themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import Any

import pytest

import mcp_server
from mcp_protocol import CancelledError, MCPError
from mcp_server import (
    Capabilities,
    Configuration,
    ConfigurationError,
    Prompt,
    RequestStateSecurity,
    Resource,
    ResourceTemplate,
    Server,
    ServerSession,
    Tool,
)
from mcp_server.configuration import global_configuration

from .harness import CLIENT_INFO
from .waiting import PATIENCE, eventually
from .wire import check_client_message, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
CLIENT = {"name": CLIENT_INFO["name"], "version": CLIENT_INFO["version"]}
ADD_SCHEMA = {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}


def call(client, name: str, arguments: dict | None = None) -> dict:
    return client.request("tools/call", {"name": name, "arguments": arguments or {}})


class Hooks:
    """Records what exception_reporter and instrumentation_callback receive."""

    def __init__(self) -> None:
        self.reports: list[tuple[BaseException, dict]] = []
        self.instrumented: list[dict] = []

    def reporter(self, exc: BaseException, context: dict) -> None:
        self.reports.append((exc, context))

    def instrument(self, data: dict) -> None:
        self.instrumented.append(dict(data))

    def configuration(self, **settings: Any) -> Configuration:
        return Configuration(exception_reporter=self.reporter,
                             instrumentation_callback=self.instrument, **settings)


def everything_server(configuration: Configuration | None = None, server_context: Any = None) -> Server:
    """A server with a tool of each outcome, a prompt, a resource and a resource template."""
    server = Server("observed", configuration=configuration, server_context=server_context)
    server.define_tool(lambda args: str(args["a"] + args["b"]), name="add", input_schema=ADD_SCHEMA)

    @server.tool
    def boom() -> str:
        raise RuntimeError("password=hunter2")

    @server.tool
    def typed() -> str:
        raise MCPError("Nope", code=-32052)

    @server.prompt
    def greet(name: str) -> str:
        return f"Hello {name}"

    @server.prompt
    def broken() -> str:
        raise RuntimeError("prompt internals")

    @server.resource("docs://readme", name="readme")
    def readme() -> str:
        return "Read me"

    @server.resource_template("users://{user_id}", name="user")
    def user(user_id: str) -> str:
        return f"user {user_id}"

    return server


# CFG-01: global and per-server configuration ----------------------------------------------------

@pytest.mark.feature("CFG-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_global_configuration_applies_where_the_server_sets_nothing(make_client, revision):
    reports: list[tuple[BaseException, dict]] = []
    instrumented: list[dict] = []
    returned = mcp_server.configure(exception_reporter=lambda e, c: reports.append((e, c)),
                                    instrumentation_callback=instrumented.append)
    assert returned is global_configuration
    client = make_client(everything_server(), revision)
    call(client, "boom")
    assert [type(exc) for exc, _ in reports] == [RuntimeError]
    assert [data["method"] for data in instrumented] == ["initialize", "tools/call"]


@pytest.mark.feature("CFG-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_per_server_values_win_over_global_ones(make_client, revision):
    global_reports: list[BaseException] = []
    mcp_server.configure(exception_reporter=lambda e, c: global_reports.append(e),
                         validate_tool_call_arguments=False)
    own = Hooks()
    # A per-server value wins even when it equals the built-in default.
    server = everything_server(Configuration(exception_reporter=own.reporter,
                                             validate_tool_call_arguments=True))
    plain = everything_server()
    client, plain_client = make_client(server, revision), make_client(plain, revision)
    call(client, "boom")
    assert len(own.reports) == 1 and global_reports == []
    assert call(client, "add", {"a": "1", "b": 2})["result"]["content"][0]["text"].startswith(
        "Invalid arguments"
    )
    assert call(plain_client, "add", {"a": "1", "b": "2"})["result"] == {
        "content": [{"type": "text", "text": "12"}], "isError": False
    }
    call(plain_client, "boom")
    assert len(global_reports) == 1 and len(own.reports) == 1


@pytest.mark.feature("CFG-01")
def test_global_changes_reach_existing_servers_and_pins_merge(make_client):
    server = everything_server()
    unset = Configuration()
    assert not unset.is_set("protocol_version")
    mcp_server.configure(protocol_version="2025-06-18")
    assert server.configuration.protocol_version == "2025-06-18"
    assert make_client(server, "2025-11-25").revision == "2025-06-18"
    pinned = everything_server(Configuration(protocol_version="2025-03-26"))
    assert make_client(pinned, "2025-11-25").revision == "2025-03-26"
    assert pinned.configuration.validate_tool_call_arguments is True  # default where nobody sets it


# CFG-02: exception_reporter ----------------------------------------------------------------------

@pytest.mark.feature("CFG-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_request_failures_are_reported_with_the_raw_request_only(make_client, revision):
    hooks = Hooks()
    secret_context = {"api_key": "sk-secret"}
    server = everything_server(hooks.configuration(), server_context=secret_context)
    client = make_client(server, revision)
    tool_answer = call(client, "boom")
    prompt_answer = client.request("prompts/get", {"name": "broken"})
    assert prompt_answer["error"] == {"code": -32603, "message": "Internal error"}
    assert "hunter2" not in str(tool_answer) and "internals" not in str(prompt_answer)
    assert [type(exc) for exc, _ in hooks.reports] == [RuntimeError, RuntimeError]
    contexts = [context for _, context in hooks.reports]
    assert contexts == [
        {"request": {"jsonrpc": "2.0", "id": tool_answer["id"], "method": "tools/call",
                     "params": {"name": "boom", "arguments": {}}}},
        {"request": {"jsonrpc": "2.0", "id": prompt_answer["id"], "method": "prompts/get",
                     "params": {"name": "broken"}}},
    ]
    assert "sk-secret" not in str(contexts)
    # Handled outcomes are not exceptions: nothing more is reported.
    call(client, "typed")
    call(client, "nope")
    call(client, "add", {"a": 1})
    assert len(hooks.reports) == 2


class FailingTransport:
    def broadcast(self, message: dict, *, level: str | None = None) -> bool:
        raise OSError("pipe closed")


@pytest.mark.feature("CFG-02")
def test_notification_failures_are_reported_with_the_notification_name():
    hooks = Hooks()
    server = everything_server(hooks.configuration(), server_context={"api_key": "sk-secret"})
    server.transport = FailingTransport()
    assert server.notify_tools_list_changed() is False
    assert server.notify_prompts_list_changed() is False
    assert server.notify_resources_list_changed() is False
    assert [context for _, context in hooks.reports] == [
        {"notification": "tools_list_changed"},
        {"notification": "prompts_list_changed"},
        {"notification": "resources_list_changed"},
    ]
    assert all(isinstance(exc, OSError) for exc, _ in hooks.reports)


@pytest.mark.feature("CFG-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_default_reporter_does_nothing_visible(make_client, revision):
    assert Configuration().exception_reporter is None
    client = make_client(everything_server(), revision)
    assert call(client, "boom")["result"] == {
        "content": [{"type": "text", "text": "Internal error occurred"}], "isError": True
    }
    assert client.result("ping") == {}


@pytest.mark.feature("CFG-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_failing_reporter_does_not_break_the_answer(make_client, revision):
    def reporter(exc, context):
        raise ValueError("reporter is broken")

    client = make_client(everything_server(Configuration(exception_reporter=reporter)), revision)
    assert call(client, "boom")["result"]["isError"] is True


# CFG-03 / CFG-04: around_request -----------------------------------------------------------------

def loop_thread_probe(server: Server) -> dict:
    """An async tool records the event loop's thread; sync hooks must run elsewhere."""
    seen: dict[str, Any] = {}

    @server.tool
    async def where() -> str:
        seen["loop_thread"] = threading.get_ident()
        return "here"

    return seen


@pytest.mark.feature("CFG-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_plain_around_request_runs_on_a_worker_thread_and_blocks_on_call_next(make_client, revision):
    records: list[dict] = []
    hooks = Hooks()

    def around(data, call_next):
        record = {"before": dict(data), "thread": threading.get_ident()}
        try:
            record["returned"] = call_next()
        except MCPError as exc:
            record["raised"] = exc
            raise
        finally:
            record["after"] = dict(data)
            records.append(record)

    server = everything_server(hooks.configuration(around_request=around))
    seen = loop_thread_probe(server)
    client = make_client(server, revision)
    assert records[0]["before"] == {"method": "initialize"}
    assert records[0]["after"] == {"method": "initialize", "client": CLIENT}
    records.clear()

    call(client, "where")
    assert records[0]["thread"] != seen["loop_thread"]
    assert records[0]["returned"] == {"content": [{"type": "text", "text": "here"}], "isError": False}
    _check_wrapped_requests(client, records, hooks)


@pytest.mark.feature("CFG-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_async_around_request_awaits_call_next_on_the_loop(make_client, revision):
    records: list[dict] = []
    hooks = Hooks()

    async def around(data, call_next):
        record = {"before": dict(data), "thread": threading.get_ident()}
        try:
            record["returned"] = await call_next()
        except MCPError as exc:
            record["raised"] = exc
            raise
        finally:
            record["after"] = dict(data)
            records.append(record)

    server = everything_server(hooks.configuration(around_request=around))
    seen = loop_thread_probe(server)
    client = make_client(server, revision)
    records.clear()

    call(client, "where")
    assert records[0]["thread"] == seen["loop_thread"]
    assert records[0]["returned"]["content"] == [{"type": "text", "text": "here"}]
    _check_wrapped_requests(client, records, hooks)


def _check_wrapped_requests(client, records: list[dict], hooks: Hooks) -> None:
    """What around_request sees before and after call_next, for each kind of request."""
    records.clear()
    hooks.instrumented.clear()
    call(client, "add", {"a": 1, "b": 2})
    client.request("prompts/get", {"name": "greet", "arguments": {"name": "Ann"}})
    client.request("resources/read", {"uri": "docs://readme"})
    call(client, "boom")
    unknown = call(client, "missing")
    client.request("ping")

    befores = [record["before"] for record in records]
    assert befores == [{"method": m} for m in
                       ("tools/call", "prompts/get", "resources/read", "tools/call", "tools/call", "ping")]
    afters = [record["after"] for record in records]
    assert afters == [
        {"method": "tools/call", "tool_name": "add", "tool_arguments": {"a": 1, "b": 2}, "client": CLIENT},
        {"method": "prompts/get", "prompt_name": "greet", "client": CLIENT},
        {"method": "resources/read", "resource_uri": "docs://readme", "client": CLIENT},
        {"method": "tools/call", "tool_name": "boom", "tool_arguments": {}, "error": "internal_error",
         "client": CLIENT},
        {"method": "tools/call", "error": "tool_not_found", "client": CLIENT},
        {"method": "ping", "client": CLIENT},
    ]
    assert records[4]["raised"].code == -32602 and unknown["error"]["code"] == -32602
    # duration is added only once the hook has returned, and instrumentation sees it.
    assert all("duration" not in record["after"] for record in records)
    assert [data["method"] for data in hooks.instrumented] == [r["method"] for r in befores]
    assert all(data["duration"] >= 0 for data in hooks.instrumented)


@pytest.mark.feature("CFG-03", "CFG-06")
@pytest.mark.parametrize("style", ["plain", "async"])
def test_around_request_sees_the_opted_in_server_context_before_call_next(make_client, style):
    user_context = {"tenant": "acme"}
    befores: list[dict] = []

    def plain(data, call_next):
        befores.append(dict(data))
        return call_next()

    async def coroutine(data, call_next):
        befores.append(dict(data))
        return await call_next()

    around = plain if style == "plain" else coroutine
    opted = everything_server(Configuration(around_request=around, instrument_server_context=True),
                              server_context=user_context)
    call(make_client(opted), "add", {"a": 1, "b": 1})
    assert befores[-1] == {"method": "tools/call", "server_context": user_context}
    assert befores[-1]["server_context"] is user_context
    default = everything_server(Configuration(around_request=around), server_context=user_context)
    call(make_client(default), "add", {"a": 1, "b": 1})
    assert befores[-1] == {"method": "tools/call"}


@pytest.mark.feature("CFG-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("style", ["plain", "async"])
def test_what_the_hook_returns_does_not_change_the_answer(make_client, revision, style):
    logged: list[str] = []

    def plain(data, call_next):  # the logging pattern of the README: nothing is returned
        call_next()
        logged.append(data["method"])

    async def coroutine(data, call_next):
        await call_next()
        logged.append(data["method"])
        return "ignored"

    around = plain if style == "plain" else coroutine
    client = make_client(everything_server(Configuration(around_request=around)), revision)
    assert call(client, "add", {"a": 2, "b": 2})["result"] == {
        "content": [{"type": "text", "text": "4"}], "isError": False
    }
    assert logged == ["initialize", "tools/call"]


@pytest.mark.feature("CFG-04")
@pytest.mark.parametrize("style", ["plain", "async"])
@pytest.mark.parametrize("revision", REVISIONS)
def test_failures_swallowed_by_around_request_are_still_reported_once(make_client, style, revision):
    hooks = Hooks()

    def plain(data, call_next):
        with contextlib.suppress(Exception):
            call_next()

    async def coroutine(data, call_next):
        with contextlib.suppress(Exception):
            await call_next()

    around = plain if style == "plain" else coroutine
    client = make_client(everything_server(hooks.configuration(around_request=around)), revision)
    tool_answer = call(client, "boom")
    assert tool_answer["result"]["content"] == [{"type": "text", "text": "Internal error occurred"}]
    assert len(hooks.reports) == 1
    prompt_answer = client.request("prompts/get", {"name": "broken"})
    assert prompt_answer["error"] == {"code": -32603, "message": "Internal error"}
    assert len(hooks.reports) == 2
    assert [context["request"]["method"] for _, context in hooks.reports] == ["tools/call", "prompts/get"]
    # A typed error swallowed by the hook is not an exception to report.
    call(client, "typed")
    assert len(hooks.reports) == 2


@pytest.mark.feature("CFG-04", "CFG-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_failing_hook_is_reported_once(make_client, revision):
    hooks = Hooks()

    def around(data, call_next):
        if data["method"] == "ping":
            raise RuntimeError("hook bug")
        return call_next()

    client = make_client(everything_server(hooks.configuration(around_request=around)), revision)
    answer = client.request("ping")
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
    [(exc, context)] = hooks.reports
    assert str(exc) == "hook bug" and context["request"]["method"] == "ping"


# CFG-05: instrumentation_callback ----------------------------------------------------------------

SCENARIOS = [
    ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
     {"tool_name": "add", "tool_arguments": {"a": 1, "b": 2}}),
    ("tools/call", {"name": "nope", "arguments": {}}, {"error": "tool_not_found"}),
    ("tools/call", {"name": "add", "arguments": {"a": 1}},
     {"tool_name": "add", "tool_arguments": {"a": 1}, "error": "missing_required_arguments"}),
    ("tools/call", {"name": "add", "arguments": {"a": 1, "b": "x"}},
     {"tool_name": "add", "tool_arguments": {"a": 1, "b": "x"}, "error": "invalid_schema"}),
    ("tools/call", {"name": "boom", "arguments": {}},
     {"tool_name": "boom", "tool_arguments": {}, "error": "internal_error"}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "A"}}, {"prompt_name": "greet"}),
    ("prompts/get", {"name": "nope"}, {"error": "prompt_not_found"}),
    ("resources/read", {"uri": "docs://readme"}, {"resource_uri": "docs://readme"}),
    ("resources/read", {"uri": "users://7"},
     {"resource_uri": "users://7", "resource_template": "users://{user_id}"}),
    ("tools/list", {}, {}),
    ("ping", None, {}),
]


@pytest.mark.feature("CFG-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize(("method", "params", "expected"), SCENARIOS)
def test_instrumentation_after_every_request(make_client, revision, method, params, expected):
    hooks = Hooks()
    client = make_client(everything_server(hooks.configuration()), revision)
    assert hooks.instrumented[0]["method"] == "initialize"
    assert hooks.instrumented[0]["client"] == CLIENT
    hooks.instrumented.clear()
    client.request(method, params)
    [data] = hooks.instrumented
    duration = data.pop("duration")
    assert isinstance(duration, float) and duration >= 0
    assert data == {"method": method, "client": CLIENT, **expected}


@pytest.mark.feature("CFG-05")
async def test_instrumentation_of_a_cancelled_request():
    hooks = Hooks()
    server = Server("cancel", configuration=hooks.configuration())
    started = asyncio.Event()

    @server.tool
    async def slow(server_context) -> str:
        started.set()
        await eventually(server_context.cancelled, what="the cancel")
        server_context.raise_if_cancelled()
        return "finished"

    revision = "2025-11-25"

    async def send(message: dict) -> Any:
        check_client_message(message, revision)
        answer = await server.handle_async(message)
        if answer is not None:
            check_server_message(answer, revision, message.get("method"))
        return answer

    await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}})
    await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    task = asyncio.create_task(send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "slow", "arguments": {}}}))
    await asyncio.wait_for(started.wait(), PATIENCE)
    await send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 2, "reason": "user stop"}})
    assert await asyncio.wait_for(task, PATIENCE) is None  # a cancelled request gets no response
    data = hooks.instrumented[-1]
    assert data["method"] == "tools/call" and data["tool_name"] == "slow"
    assert data["cancelled"] is True and data["cancellation_reason"] == "user stop"
    assert hooks.reports == []


@pytest.mark.feature("CFG-05")
def test_a_failing_instrumentation_callback_does_not_break_the_answer(make_client):
    def callback(data):
        raise RuntimeError("metrics down")

    client = make_client(everything_server(Configuration(instrumentation_callback=callback)))
    assert call(client, "add", {"a": 1, "b": 1})["result"]["isError"] is False


@pytest.mark.feature("CFG-05")
def test_tool_raising_cancelled_is_instrumented_as_cancelled(make_client):
    hooks = Hooks()
    server = Server("cancel", configuration=hooks.configuration())

    @server.tool
    def quits() -> str:
        raise CancelledError(reason="gave up")

    client = make_client(server)
    assert call(client, "quits") is None
    assert hooks.instrumented[-1]["cancelled"] is True
    assert hooks.instrumented[-1]["cancellation_reason"] == "gave up"


# CFG-06 / CFG-07: switches ---------------------------------------------------------------------

@pytest.mark.feature("CFG-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_instrument_server_context(make_client, revision):
    assert Configuration().instrument_server_context is False
    user_context = {"tenant": "acme"}
    hooks = Hooks()
    client = make_client(everything_server(hooks.configuration(), server_context=user_context), revision)
    call(client, "add", {"a": 1, "b": 1})
    assert "server_context" not in hooks.instrumented[-1]

    hooks = Hooks()
    server = everything_server(hooks.configuration(instrument_server_context=True),
                               server_context=user_context)
    call(make_client(server, revision), "add", {"a": 1, "b": 1})
    assert hooks.instrumented[-1]["server_context"] == user_context

    hooks = Hooks()
    unset = everything_server(hooks.configuration(instrument_server_context=True))
    call(make_client(unset, revision), "add", {"a": 1, "b": 1})
    assert "server_context" in hooks.instrumented[-1]
    assert hooks.instrumented[-1]["server_context"] is None


@pytest.mark.feature("CFG-06", "CFG-07")
@pytest.mark.parametrize("setting", ["instrument_server_context", "validate_tool_call_arguments",
                                     "validate_tool_call_results"])
@pytest.mark.parametrize("value", [1, 0, "true", None, [True]])
def test_switches_must_be_booleans(setting, value):
    with pytest.raises(ConfigurationError, match=setting):
        Configuration(**{setting: value})
    with pytest.raises(ConfigurationError, match=setting):
        mcp_server.configure(**{setting: value})
    configuration = Configuration()
    with pytest.raises(ConfigurationError):
        setattr(configuration, setting, value)
    assert not configuration.is_set(setting)


@pytest.mark.feature("CFG-07")
def test_validation_switch_defaults():
    configuration = Configuration()
    assert configuration.validate_tool_call_arguments is True
    assert configuration.validate_tool_call_results is False
    assert Server("defaults").configuration.validate_tool_call_arguments is True
    assert Server("defaults").configuration.validate_tool_call_results is False


@pytest.mark.feature("CFG-02", "CFG-03", "CFG-05")
@pytest.mark.parametrize("setting", ["exception_reporter", "around_request", "instrumentation_callback"])
def test_hooks_must_be_callable(setting):
    with pytest.raises(ConfigurationError, match=setting):
        Configuration(**{setting: "not callable"})
    assert getattr(Configuration(**{setting: None}), setting) is None


# CFG-08: the user server_context ---------------------------------------------------------------

@pytest.mark.feature("CFG-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_user_context_reaches_tool_prompt_and_resource_handlers(make_client, revision):
    seen: dict[str, Any] = {}
    user_context = {"user": "alice"}

    class Whoami(Tool):
        def call(self, server_context):
            seen["tool"] = server_context["user"]
            return server_context["user"]

    class Ask(Prompt):
        def template(self, args, server_context):
            seen["prompt"] = server_context["user"]
            return f"question from {server_context['user']}"

    class Profile(Resource):
        uri = "me://profile"

        def contents(self, server_context):
            seen["resource"] = server_context["user"]
            return server_context["user"]

    class Item(ResourceTemplate):
        uri_template = "items://{item_id}"

        def contents(self, item_id, server_context):
            seen["template"] = server_context["user"]
            return f"{item_id} for {server_context['user']}"

    server = Server("ctx", tools=[Whoami], prompts=[Ask], resources=[Profile], resource_templates=[Item],
                    server_context=user_context)

    @server.tool
    async def decorated(server_context) -> str:
        seen["decorated"] = server_context["user"]
        return "ok"

    client = make_client(server, revision)
    assert call(client, "whoami")["result"]["content"] == [{"type": "text", "text": "alice"}]
    call(client, "decorated")
    client.result("prompts/get", {"name": "ask"})
    assert client.result("resources/read", {"uri": "me://profile"})["contents"][0]["text"] == "alice"
    client.result("resources/read", {"uri": "items://3"})
    assert seen == {key: "alice" for key in ("tool", "decorated", "prompt", "resource", "template")}


@pytest.mark.feature("CFG-08")
def test_a_context_built_per_request_reaches_the_handler(make_client):
    """A project serving each request with its own Server (a per-user context) sees its own values."""

    def build(user: str) -> Server:
        server = Server("per-request", server_context={"user": user})
        server.define_tool(lambda args, server_context: server_context["user"], name="whoami")
        return server

    for user in ("ann", "bob"):
        answer = call(make_client(build(user)), "whoami")
        assert answer["result"]["content"] == [{"type": "text", "text": user}]


# CFG-09 / CFG-10 / CFG-11: the server's surface --------------------------------------------------

@pytest.mark.feature("CFG-09")
def test_constructor_surface():
    parameters = inspect.signature(Server).parameters
    expected = {
        "name": "model_context_protocol", "title": None, "version": "0.1.0", "description": None,
        "icons": None, "website_url": None, "instructions": None, "tools": (), "prompts": (),
        "resources": (), "resource_templates": (), "server_context": None, "configuration": None,
        "capabilities": None, "page_size": None, "ttl_ms": None, "cache_scope": None,
        "request_state_security": None, "input_required_legacy_shim": True,
        "input_required_max_rounds": 8,
    }
    assert set(expected) <= set(parameters)
    for name, default in expected.items():
        assert parameters[name].default == default, name
    server = Server()
    assert (server.name, server.version, server.input_required_legacy_shim) == (
        "model_context_protocol", "0.1.0", True
    )


@pytest.mark.feature("CFG-09")
@pytest.mark.parametrize("revision", REVISIONS)
def test_constructor_values_reach_the_wire(make_client, revision):
    icons = [{"src": "https://example.com/logo.png", "mimeType": "image/png"}]
    configuration = Configuration()
    security = RequestStateSecurity(key=bytes(32))
    server = Server(
        "shop", title="Shop", version="2.1.0", description="Orders and stock", icons=icons,
        website_url="https://example.com", instructions="Use the tools.",
        tools=[Tool.define(lambda a: "", name=f"t{i}") for i in range(3)],
        prompts=[Prompt.define(lambda args: "hi", name="hello")],
        resources=[Resource(uri="docs://a", name="a")],
        resource_templates=[ResourceTemplate(uri_template="docs://{id}", name="doc")],
        server_context={"k": "v"}, configuration=configuration,
        capabilities=Capabilities().support_tools().support_prompts().support_resources(),
        page_size=2, ttl_ms=1000, cache_scope="public", request_state_security=security,
        input_required_legacy_shim=False,
    )
    assert server.server_context == {"k": "v"}
    assert server.request_state_security is security
    assert server.input_required_legacy_shim is False
    client = InitializingClient(make_client, server, revision)
    result = client.result
    if revision == "2025-11-25":
        assert result["serverInfo"] == {"name": "shop", "title": "Shop", "version": "2.1.0",
                                        "description": "Orders and stock", "icons": icons,
                                        "websiteUrl": "https://example.com"}
        assert result["instructions"] == "Use the tools."
    else:
        assert result["serverInfo"] == {"name": "shop", "version": "2.1.0"}
    assert result["capabilities"] == {"tools": {}, "prompts": {}, "resources": {}}
    first = client.client.result("tools/list")
    assert [t["name"] for t in first["tools"]] == ["t0", "t1"]
    assert first["nextCursor"] == "2"
    assert (first["ttlMs"], first["cacheScope"]) == (1000, "public")
    assert client.client.result("prompts/list")["prompts"][0]["name"] == "hello"
    assert client.client.result("resources/list")["resources"][0]["uri"] == "docs://a"
    assert client.client.result("resources/templates/list")["resourceTemplates"][0]["uriTemplate"] == \
        "docs://{id}"


class InitializingClient:
    def __init__(self, make_client, server: Server, revision: str):
        self.client = make_client(server, revision, initialize=False)
        self.result = self.client.initialize(revision)


@pytest.mark.feature("CFG-09")
def test_defaults_on_the_wire(make_client):
    result = InitializingClient(make_client, Server(), "2025-11-25").result
    assert result["serverInfo"] == {"name": "model_context_protocol", "version": "0.1.0"}
    assert "instructions" not in result


@pytest.mark.feature("CFG-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_default_capabilities(make_client, revision):
    result = InitializingClient(make_client, Server("defaults"), revision).result
    assert result["capabilities"] == {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"listChanged": True}, "logging": {},
    }
    assert "completions" not in result["capabilities"]


@pytest.mark.feature("CFG-11")
def test_capabilities_builder_methods():
    assert Capabilities().to_h() == {}
    built = (
        Capabilities().support_tools().support_tools_list_changed().support_prompts()
        .support_prompts_list_changed().support_resources().support_resources_list_changed()
        .support_resources_subscribe().support_logging().support_completions()
        .support_experimental({"com.example/fast": {"on": True}})
        .support_extensions({"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}})
        .support_extensions({"com.example/ext": {}})
    )
    assert built.to_h() == built.to_dict() == {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True}, "logging": {}, "completions": {},
        "experimental": {"com.example/fast": {"on": True}},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}, "com.example/ext": {}},
    }
    # Flags without their section create it; unset entries are omitted.
    assert Capabilities().support_resources_subscribe().to_h() == {"resources": {"subscribe": True}}
    assert Capabilities().support_tools().to_h() == {"tools": {}}
    assert Capabilities().support_logging().support_completions().to_h() == {"logging": {}, "completions": {}}
    # to_h is a copy: changing it does not change the builder.
    snapshot = built.to_h()
    snapshot["tools"]["listChanged"] = False
    assert built.to_h()["tools"] == {"listChanged": True}


@pytest.mark.feature("CFG-11")
@pytest.mark.parametrize("revision", REVISIONS)
def test_built_capabilities_are_declared_and_gate_methods(make_client, revision):
    builder = Capabilities().support_tools().support_completions().support_extensions({"com.example/x": {}})
    client = InitializingClient(make_client, Server("built", capabilities=builder), revision)
    assert client.result["capabilities"] == {"tools": {}, "completions": {},
                                             "extensions": {"com.example/x": {}}}
    assert client.client.result("tools/list") == {"tools": []}
    assert client.client.request("prompts/list")["error"]["code"] == -32601
    as_dict = Server("dict", capabilities={"prompts": {}})
    assert InitializingClient(make_client, as_dict, revision).result["capabilities"] == {"prompts": {}}


@pytest.mark.feature("CFG-11")
def test_capabilities_must_be_a_dict_or_a_builder():
    with pytest.raises(TypeError):
        Server("bad", capabilities=["tools"])


# CFG-12: client capabilities -------------------------------------------------------------------

@pytest.mark.feature("CFG-12")
@pytest.mark.parametrize("revision", REVISIONS)
def test_client_capabilities_global_and_per_session(make_client, revision):
    server = Server("caps")
    seen: list[dict] = []
    server.define_tool(lambda args, server_context: seen.append(server_context.client_capabilities) or "",
                       name="caps")
    assert server.client_capabilities is None
    global_caps = {"roots": {"listChanged": True}}
    client = make_client(server, revision, capabilities=global_caps)
    assert server.client_capabilities == global_caps
    assert server.session.client_capabilities == global_caps

    own = ServerSession(server, session_id="s-2")
    own_caps = {"sampling": {}}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": own_caps, "clientInfo": CLIENT_INFO}}
    check_client_message(initialize, revision)
    answer = asyncio.run(server.handle_async(initialize, own))
    check_server_message(answer, revision, "initialize")
    assert own.client_capabilities == own_caps
    assert server.client_capabilities == global_caps  # one session does not change the other

    # A session that never initialized (stateless) falls back to the server-wide capabilities.
    stateless = ServerSession(server)
    assert stateless.client_capabilities == global_caps
    call_tool = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "caps"}}
    asyncio.run(server.handle_async(call_tool, stateless))
    asyncio.run(server.handle_async(call_tool, own))
    call(client, "caps")
    assert seen == [global_caps, own_caps, global_caps]
