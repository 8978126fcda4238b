"""``ttlMs`` / ``cacheScope`` cache hints on handshake-era results (CACHE, SEP-2549)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_server import Prompt, Resource, ResourceTemplate, Server, TextContents, Tool

REVISIONS = ["2025-11-25", "2024-11-05"]
CACHEABLE = ["tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"]


def params_for(method: str) -> dict | None:
    return {"uri": "mem://doc"} if method == "resources/read" else None


def server_with_everything(**options: Any) -> Server:
    server = Server(
        "cached",
        tools=[Tool.define(lambda args: "x", name="t")],
        prompts=[Prompt.define(lambda args: "x", name="p")],
        resource_templates=[ResourceTemplate(uri_template="mem://t/{x}", name="t")],
        **options,
    )
    server.define_resource(lambda: TextContents(uri="mem://doc", text="doc"), uri="mem://doc", name="doc")
    return server


# The result of each cacheable method without any hint: what legacy clients always got.
# (The tool entry's own shape belongs to the TOOL tests; it is taken from the tool.)
PLAIN_RESULTS = {
    "tools/list": {"tools": [Tool.define(lambda args: "x", name="t").to_dict()]},
    "prompts/list": {"prompts": [{"name": "p", "arguments": []}]},
    "resources/list": {"resources": [{"uri": "mem://doc", "name": "doc"}]},
    "resources/templates/list": {"resourceTemplates": [{"uriTemplate": "mem://t/{x}", "name": "t"}]},
    "resources/read": {"contents": [{"uri": "mem://doc", "text": "doc"}]},
}


# Construction ------------------------------------------------------------------------------
@pytest.mark.feature("CACHE-01")
@pytest.mark.parametrize("ttl_ms", [-1, 1.5, "1000", True, False, [1000], float("inf")])
def test_invalid_ttl_ms_raises(ttl_ms):
    with pytest.raises(ValueError, match="ttl_ms"):
        Server("cached", ttl_ms=ttl_ms)


@pytest.mark.feature("CACHE-01")
@pytest.mark.parametrize("cache_scope", ["shared", "PUBLIC", "", 1, True, ["public"]])
def test_invalid_cache_scope_raises(cache_scope):
    with pytest.raises(ValueError, match="cache_scope"):
        Server("cached", cache_scope=cache_scope)


@pytest.mark.feature("CACHE-01")
@pytest.mark.parametrize(("ttl_ms", "cache_scope"), [
    (0, "public"), (5000, "private"), (None, None), (10**12, None), (None, "public"),
])
def test_valid_hints_are_kept(ttl_ms, cache_scope):
    server = Server("cached", ttl_ms=ttl_ms, cache_scope=cache_scope)
    assert (server.ttl_ms, server.cache_scope) == (ttl_ms, cache_scope)


# Legacy opt-in -----------------------------------------------------------------------------
@pytest.mark.feature("CACHE-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", CACHEABLE)
def test_without_hints_results_are_unchanged(make_client, revision, method):
    client = make_client(server_with_everything(), revision=revision)
    message = {"jsonrpc": "2.0", "id": 41, "method": method}
    if params_for(method) is not None:
        message["params"] = params_for(method)
    text = client.raw_json(json.dumps(message))
    assert text == {"jsonrpc": "2.0", "id": 41, "result": PLAIN_RESULTS[method]}
    raw = client.server.handle_json(json.dumps({**message, "id": 42}))
    assert "ttlMs" not in raw and "cacheScope" not in raw
    assert raw == json.dumps({"jsonrpc": "2.0", "id": 42, "result": PLAIN_RESULTS[method]},
                             separators=(",", ":"))


@pytest.mark.feature("CACHE-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", CACHEABLE)
@pytest.mark.parametrize(("options", "hints"), [
    ({"ttl_ms": 60000}, {"ttlMs": 60000, "cacheScope": "private"}),
    ({"cache_scope": "public"}, {"ttlMs": 0, "cacheScope": "public"}),
    ({"cache_scope": "private"}, {"ttlMs": 0, "cacheScope": "private"}),
    ({"ttl_ms": 0}, {"ttlMs": 0, "cacheScope": "private"}),
    ({"ttl_ms": 1500, "cache_scope": "public"}, {"ttlMs": 1500, "cacheScope": "public"}),
], ids=["ttl-only", "public-only", "private-only", "zero-ttl", "both"])
def test_either_hint_stamps_both(make_client, revision, method, options, hints):
    client = make_client(server_with_everything(**options), revision=revision)
    assert client.result(method, params_for(method)) == {**PLAIN_RESULTS[method], **hints}


@pytest.mark.feature("CACHE-02")
@pytest.mark.parametrize("method", CACHEABLE[:4])
def test_every_page_carries_the_hints(make_client, method):
    server = Server(
        "cached", ttl_ms=10, page_size=1,
        tools=[Tool.define(lambda args: "x", name=f"t{i}") for i in range(2)],
        prompts=[Prompt.define(lambda args: "x", name=f"p{i}") for i in range(2)],
        resources=[Resource(uri=f"mem://{i}", name=f"r{i}") for i in range(2)],
        resource_templates=[ResourceTemplate(uri_template=f"mem://{i}/{{x}}", name=f"t{i}")
                            for i in range(2)],
    )
    client = make_client(server)
    first = client.result(method)
    second = client.result(method, {"cursor": first["nextCursor"]})
    for page in (first, second):
        assert (page["ttlMs"], page["cacheScope"]) == (10, "private")


@pytest.mark.feature("CACHE-02")
@pytest.mark.parametrize("revision", REVISIONS)
def test_other_results_never_carry_hints(make_client, revision):
    server = server_with_everything(ttl_ms=1000, cache_scope="public",
                                    capabilities={"tools": {}, "prompts": {}, "resources": {},
                                                  "completions": {}})
    client = make_client(server, revision=revision)
    others = [
        client.result("tools/call", {"name": "t", "arguments": {}}),
        client.result("prompts/get", {"name": "p"}),
        client.result("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"},
                                              "argument": {"name": "a", "value": ""}}),
        client.result("ping"),
    ]
    for result in others:
        assert "ttlMs" not in result and "cacheScope" not in result, result


# Values already in a result win ------------------------------------------------------------
@pytest.mark.feature("CACHE-04", "RES-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_read_handler_hints_win(make_client, revision):
    server = Server("cached", ttl_ms=100, cache_scope="private")

    @server.resources_read_handler
    def read(params: dict) -> dict:
        result: dict[str, Any] = {"contents": [{"uri": params["uri"], "text": "x"}]}
        if params["uri"] == "mem://ttl":
            result["ttlMs"] = 5000
        if params["uri"] == "mem://both":
            result.update(ttlMs=0, cacheScope="public")
        return result

    client = make_client(server, revision=revision)
    assert client.result("resources/read", {"uri": "mem://ttl"}) == {
        "contents": [{"uri": "mem://ttl", "text": "x"}], "ttlMs": 5000, "cacheScope": "private"}
    assert client.result("resources/read", {"uri": "mem://both"}) == {
        "contents": [{"uri": "mem://both", "text": "x"}], "ttlMs": 0, "cacheScope": "public"}
    assert client.result("resources/read", {"uri": "mem://none"}) == {
        "contents": [{"uri": "mem://none", "text": "x"}], "ttlMs": 100, "cacheScope": "private"}


@pytest.mark.feature("CACHE-04")
@pytest.mark.parametrize("revision", REVISIONS)
def test_contents_returning_a_full_result_keep_their_hints(make_client, revision):
    server = Server("cached", cache_scope="public")
    server.define_resource(lambda: {"contents": TextContents(uri="mem://a", text="a"), "ttlMs": 5000},
                           uri="mem://a", name="a")
    server.define_resource_template(
        lambda x: {"contents": [{"uri": f"mem://t/{x}", "text": x}], "cacheScope": "private"},
        uri_template="mem://t/{x}", name="t")
    client = make_client(server, revision=revision)
    assert client.result("resources/read", {"uri": "mem://a"}) == {
        "contents": [{"uri": "mem://a", "text": "a"}], "ttlMs": 5000, "cacheScope": "public"}
    assert client.result("resources/read", {"uri": "mem://t/1"}) == {
        "contents": [{"uri": "mem://t/1", "text": "1"}], "ttlMs": 0, "cacheScope": "private"}
