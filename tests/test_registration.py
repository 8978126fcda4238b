"""Registration the Django way: each app's ``mcp.py`` and the ``MCP_SERVER`` setting shape the default server.

Every test that rebuilds the default server puts the original object back afterwards
(``default_server_restored``), so the rest of the suite sees the server it started with.
"""

from __future__ import annotations

import base64
import sys
from collections import defaultdict
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils.module_loading import import_string

import mcp_server
from mcp_server import ConfigurationError, RequestStateSecurity, Server, configure, get_server, site
from mcp_server.http.shared_state import LocalState, RedisState
from mcp_server.settings import DEFAULTS, mcp_settings

from .harness import InProcessClient, StdioServer

REVISIONS = ["2025-11-25", "2024-11-05"]
DEMO = settings.MCP_SERVER
TEST_APP_MODULE = "tests.stdio_app.mcp"

# Hooks named by dotted path in MCP_SERVER; each records what it was given.
CALLS: dict[str, list[Any]] = defaultdict(list)


def record_exception(exc: BaseException, context: dict) -> None:
    CALLS["exception_reporter"].append((exc, context))


async def record_around(data: dict, call_next: Any) -> None:
    CALLS["around_before"].append(dict(data))
    await call_next()
    CALLS["around_after"].append(dict(data))


def record_instrumentation(data: dict) -> None:
    CALLS["instrumentation_callback"].append(dict(data))


def global_reporter(exc: BaseException, context: dict) -> None:
    CALLS["global_reporter"].append((exc, context))


class CustomServer(Server):
    """A project's own Server subclass, named by MCP_SERVER["SERVER_CLASS"]."""


HERE = __name__  # "tests.test_registration": the prefix of the dotted paths above


@pytest.fixture
def default_server_restored():
    """Leave the global default server exactly as the test found it."""
    with site._lock:
        saved = site._default
    CALLS.clear()
    test_app_imported = TEST_APP_MODULE in sys.modules
    yield saved
    with site._lock:
        site._default = saved
    if not test_app_imported:
        sys.modules.pop(TEST_APP_MODULE, None)
    CALLS.clear()


def demo_with(**overrides: Any) -> dict:
    return {**DEMO, **overrides}


def call_tool(client: InProcessClient, name: str, arguments: dict | None = None) -> dict:
    return client.request("tools/call", {"name": name, "arguments": arguments or {}})


# --- Autodiscovery of mcp.py ---------------------------------------------------------------------

def test_installed_apps_mcp_modules_were_imported_at_start_up():
    assert "project.demo.mcp" in sys.modules
    server = get_server()
    assert {"echo", "add"} <= set(server.tools)
    assert "greeting" in server.prompts
    assert "demo://readme" in server.resources
    assert "demo://users/{user_id}/profile" in server.resource_templates
    assert server.hooks.completion is sys.modules["project.demo.mcp"].complete
    assert server.name == DEMO["NAME"]
    # An app without an mcp.py (django.contrib.auth) is simply skipped.
    assert "django.contrib.auth.mcp" not in sys.modules


def test_declarations_of_an_app_reach_the_default_server_at_start_up():
    """A real start-up: the test app's mcp.py is found next to the demo's, with no import anywhere."""
    with StdioServer(env={"DJANGO_SETTINGS_MODULE": "tests.stdio_settings"}) as server:
        server.initialize()
        names = [tool["name"] for tool in server.request("tools/list")["result"]["tools"]]
        assert names == ["echo", "add", "slow_count", "confirm_action", "arrange_meeting", "delete_note",
                         "diagnose", "count_in_background", "ticket_list", "ticket_retrieve",
                         "ticket_create", "ticket_partial_update", "ticket_destroy", "ticket_close",
                         "close_tickets", "query_records",
                         "sleepy", "announce",
                         "ask_client", "log_every_level", "wait_for_cancel", "progress_then_wait_for_cancel",
                         "define_extra_tool",
                         "touch_resource", "background_job", "idempotent_job", "task_job",
                         "where_am_i", "background_meeting", "background_confirm_action",
                         "background_confirm", "shape_registry", "define_skill", "background_touch",
                         "log_line",
                         "background_log_line"]
        assert server.close() == 0


def test_an_app_added_to_installed_apps_is_autodiscovered(default_server_restored):
    with override_settings(MCP_SERVER=demo_with()):  # a fresh default server for this test
        fresh = get_server()
        assert fresh is not default_server_restored and "sleepy" not in fresh.tools
        with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.stdio_app"]):
            assert TEST_APP_MODULE in sys.modules
            assert {"echo", "add", "sleepy", "announce"} <= set(get_server().tools)
            assert get_server() is fresh
    assert "sleepy" not in get_server().tools  # rebuilt from the original apps


