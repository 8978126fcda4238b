"""Resources, templates and subscriptions on the server, handshake era (RES)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_server import (
    BlobContents,
    Capabilities,
    EmbeddedResource,
    PromptMessage,
    Resource,
    ResourceNotFoundError,
    ResourceTemplate,
    Server,
    ServerContext,
    ServerSession,
    TextContents,
)

from .harness import InProcessClient, StdioServer
from .wire import check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
SUBSCRIBE = {"resources": {"subscribe": True, "listChanged": True}, "tools": {}, "prompts": {}}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# Authoring styles --------------------------------------------------------------------------
class ReadmeResource(Resource):
    """A subclass with ``contents``."""

    uri = "docs://readme"
    title = "Read me"
    description = "What this server is"
    mime_type = "text/markdown"

    def contents(self) -> TextContents:
        return TextContents(uri=self.uri, text="# Hello", mime_type="text/markdown")


def readme_contents() -> TextContents:
    return TextContents(uri="docs://readme", text="# Hello", mime_type="text/markdown")


README_FIELDS = {"title": "Read me", "description": "What this server is", "mime_type": "text/markdown"}


def resource_subclass(server: Server) -> None:
    server.register(ReadmeResource)


def resource_define(server: Server) -> None:
    server.add_resource(Resource.define(readme_contents, uri="docs://readme", name="readme_resource",
                                        **README_FIELDS))


def resource_server_define(server: Server) -> None:
    server.define_resource(readme_contents, uri="docs://readme", name="readme_resource",
                           **README_FIELDS)


def resource_server_define_decorator(server: Server) -> None:
    @server.define_resource(uri="docs://readme", name="readme_resource", **README_FIELDS)
    def _contents() -> TextContents:
        return readme_contents()


def resource_decorator(server: Server) -> None:
    @server.resource("docs://readme", **README_FIELDS)
    def readme_resource() -> TextContents:
        return readme_contents()


RESOURCE_STYLES = {
    "subclass": resource_subclass,
    "Resource.define": resource_define,
    "server.define_resource": resource_server_define,
    "@server.define_resource": resource_server_define_decorator,
    "@server.resource": resource_decorator,
}


@pytest.mark.feature("RES-01", "RES-03")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("style", RESOURCE_STYLES)
def test_resource_authoring_styles_list_and_read_alike(make_client, revision, style):
    server = Server("r")
    RESOURCE_STYLES[style](server)
    client = make_client(server, revision=revision)
    assert client.result("resources/list") == {"resources": [{
        "uri": "docs://readme", "name": "readme_resource", "title": "Read me",
        "description": "What this server is", "mimeType": "text/markdown",
    }]}
    assert client.result("resources/read", {"uri": "docs://readme"}) == {"contents": [
        {"uri": "docs://readme", "mimeType": "text/markdown", "text": "# Hello"},
    ]}


@pytest.mark.feature("RES-01", "RES-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_plain_data_resource_is_listed_only(make_client, revision):
    listed = Resource(uri="file:///listed.txt", name="listed", mime_type="text/plain", size=12)
    assert listed.readable is False
    client = make_client(Server("r", resources=[listed]), revision=revision)
    assert client.result("resources/list") == {"resources": [
        {"uri": "file:///listed.txt", "name": "listed", "mimeType": "text/plain", "size": 12},
    ]}
    # Nothing serves reads here and there is no read handler: a read is an empty result.
    assert client.result("resources/read", {"uri": "file:///listed.txt"}) == {"contents": []}

    # Next to a readable resource, the listed-only one is not served by routing.
    client = make_client(Server("r", resources=[listed, ReadmeResource]), revision=revision)
    error = client.request("resources/read", {"uri": "file:///listed.txt"})["error"]
    assert error == {"code": INVALID_PARAMS, "message": "Resource not found: file:///listed.txt",
                     "data": {"uri": "file:///listed.txt"}}


@pytest.mark.feature("RES-01", "RES-03", "RES-05")
def test_subclasses_inherit_contents(make_client):
    class Base(Resource):
        uri = "mem://base"

        def contents(self) -> str:
            return f"served by {self.uri}"

    class Child(Base):
        uri = "mem://child"

    class Listed(Resource):
        uri = "mem://listed"

    class GrandChild(Listed):
        uri = "mem://grandchild"

    class Family(ResourceTemplate):
        uri_template = "family://{member}"

        def contents(self, member: str) -> str:
            return f"{self.name}: {member}"

    class Relatives(Family):
        uri_template = "relatives://{member}"

    assert Child().readable and Relatives().readable
    assert not Listed().readable and not GrandChild().readable
    client = make_client(Server("r", resources=[Base, Child, Listed, GrandChild],
                                resource_templates=[Family, Relatives]))
    assert client.result("resources/read", {"uri": "mem://child"})["contents"] == [
        {"uri": "mem://child", "text": "served by mem://child"}]
    assert client.result("resources/read", {"uri": "relatives://bob"})["contents"] == [
        {"uri": "relatives://bob", "text": "relatives: bob"}]
    assert client.request("resources/read", {"uri": "mem://grandchild"})["error"]["code"] == INVALID_PARAMS


@pytest.mark.feature("RES-01")
def test_resource_definition_errors():
    with pytest.raises(ValueError, match="uri"):
        class NoUri(Resource):
            def contents(self) -> str:
                return "x"
    with pytest.raises(ValueError, match="uri"):
        Resource(uri="", name="empty")
    with pytest.raises(ValueError, match="name"):
        Resource(uri="file:///x", name="")


# Templates in each style -------------------------------------------------------------------
class UserProfile(ResourceTemplate):
    uri_template = "users://{user_id}/profile"
    title = "User profile"
    description = "One user's profile"
    mime_type = "application/json"

    def contents(self, user_id: str) -> dict:
        return {"uri": f"users://{user_id}/profile", "mimeType": "application/json",
                "text": f'{{"id": "{user_id}"}}'}


def profile(user_id: str) -> dict:
    return {"uri": f"users://{user_id}/profile", "mimeType": "application/json",
            "text": f'{{"id": "{user_id}"}}'}


PROFILE_FIELDS = {"title": "User profile", "description": "One user's profile",
                  "mime_type": "application/json"}


def template_subclass(server: Server) -> None:
    server.register(UserProfile)


def template_define(server: Server) -> None:
    server.add_resource_template(ResourceTemplate.define(
        profile, uri_template="users://{user_id}/profile", name="user_profile", **PROFILE_FIELDS))


def template_server_define(server: Server) -> None:
    server.define_resource_template(profile, uri_template="users://{user_id}/profile",
                                    name="user_profile", **PROFILE_FIELDS)


def template_decorator(server: Server) -> None:
    @server.resource_template("users://{user_id}/profile", **PROFILE_FIELDS)
    def user_profile(user_id: str) -> dict:
        return profile(user_id)


TEMPLATE_STYLES = {
    "subclass": template_subclass,
    "ResourceTemplate.define": template_define,
    "server.define_resource_template": template_server_define,
    "@server.resource_template": template_decorator,
}


@pytest.mark.feature("RES-01", "RES-05", "RES-06")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("style", TEMPLATE_STYLES)
def test_template_authoring_styles_list_and_read_alike(make_client, revision, style):
    server = Server("r")
    TEMPLATE_STYLES[style](server)
    client = make_client(server, revision=revision)
    assert client.result("resources/templates/list") == {"resourceTemplates": [{
        "uriTemplate": "users://{user_id}/profile", "name": "user_profile", "title": "User profile",
        "description": "One user's profile", "mimeType": "application/json",
    }]}
    assert client.result("resources/list") == {"resources": []}, "templates are not resources"
    assert client.result("resources/read", {"uri": "users://42/profile"}) == {"contents": [
        {"uri": "users://42/profile", "mimeType": "application/json", "text": '{"id": "42"}'},
    ]}


@pytest.mark.feature("RES-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_templates_list_entry_with_every_field(make_client, revision):
    template = ResourceTemplate(
        uri_template="logs://{day}", name="daily_log", title="Daily log", description="Logs of a day",
        mime_type="text/plain", annotations={"audience": ["assistant"], "priority": 0.2},
        icons=[{"src": "https://example.com/log.svg", "mimeType": "image/svg+xml"}],
        meta={"com.example/retention": "30d"},
    )
    assert template.readable is False
    client = make_client(Server("r", resource_templates=[template]), revision=revision)
    assert client.result("resources/templates/list") == {"resourceTemplates": [{
        "uriTemplate": "logs://{day}", "name": "daily_log", "title": "Daily log",
        "description": "Logs of a day", "mimeType": "text/plain",
        "annotations": {"audience": ["assistant"], "priority": 0.2},
        "icons": [{"src": "https://example.com/log.svg", "mimeType": "image/svg+xml"}],
        "_meta": {"com.example/retention": "30d"},
    }]}


# resources/list entries --------------------------------------------------------------------
@pytest.mark.feature("RES-02")
@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18", "2024-11-05"])
def test_resources_list_entry_with_every_field(make_client, revision):
    # lastModified exists from 2025-06-18 on; the other fields in every revision.
    annotations = {"audience": ["user", "assistant"], "priority": 1}
    if revision >= "2025-06-18":
        annotations["last_modified"] = "2025-01-12T15:00:58Z"
    resource = Resource(
        uri="file:///report.pdf", name="report", title="Quarterly report", description="Q3",
        mime_type="application/pdf", size=2048, annotations=annotations,
        icons=[{"src": "https://example.com/pdf.png", "theme": "light"}],
        meta={"com.example/owner": "finance"},
    )
    expected_annotations = {"audience": ["user", "assistant"], "priority": 1}
    if revision >= "2025-06-18":
        expected_annotations["lastModified"] = "2025-01-12T15:00:58Z"
    client = make_client(Server("r", resources=[resource]), revision=revision)
    assert client.result("resources/list") == {"resources": [{
        "uri": "file:///report.pdf", "name": "report", "title": "Quarterly report",
        "description": "Q3", "mimeType": "application/pdf", "size": 2048,
        "annotations": expected_annotations,
        "icons": [{"src": "https://example.com/pdf.png", "theme": "light"}],
        "_meta": {"com.example/owner": "finance"},
    }]}


@pytest.mark.feature("RES-02")
def test_minimal_entry_and_class_name_default(make_client):
    class HTTPAccessLog(Resource):
        uri = "logs://access"

        def contents(self) -> str:
            return "GET /"

    client = make_client(Server("r", resources=[HTTPAccessLog]))
    assert client.result("resources/list") == {"resources": [
        {"uri": "logs://access", "name": "http_access_log"},
    ]}


@pytest.mark.feature("RES-02")
@pytest.mark.parametrize("annotations", [
    {"audience": ["robot"]},
    {"audience": "user"},
    {"priority": 1.5},
    {"priority": -0.1},
    {"priority": "high"},
    {"priority": True},
    "not a dict",
])
def test_invalid_annotations_raise(annotations):
    with pytest.raises(ValueError):
        Resource(uri="file:///a", name="a", annotations=annotations)
    with pytest.raises(ValueError):
        ResourceTemplate(uri_template="file:///{a}", name="a", annotations=annotations)
    with pytest.raises(ValueError):  # a subclass is checked when it is defined
        type("Annotated", (Resource,), {"uri": "file:///b", "annotations": annotations,
                                        "contents": lambda self: "b"})
    with pytest.raises(ValueError):
        type("AnnotatedTemplate", (ResourceTemplate,), {"uri_template": "file:///{b}",
                                                        "annotations": annotations})


@pytest.mark.feature("RES-02")
def test_valid_annotation_bounds():
    for priority in (0, 0.5, 1):
        assert Resource(uri="file:///a", name="a", annotations={"priority": priority}).annotations == {
            "priority": priority}
    assert Resource(uri="file:///a", name="a", annotations={"audience": []}).annotations == {
        "audience": []}


# Read routing and contents -----------------------------------------------------------------
@pytest.mark.feature("RES-03", "RES-09")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize(("returned", "expected"), [
    (TextContents(uri="mem://x", text="one object"), [{"uri": "mem://x", "text": "one object"}]),
    ({"uri": "mem://x", "text": "a plain dict"}, [{"uri": "mem://x", "text": "a plain dict"}]),
    ([TextContents(uri="mem://x", text="a", mime_type="text/plain"),
      {"uri": "mem://x#2", "blob": b64(b"\x00\xff"), "mimeType": "application/octet-stream"}],
     [{"uri": "mem://x", "mimeType": "text/plain", "text": "a"},
      {"uri": "mem://x#2", "mimeType": "application/octet-stream", "blob": b64(b"\x00\xff")}]),
    ("a string", [{"uri": "mem://x", "mimeType": "text/x-custom", "text": "a string"}]),
    (b"\x00\x01raw", [{"uri": "mem://x", "mimeType": "text/x-custom", "blob": b64(b"\x00\x01raw")}]),
    ({"contents": TextContents(uri="mem://x", text="full")}, [{"uri": "mem://x", "text": "full"}]),
    (None, []),
], ids=["object", "dict", "list", "str", "bytes", "full-result", "none"])
def test_read_result_is_normalized(make_client, revision, returned, expected):
    server = Server("r")
    server.define_resource(lambda: returned, uri="mem://x", name="x", mime_type="text/x-custom")
    client = make_client(server, revision=revision)
    assert client.result("resources/read", {"uri": "mem://x"}) == {"contents": expected}


@pytest.mark.feature("RES-03")
def test_read_routes_to_the_resource_of_that_uri(make_client):
    calls: list[str] = []
    server = Server("r")
    for name in ("a", "b", "c"):
        server.define_resource(lambda name=name: calls.append(name) or name, uri=f"mem://{name}", name=name)
    client = make_client(server)
    assert client.result("resources/read", {"uri": "mem://b"}) == {
        "contents": [{"uri": "mem://b", "text": "b"}]}
    assert calls == ["b"]


@pytest.mark.feature("RES-03", "RES-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_contents_get_the_server_context_when_they_ask(make_client, revision):
    seen: dict[str, Any] = {}

    class Mine(Resource):
        uri = "mem://mine"

        def contents(self, server_context: ServerContext) -> str:
            seen["subclass"] = server_context
            return "mine"

    class Owned(ResourceTemplate):
        uri_template = "mem://owned/{item}"

        async def contents(self, item: str, server_context: ServerContext) -> str:
            seen["template"] = (item, server_context)
            return item

    server = Server("r", resources=[Mine], resource_templates=[Owned], server_context={"user": "ada"})

    @server.resource("mem://decorated")
    async def decorated(server_context: ServerContext) -> str:
        seen["decorated"] = server_context
        return "decorated"

    @server.resource_template("mem://plain/{a}/{b}")
    def plain(a: str, b: str) -> str:
        seen["plain"] = (a, b)
        return a + b

    client = make_client(server, revision=revision)
    for uri in ("mem://mine", "mem://owned/7", "mem://decorated", "mem://plain/x/y"):
        client.result("resources/read", {"uri": uri})
    assert seen["plain"] == ("x", "y")
    assert seen["template"][0] == "7"
    for ctx in (seen["subclass"], seen["template"][1], seen["decorated"]):
        assert isinstance(ctx, ServerContext)
        assert ctx.method == "resources/read"
        assert ctx["user"] == "ada"


@pytest.mark.feature("RES-09")
@pytest.mark.parametrize("revision", REVISIONS)
def test_text_and_blob_contents_shapes(make_client, revision):
    server = Server("r")
    server.define_resource(lambda: [
        TextContents(uri="mem://t", text="no type"),
        TextContents(uri="mem://t", text="typed", mime_type="text/plain"),
        BlobContents(uri="mem://b", data=b64(b"abc")),
        BlobContents.from_bytes("mem://b", b"\x89PNG", "image/png"),
    ], uri="mem://all", name="all")
    contents = make_client(server, revision=revision).result("resources/read", {"uri": "mem://all"})
    assert contents == {"contents": [
        {"uri": "mem://t", "text": "no type"},
        {"uri": "mem://t", "mimeType": "text/plain", "text": "typed"},
        {"uri": "mem://b", "blob": b64(b"abc")},
        {"uri": "mem://b", "mimeType": "image/png", "blob": b64(b"\x89PNG")},
    ]}
    # Resource exposes the two contents classes under the names the Ruby SDK uses.
    assert Resource.TextContents is TextContents
    assert Resource.BlobContents is BlobContents


# Template matching -------------------------------------------------------------------------
@pytest.mark.feature("RES-04")
@pytest.mark.parametrize(("template", "uri", "expected"), [
    ("users://{user_id}/profile", "users://42/profile", {"user_id": "42"}),
    ("users://{user_id}/profile", "users://a-b.c_d~/profile", {"user_id": "a-b.c_d~"}),
    ("users://{user_id}/profile", "users:///profile", None),  # one or more characters
    ("users://{user_id}/profile", "users://4/2/profile", None),  # never a slash
    ("users://{user_id}/profile", "users://42/profile/extra", None),  # the whole URI
    ("users://{user_id}/profile", "xusers://42/profile", None),
    ("users://{user_id}/profile", "users://a%2Fb/profile", {"user_id": "a%2Fb"}),  # no decoding
    ("users://{user_id}/profile", "users://caf%C3%A9/profile", {"user_id": "caf%C3%A9"}),
    ("repo://{owner}/{name}/issues/{number}", "repo://octo/cat/issues/7",
     {"owner": "octo", "name": "cat", "number": "7"}),
    ("files://{+path}", "files://a/b", None),  # operator forms are literal text
    ("files://{+path}", "files://a", None),
    ("page://doc{#section}", "page://doc#intro", None),
    ("search://q{?term}", "search://q?term=x", None),
    ("data://a.b/{x}", "data://aXb/1", None),  # regex characters in the template are literal
    ("data://a.b/{x}", "data://a.b/1", {"x": "1"}),
])
def test_template_matching_rules(template, uri, expected):
    assert ResourceTemplate(uri_template=template, name="t").match(uri) == expected


@pytest.mark.feature("RES-04", "RES-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_matching_over_the_wire_and_exact_resources_first(make_client, revision):
    seen: list[tuple] = []
    server = Server("r")

    @server.resource_template("users://{user_id}/profile")
    def by_id(user_id: str) -> str:
        seen.append(("template", user_id))
        return f"user {user_id}"

    @server.resource("users://me/profile")
    def me() -> str:
        seen.append(("exact",))
        return "it is me"

    @server.resource_template("files://{+path}")
    def operator_form(**variables: str) -> str:
        seen.append(("operator", variables))
        return "never"

    client = make_client(server, revision=revision)
    assert client.result("resources/read", {"uri": "users://me/profile"})["contents"] == [
        {"uri": "users://me/profile", "text": "it is me"}]
    assert client.result("resources/read", {"uri": "users://a%20b/profile"})["contents"] == [
        {"uri": "users://a%20b/profile", "text": "user a%20b"}]
    for uri in ("users://4/2/profile", "files://a/b", "files://x"):
        error = client.request("resources/read", {"uri": uri})["error"]
        assert error == {"code": INVALID_PARAMS, "message": f"Resource not found: {uri}",
                         "data": {"uri": uri}}
    assert seen == [("exact",), ("template", "a%20b")]


# Unknown URIs and custom read handlers -----------------------------------------------------
@pytest.mark.feature("RES-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_unknown_uri(make_client, revision):
    for registered in ({"resources": [ReadmeResource]}, {"resource_templates": [UserProfile]}):
        client = make_client(Server("r", **registered), revision=revision)
        error = client.request("resources/read", {"uri": "nope://x"})["error"]
        assert error == {"code": INVALID_PARAMS, "message": "Resource not found: nope://x",
                         "data": {"uri": "nope://x"}}
    empty = make_client(Server("r"), revision=revision)
    assert empty.result("resources/read", {"uri": "nope://x"}) == {"contents": []}


@pytest.mark.feature("RES-07")
def test_read_needs_a_string_uri(make_client):
    client = make_client(Server("r", resources=[ReadmeResource]))
    for params in ({}, {"uri": 7}):
        assert client.request("resources/read", params, check=False)["error"]["code"] == INVALID_PARAMS


@pytest.mark.feature("RES-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_custom_read_handler_replaces_routing(make_client, revision):
    calls: list[tuple] = []
    server = Server("r", resources=[ReadmeResource], resource_templates=[UserProfile],
                    server_context={"tenant": "acme"})

    @server.resources_read_handler
    def read(params: dict, server_context: ServerContext) -> Any:
        calls.append((params["uri"], server_context["tenant"]))
        if params["uri"] == "missing://x":
            raise ResourceNotFoundError(params["uri"])
        if params["uri"] == "full://x":
            return {"contents": [{"uri": "full://x", "text": "full"}], "ttlMs": 60000,
                    "cacheScope": "public"}
        return [{"uri": params["uri"], "text": f"custom {params['uri']}"}]

    assert read is server.hooks.resources_read, "the decorator returns the handler"
    client = make_client(server, revision=revision)
    # A URI that routing would serve goes to the handler instead.
    assert client.result("resources/read", {"uri": "docs://readme"}) == {
        "contents": [{"uri": "docs://readme", "text": "custom docs://readme"}]}
    assert client.result("resources/read", {"uri": "users://1/profile"})["contents"][0]["text"] == (
        "custom users://1/profile")
    assert client.result("resources/read", {"uri": "full://x"}) == {
        "contents": [{"uri": "full://x", "text": "full"}], "ttlMs": 60000, "cacheScope": "public"}
    error = client.request("resources/read", {"uri": "missing://x"})["error"]
    assert error == {"code": INVALID_PARAMS, "message": "Resource not found: missing://x",
                     "data": {"uri": "missing://x"}}
    assert [c[0] for c in calls] == ["docs://readme", "users://1/profile", "full://x", "missing://x"]
    assert {c[1] for c in calls} == {"acme"}


@pytest.mark.feature("RES-08")
def test_read_handler_without_context_and_as_a_call(make_client):
    server = Server("r")
    server.resources_read_handler(lambda params: TextContents(uri=params["uri"], text="plain"))
    assert make_client(server).result("resources/read", {"uri": "any://thing"}) == {
        "contents": [{"uri": "any://thing", "text": "plain"}]}


# Context-dependent lists -------------------------------------------------------------------
@pytest.mark.feature("RES-10")
@pytest.mark.parametrize("revision", REVISIONS)
def test_resources_list_handler_is_paginated_and_called_once_per_page(make_client, revision):
    calls: list[dict] = []
    server = Server("r", page_size=2, ttl_ms=1000, server_context={"user": "ada"},
                    resources=[ReadmeResource])

    @server.resources_list_handler
    def list_for_user(params: dict, server_context: ServerContext) -> list:
        calls.append(dict(params))
        user = server_context["user"]
        return [Resource(uri=f"mem://{user}/{i}", name=f"{user}-{i}") for i in range(3)] + [
            {"uri": f"mem://{user}/dict", "name": "as-a-dict"}]

    client = make_client(server, revision=revision)
    first = client.result("resources/list")
    assert first == {"resources": [{"uri": "mem://ada/0", "name": "ada-0"},
                                   {"uri": "mem://ada/1", "name": "ada-1"}],
                     "nextCursor": "2", "ttlMs": 1000, "cacheScope": "private"}
    second = client.result("resources/list", {"cursor": "2"})
    assert second == {"resources": [{"uri": "mem://ada/2", "name": "ada-2"},
                                    {"uri": "mem://ada/dict", "name": "as-a-dict"}],
                      "ttlMs": 1000, "cacheScope": "private"}
    assert calls == [{}, {"cursor": "2"}], "called once per page, with the request's params"


@pytest.mark.feature("RES-10")
def test_resources_list_handler_without_context(make_client):
    server = Server("r")
    server.resources_list_handler(lambda params: [])
    client = make_client(server)
    assert client.result("resources/list") == {"resources": []}
    server.resources_list_handler(lambda params: None)
    assert client.result("resources/list") == {"resources": []}


# Subscriptions -----------------------------------------------------------------------------
@pytest.mark.feature("RES-11")
@pytest.mark.parametrize("revision", REVISIONS)
def test_subscribe_needs_the_capability(make_client, revision):
    called = []
    server = Server("r")  # the defaults do not declare resources.subscribe
    server.resources_subscribe_handler(lambda params: called.append(params))
    client = make_client(server, revision=revision)
    for method in ("resources/subscribe", "resources/unsubscribe"):
        error = client.request(method, {"uri": "mem://x"})["error"]
        assert error["code"] == METHOD_NOT_FOUND
        assert error["data"]["missingCapability"] == "resources.subscribe"
    assert called == []
    builder = Capabilities().support_resources().support_resources_subscribe()
    client = make_client(Server("r", capabilities=builder), revision=revision)
    assert client.result("resources/subscribe", {"uri": "mem://x"}) == {}


@pytest.mark.feature("RES-11")
@pytest.mark.parametrize("revision", REVISIONS)
def test_subscribe_and_unsubscribe_call_the_handlers(make_client, revision):
    events: list[tuple] = []
    server = Server("r", capabilities=SUBSCRIBE, server_context={"user": "ada"})

    @server.resources_subscribe_handler
    def subscribe(params: dict, server_context: ServerContext) -> dict:
        events.append(("subscribe", params["uri"], server_context["user"]))
        return {"_meta": {"com.example/subscription": "s-1"}, "dropped": True, "ttlMs": 5}

    @server.resources_unsubscribe_handler
    async def unsubscribe(params: dict) -> dict:
        events.append(("unsubscribe", params["uri"]))
        return {"extra": "dropped"}

    client = make_client(server, revision=revision)
    assert client.result("resources/subscribe", {"uri": "mem://x"}) == {
        "_meta": {"com.example/subscription": "s-1"}}
    assert server.session.subscriptions == {"mem://x"}
    assert client.result("resources/unsubscribe", {"uri": "mem://x"}) == {}
    assert server.session.subscriptions == set()
    assert events == [("subscribe", "mem://x", "ada"), ("unsubscribe", "mem://x")]


@pytest.mark.feature("RES-11")
@pytest.mark.parametrize("returned", [None, "text", 3, ["list"], {"_meta": "not a dict"}, {}])
def test_subscribe_results_other_than_meta_become_empty(make_client, returned):
    server = Server("r", capabilities=SUBSCRIBE)
    server.resources_subscribe_handler(lambda params: returned)
    assert make_client(server).result("resources/subscribe", {"uri": "mem://x"}) == {}


@pytest.mark.feature("RES-11")
@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("params", [{}, {"uri": 5}, {"uri": None}, {"uri": ["mem://x"]}])
def test_subscribe_needs_a_string_uri(make_client, method, params):
    called = []
    server = Server("r", capabilities=SUBSCRIBE)
    server.resources_subscribe_handler(lambda p: called.append(p))
    server.resources_unsubscribe_handler(lambda p: called.append(p))
    error = make_client(server).request(method, params, check=False)["error"]
    assert error["code"] == INVALID_PARAMS
    assert called == []


# resources/updated -------------------------------------------------------------------------
class Recorder:
    """An outbound that records what the session sends (see ``mcp_server.session.Outbound``)."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict, Any]] = []

    async def send(self, message: dict, *, related_request_id: Any = None) -> bool:
        self.sent.append((message, related_request_id))
        return True


