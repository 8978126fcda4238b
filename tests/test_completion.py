"""``completion/complete`` on the server, handshake era (CMP)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_server import Capabilities, Prompt, PromptArgument, Server, ServerContext

from .harness import StdioServer

REVISIONS = ["2025-11-25", "2024-11-05"]
CAPABILITIES = {"completions": {}, "prompts": {}, "resources": {}}
PROMPT_REF = {"type": "ref/prompt", "name": "translate"}
ARGUMENT = {"name": "language", "value": "fr"}


class Translate(Prompt):
    arguments = [PromptArgument("language", required=True), PromptArgument("text", required=True)]

    def template(self, args: dict) -> str:
        return f"Translate {args['text']} to {args['language']}"


def completing_server(handler: Any = None, **options: Any) -> Server:
    server = Server("c", prompts=[Translate], capabilities=options.pop("capabilities", CAPABILITIES),
                    **options)
    server.define_resource(lambda: "x", uri="file:///readme.md", name="readme")
    server.define_resource_template(lambda user_id: user_id, uri_template="users://{user_id}",
                                    name="user")
    if handler is not None:
        server.completion_handler(handler)
    return server


def complete(client: Any, ref: dict = PROMPT_REF, argument: dict = ARGUMENT, **extra: Any) -> dict:
    return client.result("completion/complete", {"ref": ref, "argument": argument, **extra})


# Registration and capability ---------------------------------------------------------------
@pytest.mark.feature("CMP-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_completion_needs_the_declared_capability(make_client, revision):
    called = []
    server = Server("c", prompts=[Translate])  # defaults: no completions capability
    assert "completions" not in server.capabilities
    server.completion_handler(lambda params: called.append(params))
    client = make_client(server, revision=revision)
    response = client.request("completion/complete", {"ref": PROMPT_REF, "argument": ARGUMENT})
    assert response["error"]["code"] == METHOD_NOT_FOUND
    assert response["error"]["data"]["missingCapability"] == "completions"
    assert called == []


@pytest.mark.feature("CMP-01")
@pytest.mark.parametrize("revision", REVISIONS)
def test_completion_handler_gets_params_and_opt_in_context(make_client, revision):
    seen: list[tuple] = []
    server = completing_server(server_context={"locale": "en"})

    @server.completion_handler
    def suggest(params: dict, server_context: ServerContext) -> dict:
        seen.append((params, server_context))
        prefix = params["argument"]["value"]
        values = [v for v in ("french", "frisian", "german") if v.startswith(prefix)]
        return {"completion": {"values": values, "hasMore": False}}

    assert server.hooks.completion is suggest, "the decorator returns the handler"
    client = make_client(server, revision=revision)
    assert complete(client) == {"completion": {"values": ["french", "frisian"], "hasMore": False}}
    params, ctx = seen[0]
    assert params == {"ref": PROMPT_REF, "argument": ARGUMENT}
    assert isinstance(ctx, ServerContext)
    assert ctx["locale"] == "en"
    assert ctx.method == "completion/complete"


@pytest.mark.feature("CMP-01")
def test_completion_with_the_builder_without_context_and_async(make_client):
    server = completing_server(capabilities=Capabilities().support_prompts().support_completions())

    @server.completion_handler
    async def suggest(params: dict) -> dict:
        return {"completion": {"values": ["fr"], "total": 1, "hasMore": False}}

    assert complete(make_client(server)) == {"completion": {"values": ["fr"], "total": 1,
                                                            "hasMore": False}}


@pytest.mark.feature("CMP-01", "CMP-05")
def test_no_handler_gives_an_empty_completion(make_client):
    assert complete(make_client(completing_server())) == {"completion": {"values": [], "hasMore": False}}


# Params ------------------------------------------------------------------------------------
@pytest.mark.feature("CMP-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("params", [
    {"argument": ARGUMENT},
    {"ref": "ref/prompt", "argument": ARGUMENT},
    {"ref": {"name": "translate"}, "argument": ARGUMENT},
    {"ref": {"type": 7, "name": "translate"}, "argument": ARGUMENT},
    {"ref": PROMPT_REF},
    {"ref": PROMPT_REF, "argument": "language=fr"},
    {"ref": PROMPT_REF, "argument": {"value": "fr"}},
    {"ref": PROMPT_REF, "argument": {"name": "language"}},
    {"ref": PROMPT_REF, "argument": {"name": "language", "value": 3}},
    {"ref": PROMPT_REF, "argument": {"name": None, "value": "fr"}},
    {"ref": {"type": "ref/tool", "name": "translate"}, "argument": ARGUMENT},
    {"ref": {"type": "ref/other", "uri": "file:///readme.md"}, "argument": ARGUMENT},
], ids=["no-ref", "ref-not-object", "no-ref-type", "ref-type-not-string", "no-argument",
        "argument-not-object", "no-argument-name", "no-argument-value", "value-not-string",
        "name-not-string", "ref-tool", "ref-other"])
def test_invalid_params(make_client, revision, params):
    called = []
    client = make_client(completing_server(lambda p: called.append(p)), revision=revision)
    error = client.request("completion/complete", params, check=False)["error"]
    assert error["code"] == INVALID_PARAMS
    assert called == []


@pytest.mark.feature("CMP-02")
def test_ref_type_error_names_the_allowed_types(make_client):
    client = make_client(completing_server())
    error = client.request("completion/complete", {
        "ref": {"type": "ref/tool", "name": "x"}, "argument": ARGUMENT}, check=False)["error"]
    assert "ref/prompt" in error["message"] and "ref/resource" in error["message"]


# References --------------------------------------------------------------------------------
@pytest.mark.feature("CMP-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_references_must_exist(make_client, revision):
    called = []
    client = make_client(completing_server(lambda p: called.append(p["ref"]) or {
        "completion": {"values": ["ok"]}}), revision=revision)

    error = client.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "nope"}, "argument": ARGUMENT})["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"].startswith("Prompt not found")
    for uri in ("file:///other.md", "users://42"):  # a concrete URI is not the template itself
        error = client.request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": uri}, "argument": ARGUMENT})["error"]
        assert error["code"] == INVALID_PARAMS
        assert error["data"] == {"uri": uri}
    assert called == []

    # Known prompt, resource URI and template uriTemplate all reach the handler.
    known = [PROMPT_REF, {"type": "ref/resource", "uri": "file:///readme.md"},
             {"type": "ref/resource", "uri": "users://{user_id}"}]
    for ref in known:
        assert complete(client, ref=ref) == {"completion": {"values": ["ok"], "hasMore": False}}
    assert called == known


# The 100-value cap and normalization -------------------------------------------------------
@pytest.mark.feature("CMP-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_more_than_100_values_are_truncated(make_client, revision):
    values = [f"v{i}" for i in range(150)]
    client = make_client(completing_server(lambda p: {"completion": {"values": values}}),
                         revision=revision)
    result = complete(client)["completion"]
    assert result == {"values": values[:100], "total": 150, "hasMore": True}


@pytest.mark.feature("CMP-04")
def test_handler_total_wins_and_the_cap_boundary(make_client):
    server = completing_server()
    returned: dict[str, Any] = {}
    server.completion_handler(lambda p: {"completion": returned})
    client = make_client(server)

    returned.update(values=[str(i) for i in range(101)], total=5000)
    assert complete(client)["completion"] == {"values": [str(i) for i in range(100)], "total": 5000,
                                              "hasMore": True}
    returned.clear()
    returned.update(values=[str(i) for i in range(100)])
    assert complete(client)["completion"] == {"values": [str(i) for i in range(100)], "hasMore": False}
    returned.update(hasMore=True, total=250)
    assert complete(client)["completion"] == {"values": [str(i) for i in range(100)], "total": 250,
                                              "hasMore": True}


@pytest.mark.feature("CMP-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("returned", [
    None, "french", ["french"], 42, {}, {"values": ["french"]}, {"completion": None},
    {"completion": ["french"]}, {"completion": {"values": "french"}}, {"completion": {}},
], ids=["none", "str", "list", "int", "empty-dict", "no-completion-key", "completion-none",
        "completion-list", "values-not-list", "completion-without-values"])
def test_malformed_handler_results_become_empty(make_client, revision, returned):
    client = make_client(completing_server(lambda p: returned), revision=revision)
    assert complete(client) == {"completion": {"values": [], "hasMore": False}}


@pytest.mark.feature("CMP-05")
def test_total_is_omitted_when_absent(make_client):
    client = make_client(completing_server(lambda p: {"completion": {"values": ["a", "b"]}}))
    assert complete(client) == {"completion": {"values": ["a", "b"], "hasMore": False}}


# Context arguments -------------------------------------------------------------------------
@pytest.mark.feature("CMP-06")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18"])  # context exists since 2025-06-18
def test_context_arguments_reach_the_handler(make_client, revision):
    seen: list[dict] = []

    def suggest(params: dict) -> dict:
        seen.append(params)
        language = params.get("context", {}).get("arguments", {}).get("language")
        values = {"fr": ["bonjour", "bonsoir"], "de": ["hallo"]}.get(language, [])
        prefix = params["argument"]["value"]
        return {"completion": {"values": [v for v in values if v.startswith(prefix)]}}

    client = make_client(completing_server(suggest), revision=revision)
    result = complete(client, argument={"name": "text", "value": "bon"},
                      context={"arguments": {"language": "fr"}})
    assert result == {"completion": {"values": ["bonjour", "bonsoir"], "hasMore": False}}
    assert seen[0]["context"] == {"arguments": {"language": "fr"}}
    assert complete(client, argument={"name": "text", "value": "h"},
                    context={"arguments": {"language": "de"}})["completion"]["values"] == ["hallo"]


@pytest.mark.feature("CMP-01", "CMP-03")
@pytest.mark.parametrize("revision", REVISIONS)
def test_demo_completion_over_stdio(revision):
    with StdioServer(revision=revision) as stdio:
        assert "completions" in stdio.initialize()["capabilities"]
        result = stdio.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "greeting"},
            "argument": {"name": "language", "value": "f"}})["result"]
        assert result == {"completion": {"values": ["french"], "hasMore": False}}
        error = stdio.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}})["error"]
        assert error["code"] == INVALID_PARAMS
        assert stdio.close() == 0