def test_decorators_register_onto_the_default_server(default_server_restored):
    with override_settings(MCP_SERVER=demo_with()):

        @mcp_server.tool
        def shout(text: str) -> str:
            """Upper-case the text."""
            return text.upper()

        @mcp_server.prompt
        def haiku(topic: str) -> str:
            return f"Write a haiku about {topic}."

        @mcp_server.resource("demo://motd", name="motd", mime_type="text/plain")
        def motd() -> str:
            return "hello"

        server = get_server()
        client = InProcessClient(server)
        client.initialize()
        assert call_tool(client, "shout", {"text": "hi"})["result"]["content"] == [
            {"type": "text", "text": "HI"}
        ]
        assert "haiku" in server.prompts
        contents = client.result("resources/read", {"uri": "demo://motd"})["contents"]
        assert contents[0]["text"] == "hello"
    assert "shout" not in get_server().tools


@pytest.mark.feature("CFG-09")
def test_autodiscover_false_builds_an_empty_default_server(default_server_restored):
    with override_settings(MCP_SERVER=demo_with(AUTODISCOVER=False)):
        server = get_server()
        assert server.tools == {} and server.prompts == {}
        # Skill folders are found as templates are, mcp.py or not: only the demo skill's files.
        assert all(uri.startswith("skill://note-keeping/") for uri in server.resources)
        assert server.name == DEMO["NAME"]
    assert "echo" in get_server().tools


# --- MCP_SERVER shapes the default server ---------------------------------------------------------

IDENTITY = {
    "REGISTRY_IN_DATABASE": False,  # no database in this module's tests (see tests/settings.py)
    "NAME": "settings-server",
    "TITLE": "From settings",
    "VERSION": "9.8.7",
    "DESCRIPTION": "Built from MCP_SERVER",
    "INSTRUCTIONS": "Use the settings.",
    "WEBSITE_URL": "https://example.com/mcp",
    "ICONS": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}],
    "CAPABILITIES": {"tools": {"listChanged": True}, "logging": {}},
    "PAGE_SIZE": 1,
    "TTL_MS": 5000,
    "CACHE_SCOPE": "public",
}


@pytest.mark.feature("CFG-09")
@pytest.mark.parametrize("revision", REVISIONS)
def test_identity_capabilities_and_lists_come_from_settings(default_server_restored, revision):
    with override_settings(MCP_SERVER=IDENTITY):
        server = get_server()
        client = InProcessClient(server, revision)
        result = client.initialize()
        if revision == "2025-11-25":
            assert result["serverInfo"] == {
                "name": "settings-server", "version": "9.8.7", "title": "From settings",
                "websiteUrl": "https://example.com/mcp", "description": "Built from MCP_SERVER",
                "icons": IDENTITY["ICONS"],
            }
            assert result["instructions"] == "Use the settings."
        else:  # the older revision has no room for the newer fields
            assert result["serverInfo"] == {"name": "settings-server", "version": "9.8.7"}
            assert "instructions" not in result
        assert result["capabilities"] == IDENTITY["CAPABILITIES"]
        page = client.result("tools/list")
        assert [tool["name"] for tool in page["tools"]] == ["echo"]  # PAGE_SIZE 1
        assert page["nextCursor"] == "1"
        assert page["ttlMs"] == 5000 and page["cacheScope"] == "public"
        # The capabilities from settings gate the methods: no prompts declared.
        assert client.request("prompts/list")["error"]["code"] == -32601


@pytest.mark.feature("CFG-09")
def test_protocol_version_setting_pins_the_negotiated_revision(default_server_restored):
    with override_settings(MCP_SERVER=demo_with(PROTOCOL_VERSION="2025-06-18")):
        client = InProcessClient(get_server(), "2025-11-25")
        assert client.initialize()["protocolVersion"] == "2025-06-18"


@pytest.mark.feature("CFG-09", "CFG-02", "CFG-03", "CFG-05", "CFG-06")
def test_hooks_named_by_dotted_path(default_server_restored):
    assert import_string(f"{HERE}.record_exception") is record_exception
    hooks = {
        "EXCEPTION_REPORTER": f"{HERE}.record_exception",
        "AROUND_REQUEST": f"{HERE}.record_around",
        "INSTRUMENTATION_CALLBACK": f"{HERE}.record_instrumentation",
        "INSTRUMENT_SERVER_CONTEXT": True,
    }
    with override_settings(MCP_SERVER=demo_with(**hooks)):
        server = get_server()
        configuration = server.configuration
        assert configuration.exception_reporter is record_exception
        assert configuration.around_request is record_around
        assert configuration.instrumentation_callback is record_instrumentation

        @server.tool
        def explode() -> str:
            raise RuntimeError("secret detail")

        client = InProcessClient(server)
        client.initialize()
        CALLS.clear()
        response = call_tool(client, "explode")
        assert response["result"]["isError"] is True
        assert "secret detail" not in str(response)
        [(exc, context)] = CALLS["exception_reporter"]
        assert str(exc) == "secret detail"
        assert context["request"]["params"]["name"] == "explode"
        [before] = CALLS["around_before"]
        assert before["method"] == "tools/call" and "server_context" in before
        [after] = CALLS["around_after"]
        assert after["tool_name"] == "explode" and after["error"] == "internal_error"
        [data] = CALLS["instrumentation_callback"]
        assert data["method"] == "tools/call" and data["duration"] >= 0
        assert data["server_context"] is None


