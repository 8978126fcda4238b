"""``conformance/server``: the fixtures the official conformance suite calls, over Streamable HTTP.

The suite itself runs in ``conformance/run`` (CI runs it); these tests start the server the same
way, as its own process on its own SQLite file, and check what the suite relies on.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

import pytest

from .harness import REPO
from .http_harness import HTTPClient, free_port

TOOLS = {
    "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
    "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress",
    "test_error_handling", "test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums", "json_schema_2020_12_tool", "test_reconnection",
    *(f"test_input_required_result_{name}" for name in (
        "elicitation", "sampling", "list_roots", "request_state", "multiple_inputs", "multi_round",
        "tampered_state", "capabilities")),
    # The 2026-07-28 scenarios' own (conformance/fixtures/modern.py).
    "test_missing_capability", "test_logging_tool", "test_trigger_tool_change",
    "test_trigger_prompt_change", "test_header_param", "test_streaming_elicitation",
    # The tasks-* scenarios' (the Tasks extension, conformance/fixtures/tasks.py).
    "greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input",
    "test_tool_with_task",
}
PROMPTS = {"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
           "test_prompt_with_image", "test_input_required_result_prompt"}
# The demo's skill (SKILLS_DIRS) lists its SKILL.md; its other file is read through its manifest.
RESOURCES = {"test://static-text", "test://static-binary", "test://watched-resource",
             "skill://note-keeping/SKILL.md"}


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory):
    """``conformance/server --port N`` on the embedded default (a fresh SQLite file)."""
    folder = tmp_path_factory.mktemp("conformance")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["CONFORMANCE_SQLITE"] = str(folder / "db.sqlite3")
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([str(REPO / "conformance" / "server"), "--port", str(port)], cwd=REPO,
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (folder / "server.log").read_text()
            assert time.monotonic() < deadline, "conformance/server did not answer /health in 60 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield f"http://localhost:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


@pytest.mark.feature("CONF-01")
@pytest.mark.parametrize("revision", ["2025-11-25", "2024-11-05"])
def test_every_fixture_the_suite_calls_is_listed(conformance_server, revision):
    client = HTTPClient(conformance_server, revision=revision)
    try:
        result = client.initialize(capabilities={"sampling": {}, "elicitation": {}})
        capabilities = result["capabilities"]
        assert capabilities["resources"]["subscribe"] is True
        assert {"tools", "prompts", "logging", "completions"} <= set(capabilities)
        assert capabilities["extensions"]["io.modelcontextprotocol/skills"] == {"directoryRead": True}

        tools = {t["name"]: t for t in client.request("tools/list").response["result"]["tools"]}
        assert set(tools) == TOOLS
        assert all(t.get("description") and t["inputSchema"]["type"] == "object" for t in tools.values())
        schema = tools["json_schema_2020_12_tool"]["inputSchema"]
        # SEP-1613 / SEP-2106: the 2020-12 keywords reach the client as written.
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$defs"]["address"]["$anchor"] == "addressDef"
        assert schema["additionalProperties"] is False
        assert {"allOf", "if", "then", "else"} <= set(schema)

        prompts = client.request("prompts/list").response["result"]["prompts"]
        assert {p["name"] for p in prompts} == PROMPTS
        assert all(p.get("description") for p in prompts)
        resources = client.request("resources/list").response["result"]["resources"]
        assert {r["uri"] for r in resources} == RESOURCES
        templates = client.request("resources/templates/list").response["result"]["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]
        read = client.request("resources/read", {"uri": "test://template/123/data"}).response["result"]
        assert '"id": "123"' in read["contents"][0]["text"]
    finally:
        client.delete()
        client.close()


@pytest.mark.feature("CONF-01")
def test_reconnection_tool_closes_its_stream_and_the_result_comes_on_resumption(conformance_server):
    """server-sse-polling: priming event, a last event with ``retry``, the result after GET."""
    client = HTTPClient(conformance_server, revision="2025-11-25")
    try:
        client.initialize()
        exchange = client.request("tools/call", {"name": "test_reconnection", "arguments": {}},
                                  request_id=7)
        assert exchange.response is None  # the stream ended before the result
        priming, last = exchange.events
        assert (priming.id, priming.data, priming.retry) == ("post:i7/0", "", None)
        assert (last.id, last.data, last.retry) == ("post:i7/0", "", 500)

        listener = client.listen(last_event_id=last.id)
        try:
            assert listener.status == 200
            event = listener.next()
            assert event.message["id"] == 7
            assert "Reconnection test completed successfully" in event.message["result"]["content"][0]["text"]
            assert listener.next() is None  # the resumed stream ends with its response
        finally:
            listener.close()
    finally:
        client.delete()
        client.close()


@pytest.mark.feature("CONF-01")
@pytest.mark.parametrize("revision", ["2025-06-18", "2024-11-05"])
def test_before_2025_11_25_the_stream_stays_open_and_carries_the_result(conformance_server, revision):
    """Clients older than SEP-1699 do not expect a POST stream to end early: it is kept."""
    client = HTTPClient(conformance_server, revision=revision)
    try:
        client.initialize()
        exchange = client.request("tools/call", {"name": "test_reconnection", "arguments": {}})
        assert all(event.retry is None for event in exchange.events)
        assert "Reconnection test completed" in exchange.response["result"]["content"][0]["text"]
    finally:
        client.delete()
        client.close()


@pytest.mark.feature("CONF-01", "MRTR-07")
def test_the_input_required_fixtures_serve_a_handshake_session_through_the_shim(conformance_server):
    """The 2026-07-28 scenarios' tools, asked by a 2025-11-25 client: live requests instead."""
    client = HTTPClient(conformance_server, revision="2025-11-25")
    answers = {
        "elicitation/create": lambda params: {"action": "accept", "content": {
            "name": "Ada", "color": "teal", "ok": True, "context": "tests"}},
        "sampling/createMessage": lambda params: {
            "role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m",
            "stopReason": "endTurn"},
        "roots/list": lambda params: {"roots": [{"uri": "file:///work", "name": "work"}]},
    }
    client.answers.update(answers)
    expected = {
        "elicitation": "Hello, Ada!", "sampling": "The model answered: Hello",
        "list_roots": "Client roots: file:///work",
        "request_state": "state-ok: the request state came back intact",
        "multiple_inputs": "Hello Ada", "multi_round": "Ada likes teal",
        "tampered_state": "The request state opened intact",
        "capabilities": "Every input the client can give was received",
    }
    try:
        client.initialize(capabilities={"sampling": {}, "elicitation": {"form": {}}, "roots": {}})
        for name, text in expected.items():
            exchange = client.request("tools/call", {"name": f"test_input_required_result_{name}",
                                                     "arguments": {}})
            assert exchange.response["result"]["content"][0]["text"] == text, name
            assert exchange.server_requests, name  # asked live, on the tool call's stream
        prompt = client.request("prompts/get", {"name": "test_input_required_result_prompt"})
        assert prompt.response["result"]["messages"][0]["content"]["text"] == "Use this context: tests"
    finally:
        client.delete()
        client.close()
