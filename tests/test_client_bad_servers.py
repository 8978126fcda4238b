"""Servers that misbehave get clear errors from the client, never a hang.

Small scripted fakes: stdio servers written as Python scripts, and a Streamable HTTP server on a
loopback port whose every reply the test scripts (tests/client_support.py). Each one answers the
handshake properly, then misbehaves on the next request: it never answers (read timeout), sends a
message over the size limit, sends malformed JSON or an answer to an id nobody asked, or goes away
mid-call. Every wait is bounded; the client's own messages are still schema-checked.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from mcp_client import (
    AsyncClient,
    ConnectionClosedError,
    TransportError,
    ValidationError,
)

from .client_support import (
    WAIT,
    CheckedHTTPTransport,
    FakeHTTPServer,
    Reply,
    every_message_checked,
    script_stdio,
)


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


# stdio -----------------------------------------------------------------------------------------

LOOP = """
import json, sys, time

def send(message):
    sys.stdout.write((message if isinstance(message, str) else json.dumps(message)) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    request = json.loads(line)
    if "method" not in request or "id" not in request:
        continue
    if request["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": request["id"], "result": {
            "protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "bad", "version": "1"}}})
    else:
        respond(request)
"""


def bad_stdio(respond: str, **options) -> AsyncClient:
    """A client of a stdio server whose ``respond(request)`` is the given Python source."""
    return AsyncClient(script_stdio(respond + LOOP, **options))


@pytest.mark.feature("CSTDIO-03")
async def test_stdio_server_that_never_answers():
    client = bad_stdio("def respond(request):\n    pass\n", read_timeout=0.5)
    await client.connect(mode="legacy")
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"no answer to tools/call within read_timeout \(0.5 s\)"):
        await asyncio.wait_for(client.call_tool("anything"), WAIT)
    assert time.monotonic() - started >= 0.45  # the read timeout, not before its time
    await client.close()


@pytest.mark.feature("CSTDIO-04")
@pytest.mark.parametrize("newline", [True, False])
async def test_stdio_server_that_sends_a_message_over_max_line_bytes(newline):
    oversized = (
        "def respond(request):\n"
        "    text = json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'result': {'content': [\n"
        "        {'type': 'text', 'text': 'x' * 20000}]}})\n"
        f"    sys.stdout.write(text + ('\\n' if {newline} else ''))\n"
        "    sys.stdout.flush()\n"
        "    time.sleep(5)\n"
    )
    client = bad_stdio(oversized, max_line_bytes=4096)
    await client.connect(mode="legacy")
    with pytest.raises(TransportError, match=r"exceeds max_line_bytes \(4096\)"):
        await asyncio.wait_for(client.call_tool("big"), WAIT)
    with pytest.raises(TransportError, match="max_line_bytes"):  # the stream is not trusted after it
        await asyncio.wait_for(client.ping(), WAIT)
    await client.close()


@pytest.mark.feature("CSTDIO-05")
async def test_stdio_server_that_sends_malformed_json():
    malformed = (
        "calls = []\n"
        "def respond(request):\n"
        "    calls.append(request)\n"
        "    if len(calls) == 1:\n"
        "        send('{\"jsonrpc\": \"2.0\", \"id\": ' + json.dumps(request['id'])\n"
        "             + ', \"result\": {oops')\n"
        "    else:\n"
        "        send({'jsonrpc': '2.0', 'id': request['id'], 'result': {}})\n"
    )
    client = bad_stdio(malformed)
    await client.connect(mode="legacy")
    with pytest.raises(TransportError, match="not JSON"):
        await asyncio.wait_for(client.ping(), WAIT)  # an error of its own, not the read timeout
    # One unreadable line does not end the connection.
    assert await asyncio.wait_for(client.ping(), WAIT) == {}
    await client.close()


async def test_stdio_server_that_answers_an_unknown_id():
    unknown = "def respond(request):\n    send({'jsonrpc': '2.0', 'id': 'nobody-asked', 'result': {}})\n"
    client = bad_stdio(unknown)
    await client.connect(mode="legacy")
    with pytest.raises(ValidationError, match="unknown request id 'nobody-asked'"):
        await asyncio.wait_for(client.ping(), WAIT)
    await client.close()


@pytest.mark.feature("CSTDIO-05")
async def test_stdio_server_that_exits_mid_call():
    dying = "def respond(request):\n    sys.stderr.write('giving up now\\n')\n    sys.exit(3)\n"
    client = bad_stdio(dying)
    await client.connect(mode="legacy")
    with pytest.raises(ConnectionClosedError, match=r"exited with status 3.*giving up now"):
        await asyncio.wait_for(client.call_tool("anything"), WAIT)
    with pytest.raises(ConnectionClosedError):  # and so is every later request, at once
        await asyncio.wait_for(client.ping(), WAIT)
    await client.close()


@pytest.mark.feature("CSTDIO-05")
async def test_stdio_frames_that_are_no_answer_are_skipped():
    noisy = (
        "def respond(request):\n"
        "    for frame in ('\"hello\"', '42', 'null', '[1, 2]', '{\"jsonrpc\": \"2.0\", \"result\": {}}',\n"
        "                  '{\"jsonrpc\": \"2.0\", \"id\": null,'\n"
        "                  ' \"error\": {\"code\": -32700, \"message\": \"x\"}}',\n"
        "                  '{\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\",'\n"
        "                  ' \"params\": {\"level\": \"info\", \"data\": \"still here\"}}', ''):\n"
        "        send(frame)\n"
        "    content = [{'type': 'text', 'text': 'ok'}]\n"
        "    send([{'jsonrpc': '2.0', 'id': request['id'], 'result': {'content': content}}])\n"
    )
    client = bad_stdio(noisy)
    logs: list[dict] = []
    client.on_log_message(logs.append)
    await client.connect(mode="legacy")
    result = await asyncio.wait_for(client.call_tool("anything"), WAIT)
    assert result.text == "ok"  # the answer came in a batch, after the noise
    assert logs == [{"level": "info", "data": "still here"}]
    await client.close()


# Streamable HTTP -------------------------------------------------------------------------------

def http_client(fake: FakeHTTPServer, **options) -> AsyncClient:
    return AsyncClient(CheckedHTTPTransport(fake.url, check_server=False, **options))


def on_tool_call(action):
    """A fake server's script: ``action(reply)`` for tools/call, the defaults for the rest."""

    def respond(reply: Reply):
        if reply.seen.rpc_method == "tools/call":
            return action(reply)
        return NotImplemented

    return respond


@pytest.mark.parametrize("streaming", [False, True])
async def test_http_server_that_never_answers(streaming):
    def silent(reply: Reply) -> None:
        if streaming:
            reply.sse_open()
            reply.event("", event_id="e-1")  # a priming event, then nothing
        reply.hold()

    with FakeHTTPServer(on_tool_call(silent)) as fake:
        client = http_client(fake, timeout=0.5)
        await client.connect(mode="legacy")
        started = time.monotonic()
        with pytest.raises(TransportError, match=r"0\.5 s"):
            await asyncio.wait_for(client.call_tool("anything"), WAIT)
        assert time.monotonic() - started >= 0.45  # the timeout, not before its time
        await client.close()


@pytest.mark.feature("CHTTP-03")
@pytest.mark.parametrize("streaming", [False, True])
async def test_http_server_that_sends_a_message_over_max_message_bytes(streaming):
    def big(reply: Reply) -> None:
        answer = {"jsonrpc": "2.0", "id": reply.seen.body["id"],
                  "result": {"content": [{"type": "text", "text": "x" * 20000}]}}
        if streaming:
            reply.sse_open()
            reply.event(answer)
        else:
            reply.json(answer)

    with FakeHTTPServer(on_tool_call(big)) as fake:
        client = http_client(fake, max_message_bytes=4096)
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match=r"exceeds max_message_bytes \(4096\)"):
            await asyncio.wait_for(client.call_tool("big"), WAIT)
        await client.close()


@pytest.mark.feature("CHTTP-02")
@pytest.mark.parametrize("streaming", [False, True])
async def test_http_server_that_sends_malformed_json(streaming):
    def malformed(reply: Reply) -> None:
        if streaming:
            reply.sse_open()
            reply.event('{"jsonrpc": "2.0", "id": oops}')
        else:
            reply.json(b'{"jsonrpc": "2.0", "result": {oops')

    with FakeHTTPServer(on_tool_call(malformed)) as fake:
        client = http_client(fake)
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match="not JSON"):
            await asyncio.wait_for(client.call_tool("anything"), WAIT)
        await client.close()


@pytest.mark.parametrize("streaming", [False, True])
async def test_http_server_that_answers_an_unknown_id(streaming):
    def stranger(reply: Reply) -> None:
        answer = {"jsonrpc": "2.0", "id": "nobody-asked", "result": {"content": []}}
        if streaming:
            reply.sse_open()
            reply.event(answer)
            reply.hold(1)
        else:
            reply.json(answer)

    with FakeHTTPServer(on_tool_call(stranger)) as fake:
        client = http_client(fake)
        await client.connect(mode="legacy")
        with pytest.raises(ValidationError, match="unknown request id 'nobody-asked'"):
            await asyncio.wait_for(client.call_tool("anything"), WAIT)
        await client.close()


@pytest.mark.feature("CHTTP-08")
async def test_http_server_that_goes_away_mid_call():
    def dies(reply: Reply) -> None:
        reply.sse_open()
        reply.event({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "info", "data": "working on it"}})
        # ...and the connection closes with no answer and no event id to resume from.

    with FakeHTTPServer(on_tool_call(dies)) as fake:
        client = http_client(fake)
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match="closed the response stream before answering"):
            await asyncio.wait_for(client.call_tool("anything"), WAIT)
        assert [s.method for s in fake.requests].count("GET") == 0  # nothing to resume
    # The whole server is gone now.
    with pytest.raises(TransportError, match=r"POST .* failed"):
        await asyncio.wait_for(client.ping(), WAIT)
    with pytest.raises(TransportError, match="DELETE"):  # a close that could not end the session says so
        await client.close()
    assert not client.connected and client.transport.session_id is None