@pytest.mark.feature("CFG-07", "CFG-09")
def test_validation_toggles_come_from_settings(default_server_restored):
    toggles = {"VALIDATE_TOOL_CALL_ARGUMENTS": False, "VALIDATE_TOOL_CALL_RESULTS": True}

    def add_tools(server: Server) -> None:
        @server.tool
        def typed(n: int) -> str:
            return f"got {n!r}"

        @server.tool(output_schema={"properties": {"sum": {"type": "number"}}, "required": ["sum"]})
        def wrong() -> dict:
            return {"sum": "not a number"}

    with override_settings(MCP_SERVER=demo_with()):  # the defaults: arguments checked, results not
        add_tools(get_server())
        client = InProcessClient(get_server())
        client.initialize()
        assert call_tool(client, "typed", {"n": "text"})["result"]["isError"] is True
        assert "result" in call_tool(client, "wrong")
    with override_settings(MCP_SERVER=demo_with(**toggles)):
        add_tools(get_server())
        client = InProcessClient(get_server())
        client.initialize()
        assert call_tool(client, "typed", {"n": "text"})["result"]["content"] == [
            {"type": "text", "text": "got 'text'"}
        ]
        assert call_tool(client, "wrong")["error"]["code"] == -32603
    with pytest.raises(ConfigurationError, match="validate_tool_call_arguments must be True or False"), \
            override_settings(MCP_SERVER=demo_with(VALIDATE_TOOL_CALL_ARGUMENTS="yes")):
        pass


def test_server_class_setting(default_server_restored):
    with override_settings(MCP_SERVER=demo_with(SERVER_CLASS=f"{HERE}.CustomServer")):
        assert type(get_server()) is CustomServer
        assert "echo" in get_server().tools
    assert type(get_server()) is Server


def test_stdio_max_line_bytes_setting(default_server_restored):
    assert mcp_settings.STDIO_MAX_LINE_BYTES == 4 * 1024 * 1024
    with override_settings(MCP_SERVER=demo_with(STDIO_MAX_LINE_BYTES=2048, AUTODISCOVER=False)):
        assert mcp_settings.STDIO_MAX_LINE_BYTES == 2048
    assert mcp_settings.STDIO_MAX_LINE_BYTES == 4 * 1024 * 1024


def test_server_to_client_request_timeout_setting(default_server_restored):
    assert mcp_settings.SERVER_TO_CLIENT_REQUEST_TIMEOUT == 600
    with override_settings(MCP_SERVER=demo_with(SERVER_TO_CLIENT_REQUEST_TIMEOUT=5, AUTODISCOVER=False)):
        assert mcp_settings.SERVER_TO_CLIENT_REQUEST_TIMEOUT == 5


HTTP_SETTINGS = {
    "STATELESS": ("stateless", True),
    "ENABLE_JSON_RESPONSE": ("enable_json_response", True),
    "ALLOWED_HOSTS": ("allowed_hosts", ["mcp.example.com"]),
    "ALLOWED_ORIGINS": ("allowed_origins", ["https://app.example.com"]),
    "DNS_REBINDING_PROTECTION": ("dns_rebinding_protection", False),
    "SESSION_IDLE_TIMEOUT": ("session_idle_timeout", 60),
    "MAX_SESSIONS": ("max_sessions", 5),
    "MAX_REQUEST_BYTES": ("max_request_bytes", 1024),
    "MAX_JSON_DEPTH": ("max_json_depth", 8),
    "MAX_JSON_CONTAINERS": ("max_json_containers", 500),
    "KEEPALIVE_INTERVAL": ("keepalive_interval", 5),
    "EVENT_RETENTION": ("event_retention", 120),
    "PROCESS_HEARTBEAT_INTERVAL": ("process_heartbeat_interval", 1.5),

    "MAX_SESSIONS_PER_PRINCIPAL": ("max_sessions_per_principal", 7),
    "MAX_STREAMS_PER_SESSION": ("max_streams_per_session", 3),
    "MAX_SUBSCRIPTIONS_PER_SESSION": ("max_subscriptions_per_session", 11),
    "MAX_SSE_BUFFER_BYTES": ("max_sse_buffer_bytes", 65536),
    "SSE_STALL_TIMEOUT": ("sse_stall_timeout", 3),
    "MAX_QUEUED_STREAM_EVENTS": ("max_queued_stream_events", 50),
    "MAX_PROGRESS_TOKEN_LENGTH": ("max_progress_token_length", 32),
    "MAX_LISTEN_SUBSCRIPTIONS": ("max_listen_subscriptions", 9),
    "MAX_LISTEN_SUBSCRIPTIONS_PER_PRINCIPAL": ("max_listen_subscriptions_per_principal", 4),
    "LISTEN_KEEPALIVE_INTERVAL": ("listen_keepalive_interval", 2.5),
    "STREAM_CREDENTIAL_CHECK_INTERVAL": ("stream_credential_check_interval", 7),
}
# Settings of the event store: (attribute of transport.events, value).
EVENT_STORE_SETTINGS = {
    "MAX_STORED_EVENTS_PER_SESSION": ("max_events", 13),
    "MAX_STORED_EVENT_BYTES_PER_SESSION": ("max_bytes", 4096),
}