@pytest.mark.feature("CONF-01", "MOD-10", "HTTP-28")
def test_the_modern_fixtures_answer_in_the_2026_07_28_era(conformance_server):
    """server-stateless and http-custom-header-server-validation rely on these."""
    import json

    import httpx

    from .modern_support import MODERN, envelope, modern_headers, sse_messages
    from .wire import check_server_message

    def call(name: str, arguments: dict, headers: dict | None = None) -> tuple[int, dict]:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments, "_meta": envelope()}}
        sent = {k: v for k, v in modern_headers(message).items() if k not in ("host", "content-type")}
        response = httpx.post(conformance_server, json=message, headers={**sent, **(headers or {})},
                              timeout=60)
        body = sse_messages(response.text)[-1] if "event-stream" in response.headers["content-type"] \
            else response.json()
        check_server_message(body, MODERN, "tools/call")
        return response.status_code, body

    status, body = call("test_missing_capability", {})
    assert (status, body["error"]["code"]) == (400, -32021)
    assert body["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    status, body = call("test_header_param", {"region": "us-west1"}, {"mcp-param-region": "us-west1"})
    assert status == 200 and body["result"]["content"][0]["text"] == "ran in us-west1"
    status, body = call("test_header_param", {"region": "us-west1"})
    assert (status, body["error"]["code"]) == (400, -32020)
    status, body = call("test_logging_tool", {})
    assert status == 200 and json.dumps(body).count("notifications/message") == 0


@pytest.mark.feature("SKILL-08", "CONF-01")
def test_conformance_run_counts_a_skipped_check_as_not_passed(tmp_path):
    """A scenario whose checks were skipped proved nothing: not passed, and expected only when
    listed under ``skipped:`` with skips as its only problems."""
    from conformance.run import Outcome, checks_outcome, expected_failures, only_skipped

    checks = tmp_path / "checks.json"
    checks.write_text('[{"id": "a", "status": "SUCCESS"}, {"id": "b", "status": "SKIPPED", '
                      '"errorMessage": "not declared"}]')
    outcome = checks_outcome("sep-2640-skills-manifest", checks)
    assert not outcome.passed and outcome.problems == ["SKIPPED b: not declared"]
    assert only_skipped(outcome, {"sep-2640-skills-manifest"}) == {"sep-2640-skills-manifest"}
    assert only_skipped(outcome, set()) == set()
    # A client scenario's conditional checks may be skipped; not all of them.
    assert checks_outcome("request-metadata", checks, client=True).passed
    checks.write_text('[{"id": "i", "status": "INFO"}, {"id": "b", "status": "SKIPPED"}]')
    assert checks_outcome("x", checks, client=True).problems == ["SKIPPED x: every check was skipped"]
    failed = Outcome("x", False, ["SKIPPED b: -", "FAILURE c: wrong"])
    assert only_skipped(failed, {"x"}) == set()
    assert "tasks-status-notifications" in expected_failures("skipped")
    assert not expected_failures("server") and not expected_failures("client")