class SessionServer:
    """What ``InProcessClient`` drives: the server, seen through one particular session."""

    def __init__(self, server: Server, session: ServerSession):
        self.server, self.session = server, session

    def handle(self, payload: Any) -> Any:
        return async_to_sync(self.server.handle_async)(payload, self.session)


@pytest.mark.feature("RES-12")
@pytest.mark.parametrize("revision", REVISIONS)
def test_notify_resources_updated_reaches_the_requesting_session_only(revision):
    server = Server("r", capabilities=SUBSCRIBE)
    returned: list[Any] = []

    @server.tool
    def touch(uri: str, server_context: ServerContext) -> str:
        returned.append(server_context.notify_resources_updated(uri))  # blocking in a plain def
        return "touched"

    @server.tool
    async def touch_async(uri: str, server_context: ServerContext) -> str:
        returned.append(await server_context.notify_resources_updated(uri))
        return "touched"

    recorders = [Recorder(), Recorder()]
    clients = []
    for recorder in recorders:
        client = InProcessClient(SessionServer(server, ServerSession(server, outbound=recorder)), revision)
        client.initialize()
        client.result("resources/subscribe", {"uri": "mem://doc"})
        clients.append(client)

    clients[0].result("tools/call", {"name": "touch", "arguments": {"uri": "mem://doc"}})
    clients[0].result("tools/call", {"name": "touch_async", "arguments": {"uri": "mem://other"}})
    expected = [
        ({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "mem://doc"}},
         None),
        ({"jsonrpc": "2.0", "method": "notifications/resources/updated",
          "params": {"uri": "mem://other"}}, None),
    ]
    assert recorders[0].sent == expected
    for message, _ in recorders[0].sent:
        check_server_message(message, revision)
    assert recorders[1].sent == [], "another session hears nothing"
    assert returned == [True, True]