def allow_everything(request, session_id):
    return True


def test_http_settings_shape_the_default_transport(default_server_restored):
    from mcp_server.site import get_transport

    assert get_transport().allowed_hosts == list(settings.ALLOWED_HOSTS)
    values = {key: value for key, (_attribute, value) in HTTP_SETTINGS.items()}
    with override_settings(MCP_SERVER=demo_with(
        **values, SESSION_REQUEST_VALIDATOR=f"{HERE}.allow_everything", REDIS_URL="redis://127.0.0.1:6379/9",
        SERVER_TO_CLIENT_REQUEST_TIMEOUT=7, AUTODISCOVER=False,
    )):
        transport = get_transport()
        assert transport.server is get_server()
        for key, (attribute, value) in HTTP_SETTINGS.items():
            assert getattr(transport.options, attribute) == value, key
        assert transport.options.session_request_validator is allow_everything
        assert transport.options.server_to_client_request_timeout == 7
        assert isinstance(transport.state, RedisState)
        assert transport.stream_slots.limit == 3 and transport.subscriptions.limit == 11
    assert isinstance(get_transport().state, LocalState if not settings.MCP_SERVER.get("REDIS_URL")
                      else RedisState)


AUTHENTICATION_SETTINGS = {"AUTHENTICATION_CLASSES", "AUTHENTICATION_REQUIRED", "RESOURCE_SERVER"}


def test_authentication_settings_give_the_default_transport_its_resource_server(default_server_restored):
    from mcp_server.auth.cookie import SessionAuthentication
    from mcp_server.auth.drf import DRFAuthentication
    from mcp_server.site import get_transport

    # The default: no resource server at all (nothing runs per request).
    assert get_transport().resource_server is None
    assert mcp_settings.RESOURCE_SERVER["JWT"]["ALGORITHMS"] == ["RS256", "ES256"]
    with override_settings(MCP_SERVER=demo_with(
        AUTHENTICATION_REQUIRED=True, AUTODISCOVER=False,
        AUTHENTICATION_CLASSES=["mcp_server.auth.SessionAuthentication",
                                "rest_framework.authentication.BasicAuthentication"],
        RESOURCE_SERVER={"RESOURCE": "https://mcp.example.com/mcp", "REQUIRED_SCOPES": ["mcp"],
                         "INTROSPECTION": {"CACHE_SECONDS": 5}},
    )):
        resource_server = get_transport().resource_server
        assert resource_server.required and resource_server.required_scopes == {"mcp"}
        assert resource_server.resource == "https://mcp.example.com/mcp"
        session, basic = resource_server.authenticators
        assert isinstance(session, SessionAuthentication) and isinstance(basic, DRFAuthentication)
        # A nested dict keeps the defaults of the keys it does not set.
        assert mcp_settings.RESOURCE_SERVER["INTROSPECTION"]["CACHE_SECONDS"] == 5
        assert mcp_settings.RESOURCE_SERVER["INTROSPECTION"]["CACHE_SIZE"] == 10_000
    with override_settings(MCP_SERVER=demo_with(RESOURCE_SERVER=["not", "a", "dict"])), \
            pytest.raises(ImproperlyConfigured, match="RESOURCE_SERVER"):
        mcp_settings.RESOURCE_SERVER  # noqa: B018


@pytest.mark.parametrize("redis_url", [None, "redis://127.0.0.1:6379/9"])
def test_stored_event_limits_shape_the_event_store(default_server_restored, redis_url):
    from mcp_server.http.event_store import DatabaseEventStore, RedisEventStore
    from mcp_server.http.memory_event_store import MemoryEventStore
    from mcp_server.site import get_transport

    values = {key: value for key, (_attribute, value) in EVENT_STORE_SETTINGS.items()}
    # Without Redis, on the in-memory channel layer of the tests' process: one process serves
    # the sessions, which keeps their events in memory; the rows when named.
    for named, kind in ((None, RedisEventStore if redis_url else MemoryEventStore),
                        ("mcp_server.http.event_store.DatabaseEventStore", DatabaseEventStore)):
        with override_settings(MCP_SERVER=demo_with(**values, REDIS_URL=redis_url, EVENT_STORE_CLASS=named,
                                                    AUTODISCOVER=False), CELERY_BROKER_URL=None,
                               CHANNEL_LAYERS=MEMORY_LAYER):
            events = get_transport().events
            assert type(events) is kind
            for key, (attribute, value) in EVENT_STORE_SETTINGS.items():
                assert getattr(events, attribute) == value, key
    with override_settings(MCP_SERVER=demo_with(MAX_STORED_EVENTS_PER_SESSION=0, AUTODISCOVER=False)), \
            pytest.raises(ValueError, match="max_events must be a positive integer or None, not 0"):
        get_transport()


