"""W3C Trace Context keys in ``_meta`` (TRACE-01, TRACE-02, TRACE-04)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from typing import Any

import pytest

import mcp_protocol
from mcp_protocol import trace_context
from mcp_server import Prompt, Server, Tool

from .harness import REPO, InProcessClient
from .wire import check_client_message, check_server_message

REVISIONS = ["2025-11-25", "2024-11-05"]
# Unusual but valid values: optional whitespace, list members, percent-encoding, properties.
TRACE_META = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE, vendor@tenant=x",
    "baggage": "userId=alice%20smith,serverNode=DF%2028;ttl=30 , isProduction=false",
}


@pytest.mark.feature("TRACE-01")
def test_reserved_key_constants():
    assert trace_context.TRACEPARENT_META_KEY == "traceparent"
    assert trace_context.TRACESTATE_META_KEY == "tracestate"
    assert trace_context.BAGGAGE_META_KEY == "baggage"
    assert tuple(trace_context.META_KEYS) == ("traceparent", "tracestate", "baggage")
    # Exported from the package too.
    assert mcp_protocol.META_KEYS == trace_context.META_KEYS
    assert mcp_protocol.TRACEPARENT_META_KEY == "traceparent"
    assert mcp_protocol.TRACESTATE_META_KEY == "tracestate"
    assert mcp_protocol.BAGGAGE_META_KEY == "baggage"


def _recording_server(seen: dict[str, Any], user_context: Any = None) -> Server:
    def tool_handler(arguments, server_context):
        seen["tools/call"] = server_context["_meta"]
        return "ok"

    def prompt_handler(args, server_context):
        seen["prompts/get"] = server_context["_meta"]
        return "ok"

    def read(params, server_context):
        seen["resources/read"] = server_context["_meta"]
        return []

    server = Server("trace", tools=[Tool.define(tool_handler, name="t")],
                    prompts=[Prompt.define(prompt_handler, name="p")], server_context=user_context)
    server.resources_read_handler(read)
    return server


@pytest.mark.feature("TRACE-02")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("user_context", [None, {"tenant": "acme"}])
def test_trace_keys_reach_server_context_byte_identical(revision, user_context):
    seen: dict[str, Any] = {}
    client = InProcessClient(_recording_server(seen, user_context), revision)
    client.initialize(revision)
    requests = {
        "tools/call": {"name": "t", "arguments": {}},
        "prompts/get": {"name": "p"},
        "resources/read": {"uri": "file:///traced"},
    }
    for request_id, (method, params) in enumerate(requests.items(), start=10):
        message = {"jsonrpc": "2.0", "id": request_id, "method": method,
                   "params": {**params, "_meta": {**TRACE_META, "progressToken": "p"}}}
        check_client_message(message, revision)
        # Sent as JSON text, so the values are decoded by the server itself.
        answer = client.server.handle_json(json.dumps(message, ensure_ascii=True))
        check_server_message(json.loads(answer), revision, method)
        assert "result" in json.loads(answer)
    assert set(seen) == set(requests)
    for method, meta in seen.items():
        for key in trace_context.META_KEYS:
            assert meta[key] == TRACE_META[key], (method, key)
            assert meta[key].encode() == TRACE_META[key].encode()
        assert meta["progressToken"] == "p"


@pytest.mark.feature("TRACE-02")
def test_user_context_keeps_its_keys_alongside_the_trace_meta():
    seen: dict[str, Any] = {}

    def tool_handler(arguments, server_context):
        seen.update(dict(server_context))
        return "ok"

    server = Server("trace", tools=[Tool.define(tool_handler, name="t")],
                    server_context={"tenant": "acme"})
    client = InProcessClient(server)
    client.initialize()
    client.result("tools/call", {"name": "t", "arguments": {}, "_meta": dict(TRACE_META)})
    assert seen == {"tenant": "acme", "_meta": TRACE_META}
    assert server.server_context == {"tenant": "acme"}, "the shared context is not modified"


_NO_OTEL_PROBE = r"""
import importlib, importlib.abc, json, pkgutil, sys

attempts = []

class Recorder(importlib.abc.MetaPathFinder):
    # Sees every import attempt, including guarded ones inside try/except ImportError.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            attempts.append(name)
        return None

sys.meta_path.insert(0, Recorder())

# MCP_SERVER["TELEMETRY"] = "off": nothing of OpenTelemetry is imported, though it is installed.
import project.settings
project.settings.MCP_SERVER = {**project.settings.MCP_SERVER, "TELEMETRY": "off"}
import django
django.setup()
import mcp_protocol, mcp_server
skipped = []
for package in (mcp_protocol, mcp_server):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.startswith("mcp_server.telemetry."):
            continue  # the spans and metrics themselves: imported only when telemetry is on
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            # An optional third-party dependency that is not installed; OTel never counts.
            if (exc.name or "").split(".")[0] == "opentelemetry":
                raise
            skipped.append(info.name)
from mcp_server import Server
server = Server("probe")
server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}})
server.handle({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}})
print(json.dumps({
    "attempts": attempts,
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
    "skipped": skipped,
    "imported": sorted(m for m in sys.modules if m.startswith(("mcp_protocol.", "mcp_server."))),
}))
"""


@pytest.mark.feature("TRACE-04")
def test_core_packages_never_import_opentelemetry():
    # OpenTelemetry is installed in the test environment (a dependency of the official SDK),
    # so an import of it anywhere in our packages would show up here, with telemetry off.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _NO_OTEL_PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["attempts"] == [], report
    assert report["loaded"] == [], report
    # The probe really imported the whole of both packages.
    for module in ("mcp_protocol.trace_context", "mcp_protocol.jsonrpc", "mcp_server.dispatch",
                   "mcp_server.context", "mcp_server.transports.stdio"):
        assert module in report["imported"]


@pytest.mark.feature("TRACE-04")
def test_opentelemetry_is_not_a_required_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if "opentelemetry" in d.lower()]