@pytest.mark.feature("RES-12")
def test_notify_resources_updated_without_a_transport_reports_non_delivery(make_client):
    server = Server("r")

    @server.tool
    def touch(server_context: ServerContext) -> str:
        return "sent" if server_context.notify_resources_updated("mem://x") else "not sent"

    result = make_client(server).result("tools/call", {"name": "touch", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "not sent"}]


# Binary resources and embedded resources ---------------------------------------------------
@pytest.mark.feature("RES-15", "RES-09")
@pytest.mark.parametrize("revision", REVISIONS)
def test_blob_contents_round_trip(make_client, revision):
    raw = bytes(range(256)) * 3
    server = Server("r")
    server.define_resource(lambda: BlobContents.from_bytes("bin://all", raw, "application/octet-stream"),
                           uri="bin://all", name="all")
    server.define_resource(lambda: raw, uri="bin://bytes", name="bytes", mime_type="image/png")
    client = make_client(server, revision=revision)
    for uri, mime_type in (("bin://all", "application/octet-stream"), ("bin://bytes", "image/png")):
        [contents] = client.result("resources/read", {"uri": uri})["contents"]
        assert contents["mimeType"] == mime_type
        assert "text" not in contents
        assert base64.b64decode(contents["blob"], validate=True) == raw