# --- Redis and the stores ------------------------------------------------------------------------

REDIS_STORE_SETTINGS = ("REDIS_COMMAND_TIMEOUT", "REDIS_OPTIONS", "REDIS_CLIENT_FACTORY",
                        "SHARED_STATE_CLASS", "EVENT_STORE_CLASS")


def redis_url_for_tests() -> str:
    from .http_cluster import REDIS_HOST, REDIS_PORT
    from .services import reachable, require

    require(reachable(REDIS_HOST, REDIS_PORT), f"needs Redis on {REDIS_HOST}:{REDIS_PORT}")
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/9"


FACTORY_CALLS: list[str] = []


def redis_factory(url: str) -> Any:
    import redis.asyncio

    FACTORY_CALLS.append(url)
    return redis.asyncio.Redis.from_url(url, client_name="from-factory")


def run_on_stores(transport: Any, *commands: tuple) -> list:
    """Run Redis commands on the transport's shared-state connection, in a fresh event loop."""
    import asyncio

    async def run() -> list:
        connection = transport.state.clients.get()
        return [await connection.execute(*command) for command in commands]

    return asyncio.run(run())


def test_redis_command_timeout_and_client_settings_are_honoured(default_server_restored):
    from mcp_server.http.event_store import DatabaseEventStore, RedisEventStore
    from mcp_server.http.memory_event_store import MemoryEventStore
    from mcp_server.http.redis_client import RedisClients
    from mcp_server.http.redispy_client import RedisPyClients
    from mcp_server.site import get_transport

    url = redis_url_for_tests()
    with override_settings(MCP_SERVER=demo_with(REDIS_URL=url, REDIS_COMMAND_TIMEOUT=2.5,
                                                AUTODISCOVER=False)):
        transport = get_transport()
        assert isinstance(transport.state, RedisState) and isinstance(transport.events, RedisEventStore)
        # The fast client, shared by both stores, with the deadline asked for.
        assert isinstance(transport.state.clients, RedisClients)
        assert transport.events.clients is transport.state.clients
        assert transport.state.clients.command_timeout == 2.5
    with override_settings(MCP_SERVER=demo_with(REDIS_URL=url, REDIS_OPTIONS={"client_name": "with-options"},
                                                AUTODISCOVER=False)):
        transport = get_transport()
        assert isinstance(transport.state.clients, RedisPyClients)
        assert transport.events.clients is transport.state.clients
        assert run_on_stores(transport, ("CLIENT", "GETNAME")) == ["with-options"]
    FACTORY_CALLS.clear()
    with override_settings(MCP_SERVER=demo_with(REDIS_URL=url, REDIS_CLIENT_FACTORY=f"{HERE}.redis_factory",
                                                AUTODISCOVER=False)):
        transport = get_transport()
        assert run_on_stores(transport, ("CLIENT", "GETNAME"), ("SET", "mcp:probe", b"bytes"),
                             ("GET", "mcp:probe")) == ["from-factory", "OK", "bytes"]
        assert [url] == FACTORY_CALLS
    # The store classes, by dotted path: with and without Redis.
    with override_settings(MCP_SERVER=demo_with(
            REDIS_URL=url, SHARED_STATE_CLASS=f"{HERE}.RecordingRedisState",
            EVENT_STORE_CLASS="mcp_server.http.event_store.DatabaseEventStore", AUTODISCOVER=False)):
        transport = get_transport()
        assert type(transport.state) is RecordingRedisState and transport.state.url == url
        assert isinstance(transport.state.clients, RedisClients)
        assert type(transport.events) is DatabaseEventStore
    with override_settings(MCP_SERVER=demo_with(SHARED_STATE_CLASS=f"{HERE}.RecordingLocalState",
                                                AUTODISCOVER=False), CELERY_BROKER_URL=None,
                           CHANNEL_LAYERS=MEMORY_LAYER):
        transport = get_transport()
        # Still process memory: one process serves the sessions (see test_memory_event_store.py).
        assert type(transport.state) is RecordingLocalState and type(transport.events) is MemoryEventStore
    assert isinstance(get_transport().state, LocalState if not settings.MCP_SERVER.get("REDIS_URL")
                      else RedisState)


class RecordingRedisState(RedisState):
    pass


class RecordingLocalState(LocalState):
    pass


