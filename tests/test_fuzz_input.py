"""Property-based fuzzing of what reads untrusted bytes: the JSON-RPC layer, SSE framing and
parsing, and the Streamable HTTP endpoint (bodies, headers, ids, nesting).

The properties: no exception escapes, every answer is a schema-valid message, a request that
parsed with a valid id gets an answer carrying that id, nothing answers with a 500, and no
exception text reaches the wire. Example counts are bounded so the module stays well under a
minute on a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_client.errors import TransportError
from mcp_client.transports.sse import ServerSentEvent, SSEParser
from mcp_protocol import jsonrpc, sse
from mcp_server import Configuration, Server
from mcp_server.http import StreamableHTTPTransport

from .http_support import call_asgi
from .wire import check_server_message

REVISION = "2025-11-25"
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXCEPTION_TEXT = re.compile(r"Traceback|File \"|\b[A-Z]\w*(Error|Exception)\b|object at 0x")

# JSON values as a hostile client writes them: any string (NUL and surrogates included), any
# number, nesting.
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)
ids = st.integers() | st.text(max_size=8) | st.none() | st.floats() | st.booleans() | st.just([1])
methods = st.sampled_from(["ping", "initialize", "tools/list", "tools/call", "resources/read",
                           "resources/subscribe", "prompts/get", "completion/complete",
                           "logging/setLevel", "notifications/initialized", "no/such"]) | st.text(max_size=10)


@st.composite
def messages(draw) -> Any:
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0", None]))}
    if draw(st.booleans()):
        message["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        message["method"] = draw(methods)
    if draw(st.booleans()):
        message["params"] = draw(st.dictionaries(st.sampled_from(["name", "uri", "arguments", "x"]),
                                                 json_values, max_size=3) | json_values)
    if draw(st.integers(0, 9)) == 0:
        message["result"] = draw(json_values)
    return message


def as_text(value: Any) -> str:
    """JSON text of ``value``, whatever it holds (json.dumps writes what it is given)."""
    return json.dumps(value, ensure_ascii=draw_ascii(value))


def draw_ascii(value: Any) -> bool:
    # Escaped form for surrogates (as a client would send them); raw UTF-8 for the rest.
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


bodies = (
    st.binary(max_size=200)
    | messages().map(lambda m: as_text(m).encode("utf-8"))
    | st.builds(lambda d, m: as_text({**m, "params": {"x": json.loads(nested(d))}}).encode(),
                st.integers(0, 200), messages())
    | st.sampled_from([b"NaN", b"[1e999]", b'{"id":1,"x":-Infinity}', b"[" * 5000, b"\xed\xa0\x80",
                       b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\\u0000"}}'])
)


def check_answer(answer: Any) -> None:
    check_server_message(answer, REVISION)
    assert not EXCEPTION_TEXT.search(json.dumps(answer)), answer


# The JSON-RPC layer ------------------------------------------------------------------------------
@FUZZ
@given(text=st.binary(max_size=300) | st.text(max_size=300) | bodies, depth=st.integers(1, 300))
def test_decode_returns_a_value_or_a_clean_refusal(text, depth):
    try:
        value = jsonrpc.decode(text, depth)
    except jsonrpc.DecodeError as refused:
        check_answer(refused.response())
        return
    # What is accepted can be answered: it encodes to UTF-8 and holds no NUL, no infinity.
    encoded = jsonrpc.encode(value)
    encoded.encode("utf-8")
    assert "\\u0000" not in encoded.replace("\\\\", "")
    assert depth_of(value) <= depth


def depth_of(value: Any) -> int:
    """Nesting depth, computed the plain recursive way (the reference for the decoder's walk)."""
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


def keepable(value: Any) -> bool:
    """No infinity, and no string (key or value) with NUL or a lone surrogate."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\0" not in value and not any(0xD800 <= ord(char) <= 0xDFFF for char in value)
    if isinstance(value, list):
        return all(map(keepable, value))
    if isinstance(value, dict):
        return all(map(keepable, value)) and all(map(keepable, value.values()))
    return True


# Strings full of what the depth measure must see through: brackets, quotes, backslashes.
tricky_text = st.text(alphabet='[]{}"\\/ ,:au\n', max_size=8)
tricky_values = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=30,
)


@FUZZ
@given(value=tricky_values, wraps=st.integers(0, 20), limit=st.integers(1, 30),
       indent=st.none() | st.integers(0, 2))
def test_the_depth_measured_on_the_text_is_the_depth_of_the_value(value, wraps, limit, indent):
    for _ in range(wraps):
        value = [value, {"k": None}] if wraps % 2 else {"w": value}
    text = json.dumps(value, indent=indent).encode()
    assert jsonrpc.depth_exceeds(text, limit) == (depth_of(value) > limit)


@FUZZ
@given(value=json_values, depth=st.integers(1, 12))
def test_decode_refuses_exactly_what_is_too_deep_or_cannot_be_kept(value, depth):
    text = as_text(value)
    refused = depth_of(value) > depth or not keepable(value)
    try:
        decoded = jsonrpc.decode(text.encode("utf-8"), depth)
    except jsonrpc.DecodeError as error:
        assert refused, (error, text)
        return
    assert not refused and decoded == value


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type throughout (Python has 1 == 1.0 == True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(value, b[key]) for key, value in a.items())
    return a == b


# With integers of any size: 64 bits is where orjson stops reading and writing them exactly.
wide_values = st.recursive(
    scalars | st.integers(-(2**80), 2**80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


def has_float(value: Any, test: Any = lambda number: True) -> bool:
    if isinstance(value, float):
        return test(value)
    if isinstance(value, list):
        return any(has_float(item, test) for item in value)
    return isinstance(value, dict) and any(has_float(item, test) for item in value.values())


@FUZZ
@given(value=wide_values)
def test_the_codec_reads_and_writes_json_as_the_standard_library_does(value):
    text = as_text(value)
    if keepable(value):
        assert same(jsonrpc.decode(text.encode("utf-8")), json.loads(text))
    if has_float(value, lambda number: not math.isfinite(number)):
        with pytest.raises(ValueError):
            jsonrpc.encode(value)
        return
    written = jsonrpc.encode(value)
    written.encode("utf-8")  # a lone surrogate went out as U+FFFD
    if keepable(value):
        assert same(json.loads(written), value)
        if not has_float(value):  # a float may take another form (1e-07, 1e-7), never another value
            assert written == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@FUZZ
@given(message=messages() | json_values)
def test_classify_never_raises_and_its_errors_are_valid(message):
    incoming = jsonrpc.classify(message)
    assert incoming.kind in ("request", "notification", "response", "invalid")
    if incoming.kind == "invalid":
        check_answer(incoming.error)
        if isinstance(message, dict) and jsonrpc.is_valid_id(message.get("id")):
            assert incoming.error["id"] == message["id"]
    if incoming.kind == "request":
        assert jsonrpc.is_valid_id(incoming.id)


# SSE framing and the client's parser --------------------------------------------------------------
event_ids = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=["Cs"]), max_size=20)


@FUZZ
@given(payloads=st.lists(messages() | json_values, min_size=1, max_size=4),
       event_id=st.none() | event_ids, retry=st.none() | st.integers(0, 10**6),
       cuts=st.lists(st.integers(0, 4000), max_size=6))
def test_sse_framing_round_trips_through_the_client_parser(payloads, event_id, retry, cuts):
    framed, expected = b"", []
    for payload in payloads:
        data = json.dumps(payload, ensure_ascii=True)
        framed += sse.event(data, event_id=event_id, retry_ms=retry)
        expected.append(ServerSentEvent(data, event_id, None, retry))
        framed += sse.comment("keepalive")
    parser = SSEParser(max_event_bytes=1 << 20)
    events, start = [], 0
    for cut in [*sorted({min(c, len(framed)) for c in cuts}), len(framed)]:
        events += parser.feed(framed[start:cut])
        start = cut
    assert events == expected


@FUZZ
@given(chunks=st.lists(st.binary(max_size=200), max_size=8), limit=st.integers(1, 400))
def test_the_sse_parser_takes_any_bytes(chunks, limit):
    parser = SSEParser(max_event_bytes=limit)
    try:
        for chunk in chunks:
            for event in parser.feed(chunk):
                assert isinstance(event.data, str)
    except TransportError as error:
        assert "exceeds max_message_bytes" in str(error)


# The HTTP endpoint (in process) -------------------------------------------------------------------
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40)
header_values = {
    "accept": st.sampled_from(["application/json, text/event-stream", "application/json", "*/*",
                               "text/html"]) | header_text,
    "content-type": st.sampled_from(["application/json", "application/json; charset=utf-8"]) | header_text,
    "origin": st.sampled_from(["http://127.0.0.1", "http://127.0.0.1:99999", "http://[::1",
                               "null", "http://evil.example"]) | header_text,
    "host": st.sampled_from(["127.0.0.1", "127.0.0.1:8000", "localhost:x", "[::1]:70000"]) | header_text,
    "mcp-protocol-version": st.sampled_from(["2025-11-25", "2024-11-05", "1999-01-01"]) | header_text,
    "mcp-method": methods,
    "mcp-name": header_text,
}


@st.composite
def headers(draw) -> dict[str, str]:
    chosen = {"host": "127.0.0.1", "content-type": "application/json",
              "accept": "application/json, text/event-stream"}
    for name in draw(st.lists(st.sampled_from(sorted(header_values)), unique=True, max_size=3)):
        chosen[name] = draw(header_values[name])
    return chosen


def fuzz_server() -> tuple[Server, list[BaseException]]:
    reported: list[BaseException] = []
    server = Server("fuzz", configuration=Configuration(
        exception_reporter=lambda exc, context: reported.append(exc)))

    @server.tool
    def echo(message: str) -> str:
        return message

    return server, reported


@FUZZ
@given(body=bodies, request_headers=headers(), depth=st.sampled_from([10, 64, 200]))
def test_the_endpoint_answers_every_post_cleanly(body, request_headers, depth):
    server, reported = fuzz_server()
    transport = StreamableHTTPTransport(server, stateless=True, max_json_depth=depth)
    reply = asyncio.run(call_asgi(transport.as_asgi(), "POST", request_headers, [body]))
    status = reply.start["status"]
    assert status in (200, 202, 400, 403, 404, 406, 413, 415), (status, reply.body)
    assert reported == []
    if status == 202:
        assert reply.body == b""
        return
    answer = json.loads(reply.body.decode("utf-8"))
    check_answer(answer)
    sent = _parsed_request(body)
    if status == 200 and sent is not None:
        assert answer["id"] == sent["id"]  # a request's answer is never lost or misdirected
    if status == 400 and sent is not None and "Parse error" not in answer["error"]["message"]:
        assert answer["id"] in (sent["id"], None)


def _parsed_request(body: bytes) -> dict | None:
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict) and "method" in message and jsonrpc.is_valid_id(message.get("id")):
        return message
    return None


@pytest.mark.parametrize("depth", [10, 200])
def test_the_fuzzed_bodies_include_the_depth_limits(depth):
    """The generators above reach past each configured depth (so the fuzzing covers refusals)."""
    body = as_text({"jsonrpc": "2.0", "id": 1, "method": "ping",
                    "params": {"x": json.loads(nested(depth))}}).encode()
    with pytest.raises(jsonrpc.DecodeError, match=f"deeper than {depth} levels"):
        jsonrpc.decode(body, depth)