@pytest.mark.feature("RES-15")
@pytest.mark.parametrize("revision", REVISIONS)
def test_embedded_resources_in_tool_results_and_prompts(make_client, revision):
    text = TextContents(uri="mem://notes", text="notes", mime_type="text/plain")
    blob = BlobContents.from_bytes("mem://img", b"\x89PNG", "image/png")
    server = Server("r")

    @server.tool
    def attach() -> list:
        return [EmbeddedResource(text), EmbeddedResource(blob, annotations={"audience": ["user"]})]

    server.define_prompt(lambda args: [PromptMessage("user", EmbeddedResource(blob))], name="show")
    client = make_client(server, revision=revision)
    result = client.result("tools/call", {"name": "attach", "arguments": {}})
    assert result["content"] == [
        {"type": "resource", "resource": {"uri": "mem://notes", "mimeType": "text/plain", "text": "notes"}},
        {"type": "resource", "resource": {"uri": "mem://img", "mimeType": "image/png",
                                          "blob": b64(b"\x89PNG")},
         "annotations": {"audience": ["user"]}},
    ]
    assert result["isError"] is False
    prompt = client.result("prompts/get", {"name": "show"})
    embedded = prompt["messages"][0]["content"]
    assert embedded["type"] == "resource"
    assert base64.b64decode(embedded["resource"]["blob"]) == b"\x89PNG"


@pytest.mark.feature("RES-03", "RES-05", "RES-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_demo_resources_over_stdio(revision):
    with StdioServer(revision=revision) as stdio:
        stdio.initialize()
        resources = stdio.request("resources/list")["result"]["resources"]
        assert {"uri": "demo://readme", "name": "readme", "title": "About this server",
                "mimeType": "text/plain"} in resources
        [readme] = stdio.request("resources/read", {"uri": "demo://readme"})["result"]["contents"]
        assert readme["mimeType"] == "text/plain" and "demo server" in readme["text"]
        [profile] = stdio.request("resources/read", {"uri": "demo://users/42/profile"})["result"]["contents"]
        assert profile["uri"] == "demo://users/42/profile" and '"id": "42"' in profile["text"]
        error = stdio.request("resources/read", {"uri": "demo://nothing"})["error"]
        assert error == {"code": INVALID_PARAMS, "message": "Resource not found: demo://nothing",
                         "data": {"uri": "demo://nothing"}}
        assert stdio.close() == 0