@pytest.mark.parametrize(("settings_given", "message"), [
    ({"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_COMMAND_TIMEOUT": 0},
     r"REDIS_COMMAND_TIMEOUT'\] must be a positive number of seconds, not 0"),
    ({"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_COMMAND_TIMEOUT": "5"}, r"not '5'"),
    ({"REDIS_COMMAND_TIMEOUT": -1}, r"REDIS_COMMAND_TIMEOUT'\] must be a positive number of seconds, not -1"),
    ({"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_OPTIONS": "ssl=true"},
     r"must be a dict of redis-py options"),
    ({"REDIS_OPTIONS": {"ssl": True}}, r"REDIS_OPTIONS'\] needs REDIS_URL"),
    ({"REDIS_CLIENT_FACTORY": f"{HERE}.redis_factory"}, r"REDIS_CLIENT_FACTORY'\] needs REDIS_URL"),
    ({"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_OPTIONS": {},
      "REDIS_CLIENT_FACTORY": f"{HERE}.redis_factory"},
     r"both REDIS_OPTIONS and REDIS_CLIENT_FACTORY"),
    ({"SHARED_STATE_CLASS": "no.such.State"}, r"SHARED_STATE_CLASS'\] = 'no.such.State' cannot be imported"),
    ({"EVENT_STORE_CLASS": f"{HERE}.NoSuchStore"}, r"EVENT_STORE_CLASS'\] = .* cannot be imported"),
])
def test_bad_redis_settings_are_refused_clearly(default_server_restored, settings_given, message):
    from mcp_server.site import get_transport

    with override_settings(MCP_SERVER=demo_with(AUTODISCOVER=False, **settings_given)), \
            pytest.raises(ImproperlyConfigured, match=message):
        get_transport()


REQUEST_STATE_SETTINGS = {"REQUEST_STATE_KEYS", "REQUEST_STATE_TTL", "REQUEST_STATE_AUDIENCE"}


@pytest.mark.feature("MRTR-09")
def test_the_default_server_seals_request_states_with_the_keys_of_the_settings(default_server_restored):
    key = bytes(range(32))
    encoded = base64.urlsafe_b64encode(key).decode()
    with override_settings(MCP_SERVER=demo_with(REQUEST_STATE_KEYS=[encoded], REQUEST_STATE_TTL=60,
                                                REQUEST_STATE_AUDIENCE="https://mcp.example.com")):
        security = get_server().request_state_security
        assert (security.ttl, security.audience) == (60, "https://mcp.example.com")
        token = security.seal("s", method="tools/call", target="t", arguments={})
        reader = RequestStateSecurity(key=key, audience="https://mcp.example.com")
        assert reader.open(token, method="tools/call", target="t", arguments={}) == "s"
    with override_settings(MCP_SERVER=demo_with()):
        # No keys of its own: keys derived from SECRET_KEY, which every process shares.
        from mcp_server.request_state import derived_keys

        token = get_server().request_state_security.seal("s", method="tools/call", target="t",
                                                         arguments={})
        reader = RequestStateSecurity(keys=derived_keys())
        assert reader.open(token, method="tools/call", target="t", arguments={}) == "s"


def test_every_setting_is_covered_here():
    """A new key in DEFAULTS needs a test in this module (and test_stdio for STDIO_*)."""
    covered = {*IDENTITY, "PROTOCOL_VERSION", "EXCEPTION_REPORTER", "AROUND_REQUEST",
               "INSTRUMENTATION_CALLBACK", "INSTRUMENT_SERVER_CONTEXT", "VALIDATE_TOOL_CALL_ARGUMENTS",
               "VALIDATE_TOOL_CALL_RESULTS", "SERVER_CLASS", "AUTODISCOVER", "STDIO_MAX_LINE_BYTES",
               "SERVER_TO_CLIENT_REQUEST_TIMEOUT", *HTTP_SETTINGS, "SESSION_REQUEST_VALIDATOR",
               "REDIS_URL", *EVENT_STORE_SETTINGS, *REDIS_STORE_SETTINGS, *REQUEST_STATE_SETTINGS,
               "BACKGROUND_CALLS", "BACKGROUND_RETRIES", "TASK_TTL_MS", "TASK_POLL_INTERVAL_MS",
               *BACKGROUND_SHARE_SETTINGS,
               *AUTHENTICATION_SETTINGS,
               # Its keys: tests/test_authorization_server*.py.
               "AUTHORIZATION_SERVER",
               # tests/test_registry_coalescing.py.
               "LIST_CHANGED_MIN_INTERVAL",
               # tests/test_asgi_application.py.
               "ENDPOINT_PATH", "SERVE_STATIC",
               # tests/test_background_no_worker.py, tests/test_first_hour_checks.py (E023).
               "BACKGROUND_CALL_QUEUE_TIMEOUT",
               # tests/test_telemetry_*.py, tests/test_audit*.py, tests/test_redaction.py.
               "TELEMETRY", "AUDIT", "AUDIT_RETENTION_DAYS", "AUDIT_BATCH_SIZE", "AUDIT_FLUSH_INTERVAL",
               "REDACTED_KEYS", "REDACTION_POLICY",
               # tests/test_rolling_restart.py.
               "DRAIN_TIMEOUT", "HEALTH_CHECK_PATH",
               # tests/test_middleware.py.
               "MIDDLEWARE", "RATE_LIMITS", "RATE_LIMIT_STORE", "RATE_LIMIT_CACHE", "TOOL_TIMEOUT",
               "TOOL_TIMEOUTS",
               # tests/test_skills.py.
               "SKILLS_DIRS", "SKILLS_MAX_FILES", "SKILLS_MAX_BYTES",
               # tests/test_expose_model_query.py.
               "QUERY_MAX_ROWS", "QUERY_MAX_BYTES", "QUERY_SESSION_MAX_ROWS", "QUERY_SESSION_MAX_BYTES",
               "QUERY_BUDGET_CACHE", "QUERY_STATEMENT_TIMEOUT", "QUERY_DATABASE",
               # tests/test_tool_search.py.
               "TOOL_SEARCH",
               # tests/test_startup_objects.py.
               "FREEZE_STARTUP_OBJECTS"}
    assert covered == set(DEFAULTS)


