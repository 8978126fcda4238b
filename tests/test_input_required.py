"""input_required (SEP-2322): the value, its sealed request state, and the 2026-07-28 wire.

Modern requests are dispatched in process on a session carrying the request's ``_meta`` envelope
(as the modern transport path builds one per request); every message both ways is checked against
the 2026-07-28 schema.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.core import checks

from mcp_protocol.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    parse_envelope,
)
from mcp_server import (
    Configuration,
    InputRequiredResult,
    Prompt,
    PromptResult,
    RequestStateSecurity,
    Server,
    ServerContext,
    ServerSession,
)
from mcp_server import request_state as request_state_module
from mcp_server.elicitation import EnumSchema
from mcp_server.request_state import InvalidRequestStateError, arguments_digest

from .wire import check_client_message, check_server_message, validate

MODERN = "2026-07-28"
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ALL_CAPABILITIES = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}},
                    "roots": {"listChanged": True}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASK_NAME = InputRequiredResult.form_elicitation("What is your name?", NAME_FORM)
NAME_ANSWER = {"action": "accept", "content": {"name": "Ada"}}


def b64(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


# MRTR-01: the value ------------------------------------------------------------------------------

@pytest.mark.feature("MRTR-01")
def test_needs_input_requests_or_a_request_state():
    with pytest.raises(ValueError, match="input_requests or a request_state"):
        InputRequiredResult()
    with pytest.raises(ValueError):
        InputRequiredResult({}, None)
    assert InputRequiredResult(request_state="later").input_requests == {}
    with pytest.raises(TypeError):
        InputRequiredResult(request_state=b"bytes")


@pytest.mark.feature("MRTR-01")
def test_only_the_three_input_methods_with_object_params_and_keys_as_strings():
    result = InputRequiredResult({1: InputRequiredResult.list_roots(), "b": ASK_NAME})
    assert list(result.input_requests) == ["1", "b"]
    with pytest.raises(ValueError, match="method must be one of"):
        InputRequiredResult({"x": {"method": "ping", "params": {}}})
    with pytest.raises(TypeError, match="params must be an object"):
        InputRequiredResult({"x": {"method": "roots/list", "params": []}})
    with pytest.raises(TypeError):
        InputRequiredResult({"x": "roots/list"})


@pytest.mark.feature("ELI-08", "MRTR-01")
def test_builders_make_schema_valid_embedded_requests():
    form = InputRequiredResult.form_elicitation("Order", {
        "type": "object",
        "properties": {
            "size": EnumSchema.titled_single_select([("s", "Small"), ("l", "Large")], default="s"),
            "tags": EnumSchema.untitled_multi_select(["a", "b"], default=["a"]),
        },
        "required": ["size"],
    })
    requests = {
        "form": form,
        "url": InputRequiredResult.url_elicitation("Sign in", "https://example.com/x", "e-1"),
        "sampling": InputRequiredResult.sampling(
            [{"role": "user", "content": {"type": "text", "text": "Hi"}}], 50, temperature=0.2),
        "roots": InputRequiredResult.list_roots(),
    }
    wire = InputRequiredResult(requests).to_wire()
    validate(wire, MODERN, "InputRequiredResult")
    size = form["params"]["requestedSchema"]["properties"]["size"]
    assert size["oneOf"][0] == {"const": "s", "title": "Small"}
    with pytest.raises(ValueError):  # the same rules as create_form_elicitation: flat forms only
        InputRequiredResult.form_elicitation("x", {"type": "object", "properties": {
            "nested": {"type": "object"}}})


# MRTR-09 / MRTR-10: sealing ------------------------------------------------------------------------

BOUND = {"method": "tools/call", "target": "book", "arguments": {"b": [1, 2], "a": "é"}}


@pytest.mark.feature("MRTR-09")
def test_sealed_state_format_and_claims():
    security = RequestStateSecurity(key=KEY, ttl=60, audience="https://mcp.example.com")
    token = security.seal("step-2", **BOUND)
    assert token.startswith("v1.") and "=" not in token
    raw = base64.urlsafe_b64decode(token[3:] + "=" * (-len(token[3:]) % 4))
    iv, body = raw[:12], raw[12:]
    claims = json.loads(AESGCM(KEY).decrypt(iv, body, b"v1."))  # the AAD is "v1."
    assert set(claims) == {"v", "exp", "m", "t", "a", "aud", "s"}
    assert claims["v"] == 1 and claims["m"] == "tools/call" and claims["t"] == "book"
    assert claims["aud"] == "https://mcp.example.com" and claims["s"] == "step-2"
    assert claims["a"] == arguments_digest({"a": "é", "b": [1, 2]})  # key order does not matter
    assert time.time() < claims["exp"] <= time.time() + 60
    assert security.open(token, **BOUND) == "step-2"
    assert security.seal("step-2", **BOUND) != token  # a fresh IV each time


@pytest.mark.feature("MRTR-09")
def test_bad_keys_and_ttls_are_refused():
    for key in (b"short", "not base64!", b64(bytes(16)), 42):
        with pytest.raises((ValueError, TypeError)):
            RequestStateSecurity(key=key)
    for ttl in (0, -1, True, "300"):
        with pytest.raises(ValueError):
            RequestStateSecurity(key=KEY, ttl=ttl)
    with pytest.raises(ValueError):
        RequestStateSecurity()
    assert RequestStateSecurity(key=b64(KEY)).open(RequestStateSecurity(key=KEY).seal("s", **BOUND),
                                                   **BOUND) == "s"
    shown = repr(RequestStateSecurity(key=KEY))
    assert "keys=1" in shown and str(KEY) not in shown and b64(KEY) not in shown


@pytest.mark.feature("MRTR-09", "MRTR-10")
def test_keys_rotate_the_first_seals_and_every_one_opens():
    old = RequestStateSecurity(key=OTHER_KEY)
    rotated = RequestStateSecurity(keys=[KEY, OTHER_KEY])
    assert rotated.open(old.seal("s", **BOUND), **BOUND) == "s"
    sealed_new = rotated.seal("t", **BOUND)
    assert RequestStateSecurity(key=KEY).open(sealed_new, **BOUND) == "t"
    with pytest.raises(InvalidRequestStateError):
        old.open(sealed_new, **BOUND)
    with pytest.raises(InvalidRequestStateError):
        RequestStateSecurity(keys=[KEY]).open(old.seal("s", **BOUND), **BOUND)


@pytest.mark.feature("MRTR-10")
def test_every_tamper_mismatch_and_malformation_fails_the_same_way(monkeypatch):
    security = RequestStateSecurity(key=KEY, ttl=30, audience="a")
    token = security.seal("s", **BOUND)
    flipped = token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:]
    forged_iv = AESGCM(KEY)
    not_an_object = "v1." + base64.urlsafe_b64encode(
        bytes(12) + forged_iv.encrypt(bytes(12), b"[1]", b"v1.")).decode().rstrip("=")
    wrong_aad = "v1." + base64.urlsafe_b64encode(
        bytes(12) + forged_iv.encrypt(bytes(12), b"{}", b"v2.")).decode().rstrip("=")
    bad = [flipped, token + "-TAMPERED", token.replace("v1.", "v2.", 1), "v1.", "v1.!!!!", "v1.AAAA",
           token[3:], "", 5, None, not_an_object, wrong_aad]
    for candidate in bad:
        with pytest.raises(InvalidRequestStateError) as caught:
            security.open(candidate, **BOUND)
        assert caught.value.code == -32602 and caught.value.message == "Invalid or expired requestState"
    mismatches = [{**BOUND, "method": "prompts/get"}, {**BOUND, "target": "other"},
                  {**BOUND, "arguments": {"a": "é"}}]
    for binding in mismatches:
        with pytest.raises(InvalidRequestStateError):
            security.open(token, **binding)
    with pytest.raises(InvalidRequestStateError):
        RequestStateSecurity(key=KEY, ttl=30, audience="b").open(token, **BOUND)
    with pytest.raises(InvalidRequestStateError):
        RequestStateSecurity(key=KEY, ttl=30).open(token, **BOUND)
    now = time.time()
    monkeypatch.setattr(request_state_module.time, "time", lambda: now + 31)
    with pytest.raises(InvalidRequestStateError):
        security.open(token, **BOUND)


@pytest.mark.feature("MRTR-09")
def test_keys_ttl_and_audience_come_from_settings_and_malformed_keys_fail_the_check(settings):
    settings.MCP_SERVER = {"REQUEST_STATE_KEYS": [b64(KEY), b64(OTHER_KEY)], "REQUEST_STATE_TTL": 9,
                           "REQUEST_STATE_AUDIENCE": "aud"}
    security = Server("s").request_state_security
    assert security.ttl == 9 and security.audience == "aud"
    assert RequestStateSecurity(key=KEY, audience="aud").open(security.seal("x", **BOUND), **BOUND) == "x"
    own = RequestStateSecurity(key=OTHER_KEY)
    assert Server("s", request_state_security=own).request_state_security is own
    with pytest.raises(TypeError):
        Server("s", request_state_security="key")
    assert not [m for m in checks.run_checks() if m.id == "mcp_server.E010"]
    settings.MCP_SERVER = {"REQUEST_STATE_KEYS": ["short", b64(KEY)], "REQUEST_STATE_TTL": 0}
    errors = [m for m in checks.run_checks() if m.id == "mcp_server.E010"]
    assert len(errors) == 2 and "REQUEST_STATE_KEYS[0]" in errors[0].msg and "TTL" in errors[1].msg
    assert all(m.level == checks.ERROR for m in errors)


# The 2026-07-28 wire, through the dispatcher ----------------------------------------------------

def modern_server(**options: Any) -> tuple[Server, list[dict]]:
    """Tools, a prompt and a resource that ask for a name, with their state; ``seen`` records
    what each run of a handler read from its context."""
    options.setdefault("request_state_security", RequestStateSecurity(key=KEY))
    server = Server("mrtr", ttl_ms=1000, cache_scope="public", **options)
    seen: list[dict] = []

    def ask(ctx: ServerContext, state: str | None = "round-1") -> Any:
        seen.append({"responses": ctx.input_responses, "state": ctx.request_state})
        answer = ctx.input_response("name")
        if answer is None:
            return InputRequiredResult({"name": ASK_NAME}, request_state=state)
        return f"Hello, {answer['content']['name']} ({ctx.request_state})"

    @server.define_tool(name="greet", input_schema={"type": "object"})
    def greet(arguments: dict, server_context: ServerContext) -> Any:
        return ask(server_context)

    @server.define_tool(name="structured", output_schema={"type": "object"})
    def structured(arguments: dict, server_context: ServerContext) -> Any:
        return ask(server_context, None)

    @server.define_tool(name="ask", input_schema={"type": "object"})
    def ask_any(arguments: dict, server_context: ServerContext) -> Any:
        seen.append({"responses": server_context.input_responses, "state": server_context.request_state})
        if server_context.input_responses:
            return "answered"
        return InputRequiredResult(arguments.get("requests"), request_state=arguments.get("state"))

    class Greeting(Prompt):
        name = "greeting"

        def template(self, args: dict, server_context: ServerContext) -> Any:
            value = ask(server_context)
            if isinstance(value, InputRequiredResult):
                return value
            return PromptResult(messages=[{"role": "user", "content": {"type": "text", "text": value}}])

    server.add_prompt(Greeting)

    @server.resource("test://greeting", name="greeting")
    def greeting_resource(server_context: ServerContext) -> Any:
        return ask(server_context)

    return server, seen


def envelope_meta(capabilities: dict | None = None) -> dict:
    return {PROTOCOL_VERSION_KEY: MODERN, CLIENT_INFO_KEY: {"name": "t", "version": "1"},
            CLIENT_CAPABILITIES_KEY: ALL_CAPABILITIES if capabilities is None else capabilities}


async def modern(server: Server, method: str, params: dict, *, capabilities: dict | None = None,
                 request_id: int = 1, check: bool = True) -> dict:
    """One modern request on its own enveloped session, both messages checked against the schema."""
    params = {**params, "_meta": envelope_meta(capabilities)}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    if check:
        check_client_message(message, MODERN)
    session = ServerSession(server)
    session.envelope = parse_envelope(params)
    response = await server.handle_async(message, session)
    if "result" in response and response["result"].get("resultType") == "input_required":
        validate(response, MODERN, "JSONRPCResultResponse")
        validate(response["result"], MODERN, "InputRequiredResult")
    elif "result" in response:
        # resultType stamping of complete results belongs to the modern request path.
        check_server_message({**response, "result": {"resultType": "complete", **response["result"]}},
                             MODERN, method)
    else:
        check_server_message(response, MODERN, method)
    return response


@pytest.mark.feature("MRTR-02", "MRTR-03", "MRTR-09")
async def test_a_tool_asks_and_the_retry_completes_with_the_plaintext_state():
    server, seen = modern_server()
    first = (await modern(server, "tools/call", {"name": "greet", "arguments": {"x": 1}}))["result"]
    assert set(first) == {"resultType", "inputRequests", "requestState"}
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"name": ASK_NAME}
    assert first["requestState"].startswith("v1.") and "round-1" not in first["requestState"]
    retry = {"name": "greet", "arguments": {"x": 1}, "inputResponses": {"name": NAME_ANSWER},
             "requestState": first["requestState"]}
    second = await modern(server, "tools/call", retry, request_id=2)
    assert second["result"]["content"] == [{"type": "text", "text": "Hello, Ada (round-1)"}]
    assert seen == [{"responses": None, "state": None},
                    {"responses": {"name": NAME_ANSWER}, "state": "round-1"}]


@pytest.mark.feature("MRTR-02")
async def test_no_structured_content_fallback_and_no_cache_hints_or_contents_wrapper():
    server, _ = modern_server()
    tool = (await modern(server, "tools/call", {"name": "structured", "arguments": {}}))["result"]
    assert set(tool) == {"resultType", "inputRequests"}
    prompt = (await modern(server, "prompts/get", {"name": "greeting"}))["result"]
    assert set(prompt) == {"resultType", "inputRequests", "requestState"}
    read = (await modern(server, "resources/read", {"uri": "test://greeting"}))["result"]
    assert set(read) == {"resultType", "inputRequests", "requestState"}  # no ttlMs, no contents
    retry = {"uri": "test://greeting", "inputResponses": {"name": NAME_ANSWER},
             "requestState": read["requestState"]}
    done = (await modern(server, "resources/read", retry, request_id=2))["result"]
    assert done["contents"][0]["text"] == "Hello, Ada (round-1)" and done["ttlMs"] == 1000
    retry = {"name": "greeting", "inputResponses": {"name": NAME_ANSWER},
             "requestState": prompt["requestState"]}
    done = (await modern(server, "prompts/get", retry, request_id=3))["result"]
    assert done["messages"][0]["content"]["text"] == "Hello, Ada (round-1)"


@pytest.mark.feature("MRTR-04")
@pytest.mark.parametrize(("capabilities", "requests", "missing"), [
    ({}, {"a": ASK_NAME}, {"elicitation": {"form": {}}}),
    ({"elicitation": {"url": {}}}, {"a": ASK_NAME}, {"elicitation": {"form": {}}}),
    ({"elicitation": {}}, {"a": InputRequiredResult.url_elicitation("m", "https://x.example", "e")},
     {"elicitation": {"url": {}}}),
    ({"sampling": {}}, {"a": InputRequiredResult.sampling([], 5, tools=[{"name": "t", "inputSchema": {
        "type": "object"}}])}, {"sampling": {"tools": {}}}),
    ({"elicitation": {}}, {"a": InputRequiredResult.sampling([], 5), "b": InputRequiredResult.list_roots(),
                           "c": ASK_NAME}, {"sampling": {}, "roots": {}}),
])
async def test_embedded_requests_need_the_envelope_capabilities(capabilities, requests, missing):
    server, _ = modern_server()
    response = await modern(server, "tools/call", {"name": "ask", "arguments": {"requests": requests}},
                            capabilities=capabilities)
    validate(response, MODERN, "MissingRequiredClientCapabilityError")
    assert response["error"]["code"] == -32021
    assert response["error"]["data"] == {"requiredCapabilities": missing}


@pytest.mark.feature("MRTR-04")
async def test_a_bare_elicitation_capability_counts_as_form():
    server, _ = modern_server()
    response = await modern(server, "tools/call", {"name": "greet"}, capabilities={"elicitation": {}})
    assert response["result"]["resultType"] == "input_required"


@pytest.mark.feature("MRTR-05")
async def test_a_state_only_result_asks_the_client_to_retry_later():
    server, seen = modern_server()
    first = (await modern(server, "tools/call", {"name": "ask", "arguments": {"state": "busy"}}))["result"]
    assert set(first) == {"resultType", "requestState"}
    retry = {"name": "ask", "arguments": {"state": "busy"}, "requestState": first["requestState"]}
    second = (await modern(server, "tools/call", retry, request_id=2))["result"]
    assert second["resultType"] == "input_required" and seen[-1]["state"] == "busy"


@pytest.mark.feature("MRTR-10")
async def test_states_that_do_not_open_get_invalid_params():
    server, seen = modern_server()
    first = (await modern(server, "tools/call", {"name": "greet", "arguments": {"x": 1}}))["result"]
    state = first["requestState"]
    attempts = [
        {"name": "greet", "arguments": {"x": 1}, "requestState": state + "-TAMPERED"},
        {"name": "greet", "arguments": {"x": 2}, "requestState": state},  # other arguments
        {"name": "ask", "arguments": {"x": 1}, "requestState": state},  # another tool
        {"name": "greet", "arguments": {"x": 1}, "requestState": "round-1"},  # made up by the client
    ]
    runs = len(seen)
    for number, params in enumerate(attempts, start=2):
        response = await modern(server, "tools/call", {**params, "inputResponses": {"name": NAME_ANSWER}},
                                request_id=number)
        assert response["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
    prompt = await modern(server, "prompts/get", {"name": "greeting", "requestState": state}, request_id=9)
    assert prompt["error"]["code"] == -32602
    assert len(seen) == runs  # the handler never ran on a state it could not trust
    other_audience = Server("b", request_state_security=RequestStateSecurity(key=KEY, audience="b"))
    other_audience.add_tool(server.tools["greet"])
    response = await modern(other_audience, "tools/call",
                            {"name": "greet", "arguments": {"x": 1}, "requestState": state})
    assert response["error"]["code"] == -32602


@pytest.mark.feature("MRTR-10")
async def test_a_state_sealed_by_one_process_opens_on_another_with_the_same_key():
    worker_a, _ = modern_server(request_state_security=RequestStateSecurity(keys=[KEY]))
    worker_b, seen_b = modern_server(request_state_security=RequestStateSecurity(keys=[OTHER_KEY, KEY]))
    first = (await modern(worker_a, "tools/call", {"name": "greet"}))["result"]
    retry = {"name": "greet", "inputResponses": {"name": NAME_ANSWER}, "requestState": first["requestState"]}
    done = await modern(worker_b, "tools/call", retry, request_id=2)
    assert done["result"]["content"][0]["text"] == "Hello, Ada (round-1)"
    assert seen_b[-1]["state"] == "round-1"


@pytest.mark.feature("MRTR-09", "MRTR-10")
@pytest.mark.feature("MRTR-09", "MRTR-10")
def test_without_keys_they_are_derived_from_the_secret_key_and_its_fallbacks(settings):
    settings.MCP_SERVER = {}
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the deployment's secret", []
    sealed = Server("a").request_state_security.seal("x", **BOUND)
    # Another process of the deployment (same secret) opens it; another deployment does not.
    assert Server("b").request_state_security.open(sealed, **BOUND) == "x"
    settings.SECRET_KEY = "another deployment's secret"
    with pytest.raises(InvalidRequestStateError):
        Server("c").request_state_security.open(sealed, **BOUND)
    # Rotating SECRET_KEY keeps the old one in SECRET_KEY_FALLBACKS: its states still open.
    settings.SECRET_KEY_FALLBACKS = ["the deployment's secret"]
    rotated = Server("d").request_state_security
    assert rotated.open(sealed, **BOUND) == "x"
    assert Server("e").request_state_security.open(rotated.seal("y", **BOUND), **BOUND) == "y"
    # derived_keys() names them: the current secret's first.
    assert RequestStateSecurity(keys=request_state_module.derived_keys()).open(sealed, **BOUND) == "x"


async def test_without_any_key_a_state_is_never_sent_in_plaintext_nor_accepted(settings):
    settings.MCP_SERVER = {}
    settings.SECRET_KEY = ""  # (Django refuses to run so; a script may serve stdio without settings)
    reported: list[BaseException] = []
    server, _ = modern_server(request_state_security=None, configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append(exc)))
    response = await modern(server, "tools/call", {"name": "greet"})
    assert response["error"] == {"code": -32603, "message": "Internal error"}
    assert "REQUEST_STATE_KEYS" in str(reported[0])
    stateless = await modern(server, "tools/call", {"name": "structured"}, request_id=2)
    assert stateless["result"]["resultType"] == "input_required"  # no state: nothing to seal
    echoed = await modern(server, "tools/call", {"name": "greet", "requestState": "v1.AAAA"}, request_id=3)
    assert echoed["error"]["code"] == -32602


@pytest.mark.feature("MRTR-03")
async def test_input_responses_must_be_an_object_of_results_and_extra_keys_are_ignored():
    server, seen = modern_server()
    for number, responses in enumerate([None, {"name": 12345}, ["x"]], start=1):
        response = await modern(server, "tools/call", {"name": "structured", "inputResponses": responses},
                                request_id=number, check=False)
        assert response["error"]["code"] == -32602
    assert seen == []
    extra = {"name": NAME_ANSWER, "other": {"action": "accept", "content": {"x": 1}}}
    done = await modern(server, "tools/call", {"name": "structured", "inputResponses": extra}, request_id=9)
    assert done["result"]["content"][0]["text"] == "Hello, Ada (None)"
    wrong_key = await modern(server, "tools/call", {"name": "structured",
                                                    "inputResponses": {"wrong": NAME_ANSWER}}, request_id=10)
    assert wrong_key["result"]["resultType"] == "input_required"  # asked again, not an error


@pytest.mark.feature("MRTR-03")
async def test_input_response_reads_any_key_as_a_string():
    server = Server("keys", request_state_security=RequestStateSecurity(key=KEY))
    read: list[Any] = []

    @server.define_tool(name="numbered", input_schema={"type": "object"})
    def numbered(arguments: dict, server_context: ServerContext) -> Any:
        read.append((server_context.input_response(1), server_context.input_response("1"),
                     server_context.input_response("missing")))
        return "ok"

    await modern(server, "tools/call", {"name": "numbered", "inputResponses": {"1": NAME_ANSWER}})
    assert read == [(NAME_ANSWER, NAME_ANSWER, None)]


@pytest.mark.feature("MRTR-02")
async def test_a_resources_read_handler_may_ask_too():
    server = Server("hook", request_state_security=RequestStateSecurity(key=KEY), ttl_ms=5)

    @server.resources_read_handler
    def read(params: dict, server_context: ServerContext) -> Any:
        roots = server_context.input_response("roots")
        if roots is None:
            return InputRequiredResult({"roots": InputRequiredResult.list_roots()}, request_state="r")
        return f"{params['uri']} under {roots['roots'][0]['uri']} ({server_context.request_state})"

    first = (await modern(server, "resources/read", {"uri": "any://thing"}))["result"]
    assert first["inputRequests"] == {"roots": {"method": "roots/list", "params": {}}}
    retry = {"uri": "any://thing", "requestState": first["requestState"],
             "inputResponses": {"roots": {"roots": [{"uri": "file:///w"}]}}}
    done = (await modern(server, "resources/read", retry, request_id=2))["result"]
    assert done["contents"][0]["text"] == "any://thing under file:///w (r)"
    other_uri = {**retry, "uri": "any://else"}
    assert (await modern(server, "resources/read", other_uri, request_id=3))["error"]["code"] == -32602


@pytest.mark.feature("CFG-05")
async def test_instrumentation_says_when_a_handler_asked_for_input():
    recorded: list[dict] = []
    server, _seen = modern_server(configuration=Configuration(instrumentation_callback=recorded.append))
    first = (await modern(server, "tools/call", {"name": "greet", "arguments": {}}))["result"]
    retry = {"name": "greet", "arguments": {}, "inputResponses": {"name": NAME_ANSWER},
             "requestState": first["requestState"]}
    await modern(server, "tools/call", retry, request_id=2)
    assert [(data["method"], data.get("input_required")) for data in recorded] == [
        ("tools/call", True), ("tools/call", None)]