@pytest.mark.feature("CHTTP-07")
@pytest.mark.parametrize(("scripted", "problem"), [
    (lambda reply: reply.status(202), "accepted the tools/call request with 202"),
    (lambda reply: reply.status(200, content_type="application/json"), "empty 200 response"),
    (lambda reply: reply.status(200, b"<html>hello</html>", content_type="text/html"),
     r"not JSON .*text/html"),
])
async def test_http_answers_that_can_never_complete_a_request(scripted, problem):
    with FakeHTTPServer(on_tool_call(scripted)) as fake:
        client = http_client(fake)
        await client.connect(mode="legacy")
        with pytest.raises(TransportError, match=problem):
            await asyncio.wait_for(client.call_tool("anything"), WAIT)
        await client.close()


@pytest.mark.feature("CHTTP-02")
async def test_http_stream_with_noise_before_the_answer():
    def noisy(reply: Reply) -> None:
        reply.sse_open()
        reply.raw(b": a comment\n\nevent: ping\n\n")
        reply.event("", event_id="1", retry=100)
        reply.event({"jsonrpc": "2.0", "result": {}})  # no id: skipped
        reply.event({"jsonrpc": "2.0", "id": reply.seen.body["id"],
                     "result": {"content": [{"type": "text", "text": "ok"}]}})

    with FakeHTTPServer(on_tool_call(noisy)) as fake:
        client = http_client(fake)
        await client.connect(mode="legacy")
        assert (await asyncio.wait_for(client.call_tool("anything"), WAIT)).text == "ok"
        await client.close()
    assert json.loads(json.dumps(fake.of("tools/call")[0].body))["params"]["name"] == "anything"