# --- TASK_TTL_MS, TASK_POLL_INTERVAL_MS: the Tasks extension's hints and expiry --------------------

@pytest.mark.feature("TASK-09")
def test_the_task_settings_are_the_hints_of_every_task_and_bad_values_are_refused():
    from mcp_server.extensions.tasks import wire

    with override_settings(MCP_SERVER=demo_with(TASK_TTL_MS=5000, TASK_POLL_INTERVAL_MS=250)):
        assert (wire.ttl_ms(), wire.poll_interval_ms()) == (5000, 250)
    with override_settings(MCP_SERVER=demo_with(TASK_TTL_MS=None)):
        assert wire.ttl_ms() is None  # tasks never expire
    for bad in ({"TASK_TTL_MS": 0}, {"TASK_TTL_MS": 1.5}, {"TASK_POLL_INTERVAL_MS": None},
                {"TASK_POLL_INTERVAL_MS": True}):
        with override_settings(MCP_SERVER=demo_with(**bad)), \
                pytest.raises(ImproperlyConfigured, match=next(iter(bad))):
            wire.ttl_ms()
            wire.poll_interval_ms()


# --- The fair share of background calls: in flight per principal, stored bytes, retention ------

BACKGROUND_SHARE_SETTINGS = ("MAX_BACKGROUND_CALLS_PER_PRINCIPAL", "MAX_BACKGROUND_CALL_BYTES",
                             "BACKGROUND_CALL_RETENTION", "BACKGROUND_CALL_TIME_LIMIT")


def test_the_background_share_settings_are_read_and_bad_values_are_refused():
    from mcp_protocol.errors import InvalidParamsError
    from mcp_server import Tool
    from mcp_server.background import admission, cleanup, execute

    class Note(Tool):
        input_schema = {"properties": {"text": {"type": "string"}}}

    def read() -> tuple:
        return admission.calls_per_principal(), cleanup.retention(), execute.time_limit()

    set_to = dict(zip(BACKGROUND_SHARE_SETTINGS, (2, 40, 60, 1.5), strict=True))
    with override_settings(MCP_SERVER=demo_with(**set_to)):
        assert read() == (2, 60, 1.5)
        kept = admission.stored_parts(Note(), {"text": "short", "extra": 1},
                                      {"name": "note", "arguments": {}})
        assert kept == ({"text": "short"}, {"name": "note"})
        with pytest.raises(InvalidParamsError, match="at most 40 bytes"):
            admission.stored_parts(Note(), {"text": "x" * 40}, {"name": "note"})
    unlimited = dict.fromkeys(BACKGROUND_SHARE_SETTINGS)
    with override_settings(MCP_SERVER=demo_with(**unlimited)):
        assert read() == (None, None, None)
        assert admission.stored_parts(Note(), {"text": "x" * 10_000}, {})[0] == {"text": "x" * 10_000}
    for name, bad in (("MAX_BACKGROUND_CALLS_PER_PRINCIPAL", 0), ("MAX_BACKGROUND_CALLS_PER_PRINCIPAL", 2.5),
                      ("MAX_BACKGROUND_CALL_BYTES", True), ("BACKGROUND_CALL_RETENTION", -1),
                      ("BACKGROUND_CALL_RETENTION", "1d"), ("BACKGROUND_CALL_TIME_LIMIT", 0)):
        with override_settings(MCP_SERVER=demo_with(**{name: bad})), \
                pytest.raises(ImproperlyConfigured, match=name):
            admission.calls_per_principal()
            admission.stored_parts(Note(), {}, {})
            cleanup.retention()
            execute.time_limit()


# --- BACKGROUND_CALLS: where background tools run, and the checks of what Celery needs -----------

