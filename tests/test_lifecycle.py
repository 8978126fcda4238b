"""The initialize handshake and version negotiation, server side (LIFE-01 to LIFE-11)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from mcp_protocol import jsonrpc, versions
from mcp_protocol.errors import INVALID_PARAMS, INVALID_REQUEST
from mcp_server import (
    Configuration,
    ConfigurationError,
    Prompt,
    Resource,
    ResourceTemplate,
    Server,
    ServerSession,
    Tool,
    configure,
)

from .harness import CLIENT_INFO, InProcessClient, StdioServer
from .wire import check_server_message

HANDSHAKE = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
REVISIONS = ["2025-11-25", "2024-11-05"]
ICONS = [{"src": "https://example.test/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}]


def full_server(**overrides: Any) -> Server:
    """A server that sets every optional field of ``serverInfo`` and ``instructions``."""
    fields: dict[str, Any] = {
        "title": "Full Server", "version": "2.1.0", "description": "Serves everything",
        "icons": ICONS, "website_url": "https://example.test/", "instructions": "Be nice.",
    }
    fields.update(overrides)
    return Server("full", **fields)


def initialize_params(version: str = "2025-11-25", **overrides: Any) -> dict:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": dict(CLIENT_INFO), **overrides}


def initialize(client: InProcessClient, params: dict, request_id: Any = "init", **kw: Any) -> dict:
    return client.request("initialize", params, request_id=request_id, **kw)


# LIFE-01 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-01")
def test_initialize_result_carries_everything():
    client = InProcessClient(full_server(capabilities={"tools": {"listChanged": True}, "logging": {}}))
    response = initialize(client, initialize_params())  # checked against InitializeResult
    assert response["id"] == "init"
    assert response["result"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "serverInfo": {
            "name": "full", "version": "2.1.0", "title": "Full Server",
            "description": "Serves everything", "icons": ICONS, "websiteUrl": "https://example.test/",
        },
        "instructions": "Be nice.",
    }


@pytest.mark.feature("LIFE-01")
def test_initialize_answers_a_copy_of_the_capabilities():
    server = Server("copy", capabilities={"tools": {"listChanged": True}, "extensions": {"x": {"v": [1]}}})
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()}

    def capabilities() -> dict:
        answer = async_to_sync(server.handle_incoming_async)(jsonrpc.classify(message), ServerSession(server))
        return answer["result"]["capabilities"]

    first = capabilities()
    first["tools"]["listChanged"] = False  # what a middleware editing the result would do
    first["extensions"]["x"]["v"].append(2)
    assert capabilities() == {"tools": {"listChanged": True}, "extensions": {"x": {"v": [1]}}}


@pytest.mark.feature("LIFE-01")
@pytest.mark.parametrize("revision", HANDSHAKE)
def test_minimal_initialize_result(revision):
    client = InProcessClient(Server("minimal", version="0.0.1"), revision)
    result = client.initialize(revision)
    assert result["protocolVersion"] == revision
    assert result["serverInfo"] == {"name": "minimal", "version": "0.0.1"}
    assert "instructions" not in result
    assert isinstance(result["capabilities"], dict)


# LIFE-02 ----------------------------------------------------------------------------------------
BAD_PARAMS = [
    ("no params", None),
    ("params an array", ["2025-11-25", {}, CLIENT_INFO]),
    ("version missing", {"capabilities": {}, "clientInfo": CLIENT_INFO}),
    ("version a number", initialize_params(protocolVersion=20251125)),
    ("version null", initialize_params(protocolVersion=None)),
    ("capabilities missing", {"protocolVersion": "2025-11-25", "clientInfo": CLIENT_INFO}),
    ("capabilities a list", initialize_params(capabilities=[])),
    ("capabilities a string", initialize_params(capabilities="all")),
    ("clientInfo missing", {"protocolVersion": "2025-11-25", "capabilities": {}}),
    ("clientInfo a string", initialize_params(clientInfo="client")),
    ("clientInfo without name", initialize_params(clientInfo={"version": "1"})),
    ("clientInfo without version", initialize_params(clientInfo={"name": "c"})),
    ("clientInfo name not a string", initialize_params(clientInfo={"name": 5, "version": "1"})),
]


@pytest.mark.feature("LIFE-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("label, params", BAD_PARAMS, ids=[label for label, _ in BAD_PARAMS])
def test_bad_initialize_params_get_invalid_params(revision, label, params):
    server = Server("life")
    client = InProcessClient(server, revision)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    if params is not None:
        message["params"] = params
    response = client.raw(message)
    assert response["id"] == 1 and response["error"]["code"] == INVALID_PARAMS, response
    # A refused initialize leaves the session as it was: a good one still succeeds.
    assert not server.session.initialized and server.session.client_info is None
    assert client.initialize(revision)["protocolVersion"] == revision


@pytest.mark.feature("LIFE-02")
@pytest.mark.parametrize("params", ["2025-11-25", 3, True])
def test_initialize_params_not_an_object(params):
    client = InProcessClient(Server("life"))
    response = client.raw({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": params})
    assert response["id"] == 2 and response["error"]["code"] == INVALID_PARAMS


# LIFE-03 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-03")
@pytest.mark.parametrize("revision", HANDSHAKE)
def test_supported_handshake_version_is_echoed(revision):
    client = InProcessClient(Server("life"), revision)
    assert initialize(client, initialize_params(revision))["result"]["protocolVersion"] == revision


@pytest.mark.feature("LIFE-03")
@pytest.mark.parametrize("requested", ["2026-07-28", "2099-01-01", "2024-10-07", "1.0", "", "latest"])
def test_unknown_or_modern_version_is_counter_offered_the_latest(requested):
    server = Server("life")
    # The client message is valid in any revision; the answer is in the counter-offered one.
    client = InProcessClient(server, "2025-11-25")
    result = initialize(client, initialize_params(requested))["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert server.session.protocol_version == "2025-11-25"


@pytest.mark.feature("LIFE-03")
@pytest.mark.parametrize("pin", HANDSHAKE)
def test_counter_offer_is_the_pin(pin):
    for requested in ("2026-07-28", "2099-01-01"):
        client = InProcessClient(Server("life", configuration=Configuration(protocol_version=pin)), pin)
        assert initialize(client, initialize_params(requested))["result"]["protocolVersion"] == pin
    # Older supported versions are still echoed under a pin; newer ones get the pin.
    for requested in HANDSHAKE:
        expected = requested if requested <= pin else pin
        client = InProcessClient(Server("life", configuration=Configuration(protocol_version=pin)),
                                 expected)
        assert initialize(client, initialize_params(requested))["result"]["protocolVersion"] == expected


@pytest.mark.feature("LIFE-03")
def test_modern_version_is_never_negotiated_through_initialize():
    for pin in [None, *HANDSHAKE]:
        server = Server("life", configuration=Configuration(protocol_version=pin))
        client = InProcessClient(server, pin or "2025-11-25")
        negotiated = initialize(client, initialize_params("2026-07-28"))["result"]["protocolVersion"]
        assert negotiated not in versions.MODERN_VERSIONS
        assert negotiated == (pin or "2025-11-25")


@pytest.mark.feature("LIFE-03")
def test_negotiation_over_stdio():
    # Both processes start at once (each spends its first second or more importing Django).
    with StdioServer(revision="2025-11-25") as server, StdioServer(revision="2024-11-05") as older:
        response = server.request("initialize", initialize_params("2026-07-28"))
        assert response["result"]["protocolVersion"] == "2025-11-25"
        assert server.close() == 0
        assert older.initialize("2024-11-05")["protocolVersion"] == "2024-11-05"
        assert older.close() == 0


# LIFE-04 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-04")
@pytest.mark.parametrize("revision, kept", [
    ("2025-11-25", {"name", "version", "title", "websiteUrl", "description", "icons"}),
    ("2025-06-18", {"name", "version", "title", "websiteUrl"}),
    ("2025-03-26", {"name", "version"}),
    ("2024-11-05", {"name", "version"}),
])
def test_server_info_fields_depend_on_the_negotiated_version(revision, kept):
    client = InProcessClient(full_server(), revision)
    result = client.initialize(revision)
    assert set(result["serverInfo"]) == kept
    assert ("instructions" in result) == (revision != "2024-11-05")
    if "instructions" in result:
        assert result["instructions"] == "Be nice."


@pytest.mark.feature("LIFE-04")
def test_counter_offered_version_decides_the_server_info():
    # Pinned at 2025-06-18, a client asking for 2025-11-25 gets 2025-06-18's serverInfo.
    server = full_server(description=None, icons=None, configuration=pinned("2025-06-18"))
    client = InProcessClient(server, "2025-06-18")
    result = initialize(client, initialize_params("2025-11-25"))["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert set(result["serverInfo"]) == {"name", "version", "title", "websiteUrl"}


# LIFE-05 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-05")
@pytest.mark.parametrize("revision", REVISIONS)
def test_duplicate_initialize_is_refused_and_changes_nothing(revision):
    server = Server("life")
    client = InProcessClient(server, revision)
    first_info = {"name": "first", "version": "1.0"}
    client.initialize(revision, {"roots": {"listChanged": True}}, client_info=first_info)
    second = initialize(client, initialize_params(
        "2025-03-26", capabilities={"sampling": {}}, clientInfo={"name": "second", "version": "2.0"}))
    assert second["error"]["code"] == INVALID_REQUEST
    assert second["error"]["message"] == "Server already initialized"
    session = server.session
    assert session.client_info == first_info
    assert session.client_capabilities == {"roots": {"listChanged": True}}
    assert session.protocol_version == revision
    assert client.result("ping") == {}


@pytest.mark.feature("LIFE-05")
def test_duplicate_initialize_over_stdio():
    with StdioServer() as server:
        server.initialize()
        response = server.request("initialize", initialize_params("2024-11-05"))
        assert response["error"] == {"code": INVALID_REQUEST, "message": "Server already initialized"}
        assert server.request("ping")["result"] == {}
        assert server.close() == 0


# LIFE-06 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-06")
@pytest.mark.parametrize("revision", REVISIONS)
def test_initialize_without_an_id_gets_no_reply(revision):
    server = Server("life")
    client = InProcessClient(server, revision)
    # Not a valid client notification (hence raw), but it must be answered by silence.
    params = initialize_params(revision)
    assert client.raw({"jsonrpc": "2.0", "method": "initialize", "params": params}) is None
    assert client.raw({"jsonrpc": "2.0", "id": None, "method": "initialize",
                       "params": initialize_params(revision)}) is None
    # Nothing was kept: the session is still waiting for a real initialize.
    assert not server.session.initialized and server.session.client_info is None
    assert client.initialize(revision)["protocolVersion"] == revision


@pytest.mark.feature("LIFE-06")
def test_initialize_without_an_id_over_stdio():
    with StdioServer() as server:
        server.send({"jsonrpc": "2.0", "method": "initialize", "params": initialize_params()}, check=False)
        # The session is not initialized by it: a real initialize afterwards is accepted.
        response = server.request("initialize", initialize_params())
        assert response["result"]["protocolVersion"] == "2025-11-25"
        assert server.close() == 0


# LIFE-07 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-07")
@pytest.mark.parametrize("revision", REVISIONS)
def test_initialized_notification_is_accepted_silently(revision):
    server = Server("life")
    client = InProcessClient(server, revision)
    initialize(client, initialize_params(revision))
    assert client.notify("notifications/initialized") is None
    assert client.notify("notifications/initialized", {"_meta": {"k": "v"}}) is None
    assert server.session.initialized
    assert client.result("ping") == {}


@pytest.mark.feature("LIFE-07")
def test_initialized_notification_over_stdio_writes_nothing():
    with StdioServer() as server:
        server.request("initialize", initialize_params())
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send({"jsonrpc": "2.0", "id": 77, "method": "ping"})
        assert server.read() == {"jsonrpc": "2.0", "id": 77, "result": {}}
        assert server.close() == 0


# LIFE-08 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-08")
@pytest.mark.parametrize("revision", REVISIONS)
def test_client_info_and_capabilities_are_stored(revision):
    instrumented: list[dict] = []
    server = Server("life", configuration=Configuration(instrumentation_callback=instrumented.append))
    client = InProcessClient(server, revision)
    info = {"name": "acme-client", "version": "4.2"}
    if revision >= "2025-06-18":
        info["title"] = "Acme"
    capabilities = {"roots": {"listChanged": True}, "sampling": {}, "experimental": {"x": {}}}
    client.initialize(revision, capabilities, client_info=info)
    assert server.session.client == info
    assert server.session.client_info == info
    assert server.session.client_capabilities == capabilities
    assert server.client_capabilities == capabilities
    client.result("ping")
    initialize_data, ping_data = instrumented  # notifications are not instrumented
    assert initialize_data["method"] == "initialize"
    assert initialize_data["client"] == {"name": "acme-client", "version": "4.2"}
    assert ping_data["method"] == "ping"
    assert ping_data["client"] == {"name": "acme-client", "version": "4.2"}


@pytest.mark.feature("LIFE-08")
def test_client_info_is_per_session():
    server = Server("life")
    sessions = [ServerSession(server), ServerSession(server)]
    handle = async_to_sync(server.handle_async)
    for number, session in enumerate(sessions):
        response = handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params(
            capabilities={"roots": {}} if number else {},
            clientInfo={"name": f"client-{number}", "version": str(number)})}, session)
        check_server_message(response, "2025-11-25", "initialize")
    assert [s.client for s in sessions] == [{"name": "client-0", "version": "0"},
                                           {"name": "client-1", "version": "1"}]
    assert [s.client_capabilities for s in sessions] == [{}, {"roots": {}}]
    assert server.session.client is None


# LIFE-09 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-09")
@pytest.mark.parametrize("version", HANDSHAKE)
def test_pin_accepts_handshake_versions(version):
    assert Configuration(protocol_version=version).protocol_version == version
    configure(protocol_version=version)
    assert Server("life").configuration.protocol_version == version


@pytest.mark.feature("LIFE-09")
def test_pin_refuses_the_modern_version_with_a_migration_hint():
    for attempt in (lambda: Configuration(protocol_version="2026-07-28"),
                    lambda: configure(protocol_version="2026-07-28")):
        with pytest.raises(ConfigurationError) as raised:
            attempt()
        message = str(raised.value)
        assert "2026-07-28" in message and "server/discover" in message and "None" in message
    config = Configuration()
    with pytest.raises(ConfigurationError):
        config.protocol_version = "2026-07-28"
    assert config.protocol_version is None


@pytest.mark.feature("LIFE-09")
@pytest.mark.parametrize("version", ["2099-01-01", "2024-10-07", "", "latest", 20251125])
def test_pin_refuses_unknown_versions(version):
    with pytest.raises(ConfigurationError, match="protocol_version"):
        Configuration(protocol_version=version)
    with pytest.raises(ConfigurationError):
        configure(protocol_version=version)


@pytest.mark.feature("LIFE-09")
def test_none_resets_the_pin_to_the_latest_handshake_version():
    configure(protocol_version="2025-03-26")
    pinned = InProcessClient(Server("life"), "2025-03-26")
    assert initialize(pinned, initialize_params("2099-01-01"))["result"]["protocolVersion"] == "2025-03-26"
    # A server's own None overrides the global pin...
    reset = InProcessClient(Server("life", configuration=Configuration(protocol_version=None)))
    assert initialize(reset, initialize_params("2099-01-01"))["result"]["protocolVersion"] == "2025-11-25"
    # ...and configure(protocol_version=None) resets the global one.
    configure(protocol_version=None)
    again = InProcessClient(Server("life"))
    assert initialize(again, initialize_params("2099-01-01"))["result"]["protocolVersion"] == "2025-11-25"


# LIFE-10 ----------------------------------------------------------------------------------------
def pinned(version: str) -> Configuration:
    return Configuration(protocol_version=version)


def ref_tool() -> Tool:
    schema = {"$defs": {"word": {"type": "string"}}, "properties": {"w": {"$ref": "#/$defs/word"}}}
    return Tool.define(lambda arguments: "ok", name="ref_tool", input_schema=schema)


def titled_primitives() -> list[Any]:
    return [
        Tool.define(lambda arguments: "ok", name="titled", title="Titled tool"),
        Prompt.define(lambda args: "hi", name="titled", title="Titled prompt"),
        Resource(uri="file:///titled", name="titled", title="Titled resource"),
        ResourceTemplate(uri_template="file:///{name}", name="titled", title="Titled template"),
    ]


@pytest.mark.feature("LIFE-10")
@pytest.mark.parametrize("pin", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_description_and_ref_need_2025_11_25(pin):
    with pytest.raises(ConfigurationError, match="description"):
        Server("life", description="d", configuration=pinned(pin))
    with pytest.raises(ConfigurationError, match=r"\$ref"):
        Server("life", tools=[ref_tool()], configuration=pinned(pin))
    server = Server("life", configuration=pinned(pin))
    with pytest.raises(ConfigurationError, match=r"\$ref"):
        server.add_tool(ref_tool())
    assert "ref_tool" not in server.tools


@pytest.mark.feature("LIFE-10")
@pytest.mark.parametrize("pin", ["2025-03-26", "2024-11-05"])
def test_titles_and_website_need_2025_06_18(pin):
    with pytest.raises(ConfigurationError, match="title"):
        Server("life", title="T", configuration=pinned(pin))
    with pytest.raises(ConfigurationError, match="website_url"):
        Server("life", website_url="https://example.test/", configuration=pinned(pin))
    server = Server("life", configuration=pinned(pin))
    for primitive in titled_primitives():
        with pytest.raises(ConfigurationError, match="title"):
            server.register(primitive)
    assert not (server.tools or server.prompts or server.resources or server.resource_templates)
    with pytest.raises(ConfigurationError, match="title"):
        Server("life", tools=[titled_primitives()[0]], configuration=pinned(pin))


@pytest.mark.feature("LIFE-10")
def test_instructions_and_annotations_need_2025_03_26():
    with pytest.raises(ConfigurationError, match="instructions"):
        Server("life", instructions="Be nice.", configuration=pinned("2024-11-05"))
    annotated = Tool.define(lambda arguments: "ok", name="annotated", annotations={"read_only_hint": True})
    with pytest.raises(ConfigurationError, match="annotations"):
        Server("life", tools=[annotated], configuration=pinned("2024-11-05"))


@pytest.mark.feature("LIFE-10")
def test_each_gate_opens_at_its_version():
    annotated = Tool.define(lambda arguments: "ok", name="annotated", annotations={"read_only_hint": True})
    Server("life", instructions="Be nice.", tools=[annotated], configuration=pinned("2025-03-26"))
    Server("life", title="T", website_url="https://example.test/", tools=titled_primitives()[:1],
           configuration=pinned("2025-06-18")).register(titled_primitives()[1])
    Server("life", description="d", tools=[ref_tool()], configuration=pinned("2025-11-25"))
    # Unpinned, everything is allowed.
    full_server(tools=[ref_tool(), annotated, *titled_primitives()[:1]])


@pytest.mark.feature("LIFE-10")
def test_gates_follow_a_global_pin():
    configure(protocol_version="2024-11-05")
    with pytest.raises(ConfigurationError, match="instructions"):
        Server("life", instructions="Be nice.")
    # A server's own pin wins over the global one.
    Server("life", instructions="Be nice.", configuration=pinned("2025-03-26"))


# LIFE-11 ----------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-11")
def test_supported_version_tables():
    assert versions.STABLE_VERSIONS == ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert versions.MODERN_VERSIONS == ("2026-07-28",)
    assert versions.HANDSHAKE_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    derived = tuple(v for v in versions.STABLE_VERSIONS if v not in versions.MODERN_VERSIONS)
    assert derived == versions.HANDSHAKE_VERSIONS
    assert versions.LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert versions.DEFAULT_NEGOTIATED_VERSION == "2025-03-26"


@pytest.mark.feature("LIFE-11")
def test_handshake_table_is_derived_from_the_others():
    """The handshake table is computed from the stable and modern ones, not a second literal."""
    tree = ast.parse(Path(versions.__file__).read_text())
    assignment = next(
        node for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign | ast.Assign)
        and "HANDSHAKE_VERSIONS" in [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                                     if isinstance(t, ast.Name)]
    )
    names = {node.id for node in ast.walk(assignment.value) if isinstance(node, ast.Name)}
    assert {"STABLE_VERSIONS", "MODERN_VERSIONS"} <= names
    assert not any(isinstance(node, ast.Constant) and isinstance(node.value, str)
                   for node in ast.walk(assignment.value)), "no version literal in the derivation"