REDIS_LAYER = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def test_background_calls_use_celery_only_with_a_broker_unless_forced():
    from mcp_server.background.runner import runner_name

    with override_settings(MCP_SERVER=demo_with(), CELERY_BROKER_URL=None):
        assert runner_name() == "local"
    with override_settings(MCP_SERVER=demo_with(), CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        assert runner_name() == "celery"
    with override_settings(MCP_SERVER=demo_with(BACKGROUND_CALLS="local"),
                           CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        assert runner_name() == "local"
    with override_settings(MCP_SERVER=demo_with(BACKGROUND_CALLS="threads")), \
            pytest.raises(ImproperlyConfigured, match="BACKGROUND_CALLS"):
        runner_name()


def test_check_refuses_celery_that_cannot_reach_the_web_processes():
    from mcp_server.checks import check_background_calls

    def ids(**overrides: Any) -> list[str]:
        with override_settings(**overrides):
            return [message.id for message in check_background_calls()]

    broker = "redis://127.0.0.1:1/0"
    # No broker: the calls run in the web process, which it says unless told so (W023).
    assert ids(MCP_SERVER=demo_with(), CELERY_BROKER_URL=None,
               CHANNEL_LAYERS=MEMORY_LAYER) == ["mcp_server.W023"]
    assert ids(MCP_SERVER=demo_with(BACKGROUND_CALLS="local"), CELERY_BROKER_URL=None,
               CHANNEL_LAYERS=MEMORY_LAYER) == []
    assert ids(MCP_SERVER=demo_with(REDIS_URL=None), CELERY_BROKER_URL=broker,
               CHANNEL_LAYERS=MEMORY_LAYER) == ["mcp_server.E021", "mcp_server.E022"]
    assert ids(MCP_SERVER=demo_with(REDIS_URL="redis://127.0.0.1:1/0"), CELERY_BROKER_URL=broker,
               CHANNEL_LAYERS=REDIS_LAYER) == []
    assert ids(MCP_SERVER=demo_with(BACKGROUND_CALLS="threads")) == ["mcp_server.E020"]


# --- CFG-01: the default server's configuration over the global one -------------------------------

@pytest.mark.feature("CFG-01")
def test_global_configure_applies_to_the_default_server_unless_settings_set_it(default_server_restored):
    configure(exception_reporter=global_reporter)
    # MCP_SERVER without EXCEPTION_REPORTER: the global hook applies.
    with override_settings(MCP_SERVER=demo_with()):
        server = get_server()
        assert server.configuration.exception_reporter is global_reporter
        assert server.configuration.validate_tool_call_arguments is True
        server.report_exception(RuntimeError("one"), {"request": {}})
        assert [str(exc) for exc, _ in CALLS["global_reporter"]] == ["one"]
    # With it, the per-server value wins.
    with override_settings(MCP_SERVER=demo_with(EXCEPTION_REPORTER=f"{HERE}.record_exception")):
        server = get_server()
        assert server.configuration.exception_reporter is record_exception
        server.report_exception(RuntimeError("two"), {"request": {}})
        assert [str(exc) for exc, _ in CALLS["exception_reporter"]] == ["two"]
        assert len(CALLS["global_reporter"]) == 1
    # A global value set later still reaches a default server that does not set it.
    with override_settings(MCP_SERVER=demo_with()):
        configure(validate_tool_call_arguments=False)
        assert get_server().configuration.validate_tool_call_arguments is False


# --- Bad settings ---------------------------------------------------------------------------------

def test_unknown_setting_raises_a_clear_error(default_server_restored):
    with pytest.raises(ImproperlyConfigured, match=r"unknown MCP_SERVER settings: NAEM, PAGESIZE; "
                                                   r"the known ones are NAME, TITLE"), \
            override_settings(MCP_SERVER=demo_with(NAEM="typo", PAGESIZE=3)):
        pass
    # Nothing was left half-changed: the default server follows the real settings again.
    assert get_server().name == DEMO["NAME"] and "echo" in get_server().tools


def test_bad_dotted_path_names_the_setting(default_server_restored):
    expected = r"MCP_SERVER\['EXCEPTION_REPORTER'\] = 'tests.nowhere.report' cannot be imported"
    with pytest.raises(ImproperlyConfigured, match=expected), \
            override_settings(MCP_SERVER=demo_with(EXCEPTION_REPORTER="tests.nowhere.report")):
        pass


def test_mcp_server_setting_must_be_a_dict(default_server_restored):
    with pytest.raises(ImproperlyConfigured, match="MCP_SERVER must be a dict, not list"), \
            override_settings(MCP_SERVER=[("NAME", "x")]):
        pass


# --- override_settings rebuilds the default server ---------------------------------------------

@pytest.mark.feature("CFG-09")
def test_override_settings_rebuilds_the_default_server(default_server_restored):
    original = get_server()
    with override_settings(MCP_SERVER=demo_with(NAME="renamed", VERSION="2.0.0")):
        renamed = get_server()
        assert renamed is not original
        assert (renamed.name, renamed.version) == ("renamed", "2.0.0")
        assert {"echo", "add"} <= set(renamed.tools)  # every mcp.py ran again onto it
        client = InProcessClient(renamed)
        assert client.initialize()["serverInfo"]["name"] == "renamed"
        assert call_tool(client, "add", {"a": 2, "b": 3})["result"]["structuredContent"] == {"sum": 5}
    restored = get_server()
    assert restored is not renamed and restored.name == DEMO["NAME"]
    assert {"echo", "add"} <= set(restored.tools)
