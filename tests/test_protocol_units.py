"""Unit tests of the wire layer, ``mcp_protocol``: framing, versions, cancellation, content, schemas."""

from __future__ import annotations

import base64
import json
import math
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_protocol import json_schema, jsonrpc, versions
from mcp_protocol.cancellation import Cancellation, CancelledError
from mcp_protocol.content import (
    Audio,
    BlobContents,
    EmbeddedResource,
    Image,
    ResourceLink,
    Text,
    TextContents,
    to_wire,
)
from mcp_protocol.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mcp_protocol.json_schema import MAX_SCHEMA_DEPTH, MAX_SUBSCHEMA_COUNT, SchemaError
from mcp_server import Tool

from .waiting import PATIENCE
from .wire import check_server_message, has_definition, validate

# jsonrpc.classify -------------------------------------------------------------------------------


def _error_code(incoming: jsonrpc.Incoming) -> int:
    assert incoming.kind == "invalid" and incoming.error is not None
    return incoming.error["error"]["code"]


@pytest.mark.feature("CORE-01")
def test_classify_request_keeps_id_method_and_params():
    message = {"jsonrpc": "2.0", "id": "r-1", "method": "tools/call", "params": {"name": "x"}}
    incoming = jsonrpc.classify(message)
    assert (incoming.kind, incoming.id, incoming.method, incoming.params) == \
        ("request", "r-1", "tools/call", {"name": "x"})
    assert incoming.message is message and incoming.error is None
    positional = jsonrpc.classify({"jsonrpc": "2.0", "id": 0, "method": "m", "params": [1, 2]})
    assert (positional.kind, positional.id, positional.params) == ("request", 0, [1, 2])


@pytest.mark.feature("CORE-04", "CORE-08")
def test_classify_notifications():
    absent = jsonrpc.classify({"jsonrpc": "2.0", "method": "notifications/initialized"})
    null_id = jsonrpc.classify({"jsonrpc": "2.0", "id": None, "method": "ping", "params": {"a": 1}})
    assert (absent.kind, absent.id, absent.method, absent.params) == \
        ("notification", None, "notifications/initialized", None)
    assert (null_id.kind, null_id.method, null_id.params) == ("notification", "ping", {"a": 1})


def test_classify_responses():
    result = jsonrpc.classify({"jsonrpc": "2.0", "id": 4, "result": {}})
    error = jsonrpc.classify({"jsonrpc": "2.0", "id": "s-1", "error": {"code": -1, "message": "no"}})
    assert (result.kind, result.id) == ("response", 4)
    assert (error.kind, error.id) == ("response", "s-1")
    bad_id = jsonrpc.classify({"jsonrpc": "2.0", "id": 1.5, "result": {}})
    assert _error_code(bad_id) == INVALID_REQUEST and bad_id.error["id"] is None


@pytest.mark.feature("CORE-03")
@pytest.mark.parametrize("version", ["1.0", 2.0, None, "2.0 "])
def test_classify_rejects_other_jsonrpc_versions(version):
    echoed = jsonrpc.classify({"jsonrpc": version, "id": 8, "method": "ping"})
    assert _error_code(echoed) == INVALID_REQUEST and echoed.error["id"] == 8 and echoed.id == 8
    unreadable = jsonrpc.classify({"jsonrpc": version, "id": [8], "method": "ping"})
    assert _error_code(unreadable) == INVALID_REQUEST and unreadable.error["id"] is None
    missing = jsonrpc.classify({"id": "x", "method": "ping"})
    assert _error_code(missing) == INVALID_REQUEST and missing.error["id"] == "x"


@pytest.mark.feature("CORE-04")
@pytest.mark.parametrize("value, valid", [
    (0, True), (-1, True), (2**63, True), ("a", True), ("A-z_09", True), ("0123", True),
    (None, False), (1.0, False), (1.5, False), (True, False), (False, False), ("", False),
    ("a b", False), ("a.b", False), ("ü", False), ("a\n", False), ([], False), ({}, False),
])
def test_id_validation(value, valid):
    assert jsonrpc.is_valid_id(value) is valid
    message = {"jsonrpc": "2.0", "id": value, "method": "ping"}
    incoming = jsonrpc.classify(message)
    if valid:
        assert incoming.kind == "request" and incoming.id == value
    elif value is None:
        assert incoming.kind == "notification"
    else:
        assert _error_code(incoming) == INVALID_REQUEST and incoming.error["id"] is None


@pytest.mark.feature("CORE-05")
@pytest.mark.parametrize("method", [None, 1, ["ping"], "rpc.", "rpc.x"])
def test_classify_rejects_bad_method_names(method):
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 3}
    if method is not None:
        message["method"] = method
    incoming = jsonrpc.classify(message)
    assert _error_code(incoming) == INVALID_REQUEST and incoming.error["id"] == 3
    assert jsonrpc.classify({"jsonrpc": "2.0", "id": 3, "method": "rpcx"}).kind == "request"


@pytest.mark.feature("CORE-06")
@pytest.mark.parametrize("params, ok", [
    ({}, True), ([], True), (None, True), ("s", False), (0, False), (1.5, False), (True, False),
])
def test_classify_checks_params_shape(params, ok):
    incoming = jsonrpc.classify({"jsonrpc": "2.0", "id": 2, "method": "m", "params": params})
    if ok:
        assert incoming.kind == "request"
    else:
        assert _error_code(incoming) == INVALID_PARAMS and incoming.error["id"] == 2


@pytest.mark.feature("CORE-11")
@pytest.mark.parametrize("message", [1, "x", None, [], True])
def test_classify_non_objects(message):
    incoming = jsonrpc.classify(message)
    assert _error_code(incoming) == INVALID_REQUEST
    assert incoming.error == {"jsonrpc": "2.0", "id": None,
                              "error": {"code": INVALID_REQUEST, "message": "Request must be an object"}}


@pytest.mark.feature("CORE-02")
def test_decode_and_parse_error():
    assert jsonrpc.decode('{"a": [1, "é"]}') == {"a": [1, "é"]}
    assert jsonrpc.decode(b'{"a": 1}') == {"a": 1}
    for text in ("{", "", "nan?", b"\xff"):
        with pytest.raises(ValueError):
            jsonrpc.decode(text)
    error = jsonrpc.parse_error()
    assert error["id"] is None and error["error"]["code"] == PARSE_ERROR
    assert error["error"]["message"].startswith("Parse error")
    check_server_message(error, "2025-11-25")


@pytest.mark.feature("CORE-02")
def test_the_codec_reads_and_writes_what_the_standard_library_does_where_orjson_would_differ():
    # Integers past 64 bits (orjson reads them as floats, and refuses to write them): exact.
    big = [2**64, -(2**63) - 1, 10**30, -(10**19)]
    decoded = jsonrpc.decode(json.dumps(big).encode())
    assert decoded == big and all(type(value) is int for value in decoded)
    assert jsonrpc.encode(big) == json.dumps(big, separators=(",", ":"))
    # Keys that are not strings are written as json writes them.
    assert jsonrpc.encode({1: "a", None: 2}) == '{"1":"a","null":2}'
    # NaN and infinities are no JSON: refused, not written as null; a real null is kept.
    for value in ({"x": math.nan}, [math.inf], -math.inf):
        with pytest.raises(ValueError):
            jsonrpc.encode(value)
    assert jsonrpc.encode({"x": None, "s": "é"}) == '{"x":null,"s":"é"}'
    # A lone surrogate goes out as U+FFFD; a datetime or a dataclass is refused, as json does.
    assert jsonrpc.encode("\ud800x") == '"\ufffdx"'
    @dataclass
    class Point:
        x: int

    for value in ({"at": datetime.now(UTC)}, [Point(1)]):
        with pytest.raises(TypeError):
            jsonrpc.encode(value)
    # Refusals say what the standard decoder says.
    with pytest.raises(jsonrpc.DecodeError, match="overflows a double"):
        jsonrpc.decode(b"[1e400]")
    for text in (b'"\xed\xa0\x80"', b"[NaN]", b"[1,]", '"\ud800"'):
        with pytest.raises(jsonrpc.DecodeError, match=r"^Parse error: Invalid JSON"):
            jsonrpc.decode(text)
    with pytest.raises(jsonrpc.DecodeError, match="NUL"):
        jsonrpc.decode(b'{"id":1,"x":"\\u0000"}')


@pytest.mark.feature("CORE-02")
def test_json_depth_limit():
    limit = jsonrpc.MAX_JSON_DEPTH
    assert limit == 64
    assert not jsonrpc.depth_exceeds(b"[" * limit + b"]" * limit, limit)
    assert jsonrpc.depth_exceeds(b"[" * (limit + 1) + b"]" * (limit + 1), limit)
    assert jsonrpc.depth_exceeds(b'{"a":' * (limit + 1) + b"1" + b"}" * (limit + 1), limit)
    # Brackets inside strings (escaped quotes included) do not count.
    quoted = json.dumps({"s": '\\"[[[' * 100, "t": "{" * 200})
    assert jsonrpc.decode(quoted) == json.loads(quoted)
    # Many siblings are not depth.
    assert not jsonrpc.depth_exceeds(b"[" + b",".join([b"[]"] * 500) + b"]", 2)
    with pytest.raises(ValueError, match="deeper than 64"):
        jsonrpc.decode("[" * 65 + "]" * 65)


def test_message_builders():
    assert jsonrpc.response(1, {"x": 1}) == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    assert jsonrpc.error_response("a", -32601, "Method not found") == \
        {"jsonrpc": "2.0", "id": "a", "error": {"code": -32601, "message": "Method not found"}}
    assert jsonrpc.error_response(None, -1, "m", data=0)["error"]["data"] == 0
    assert jsonrpc.request(5, "ping") == {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    assert jsonrpc.request(5, "m", {"a": 1})["params"] == {"a": 1}
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.encode({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}'
    for not_json in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            jsonrpc.encode({"x": not_json})


# versions ---------------------------------------------------------------------------------------
@pytest.mark.feature("LIFE-03")
@pytest.mark.parametrize("requested, pinned, expected", [
    ("2025-11-25", None, "2025-11-25"),
    ("2025-06-18", None, "2025-06-18"),
    ("2025-03-26", None, "2025-03-26"),
    ("2024-11-05", None, "2024-11-05"),
    ("2026-07-28", None, "2025-11-25"),
    ("2099-12-31", None, "2025-11-25"),
    ("2024-10-07", None, "2025-11-25"),
    ("", None, "2025-11-25"),
    (None, None, "2025-11-25"),
    (20251125, None, "2025-11-25"),
    ("2026-07-28", "2025-03-26", "2025-03-26"),
    ("2099-12-31", "2024-11-05", "2024-11-05"),
    ("2025-11-25", "2025-06-18", "2025-06-18"),
    ("2024-11-05", "2025-06-18", "2024-11-05"),
    ("2025-06-18", "2025-06-18", "2025-06-18"),
])
def test_negotiate(requested, pinned, expected):
    assert versions.negotiate(requested, pinned) == expected


@pytest.mark.feature("LIFE-03", "LIFE-11")
def test_version_predicates():
    assert all(versions.is_handshake_version(v) for v in versions.HANDSHAKE_VERSIONS)
    assert not versions.is_handshake_version("2026-07-28")
    assert versions.is_modern_version("2026-07-28")
    assert not versions.is_modern_version("2025-11-25")
    assert not versions.is_handshake_version(None) and not versions.is_modern_version(None)
    assert versions.at_most("2024-11-05", "2025-03-26") and versions.at_most("2025-03-26", "2025-03-26")
    assert not versions.at_most("2025-06-18", "2025-03-26")
    # Dates order as strings, newest first in the tables.
    assert list(versions.STABLE_VERSIONS) == sorted(versions.STABLE_VERSIONS, reverse=True)


# Cancellation -----------------------------------------------------------------------------------
def test_cancellation_flips_once_and_keeps_the_first_reason():
    token = Cancellation(request_id=42)
    assert not token.cancelled and token.reason is None
    token.raise_if_cancelled()  # no-op before
    assert token.cancel("user pressed stop") is True
    assert token.cancel("again") is False
    assert token.cancelled and token.reason == "user pressed stop"
    with pytest.raises(CancelledError) as raised:
        token.raise_if_cancelled()
    assert raised.value.request_id == 42 and raised.value.reason == "user pressed stop"
    assert "user pressed stop" in str(raised.value)
    assert str(CancelledError()) == "Request was cancelled"


def test_cancellation_listeners_run_exactly_once():
    token = Cancellation("r")
    calls: list[Any] = []
    token.on_cancel(calls.append)
    unhook = token.on_cancel(lambda t: calls.append("unhooked"))
    unhook()
    token.cancel()
    token.cancel()
    assert calls == [token]
    late: list[Any] = []
    token.on_cancel(late.append)  # already cancelled: runs at once
    assert late == [token]


def test_cancellation_from_other_threads():
    token = Cancellation()
    assert token.wait(0.01) is False
    woke = threading.Event()
    listener_calls: list[Any] = []
    token.on_cancel(listener_calls.append)

    def waiter() -> None:
        if token.wait(PATIENCE):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def canceller() -> None:
        barrier.wait(PATIENCE)
        results.append(token.cancel("race"))

    cancellers = [threading.Thread(target=canceller) for _ in range(8)]
    for t in cancellers:
        t.start()
    for t in [*cancellers, thread]:
        t.join(PATIENCE)
    assert woke.is_set()
    assert sorted(results) == [False] * 7 + [True]
    assert listener_calls == [token]


# Content ----------------------------------------------------------------------------------------
ANNOTATIONS = {"audience": ["user", "assistant"], "priority": 0.5}
META = {"com.example/k": {"v": 1}}
PNG = base64.b64encode(b"\x89PNG\r\n").decode()


@pytest.mark.feature("TOOL-19")
def test_content_blocks_with_annotations_and_meta():
    blocks = {
        "TextContent": (Text("hi", annotations=ANNOTATIONS, meta=META),
                        {"type": "text", "text": "hi", "annotations": ANNOTATIONS, "_meta": META}),
        "ImageContent": (Image(PNG, "image/png", annotations=ANNOTATIONS, meta=META),
                         {"type": "image", "data": PNG, "mimeType": "image/png",
                          "annotations": ANNOTATIONS, "_meta": META}),
        "AudioContent": (Audio(PNG, "audio/wav", annotations=ANNOTATIONS, meta=META),
                         {"type": "audio", "data": PNG, "mimeType": "audio/wav",
                          "annotations": ANNOTATIONS, "_meta": META}),
        "EmbeddedResource": (
            EmbeddedResource(TextContents("file:///a.txt", "body", "text/plain"),
                             annotations=ANNOTATIONS, meta=META),
            {"type": "resource",
             "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "body"},
             "annotations": ANNOTATIONS, "_meta": META}),
    }
    for definition, (block, expected) in blocks.items():
        assert block.to_dict() == expected
        assert to_wire(block) == expected
        for revision in ("2025-06-18", "2025-11-25"):
            validate(expected, revision, definition)
            validate(expected, revision, "ContentBlock")


@pytest.mark.feature("TOOL-19")
@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-11-25"])
def test_plain_content_blocks_in_every_revision(revision):
    blocks = [
        ("TextContent", Text("hi"), {"type": "text", "text": "hi"}),
        ("ImageContent", Image(PNG, "image/png"), {"type": "image", "data": PNG, "mimeType": "image/png"}),
        ("EmbeddedResource", EmbeddedResource(BlobContents("file:///b", PNG)),
         {"type": "resource", "resource": {"uri": "file:///b", "blob": PNG}}),
    ]
    if has_definition(revision, "AudioContent"):
        blocks.append(("AudioContent", Audio(PNG, "audio/wav"),
                       {"type": "audio", "data": PNG, "mimeType": "audio/wav"}))
    for definition, block, expected in blocks:
        assert block.to_dict() == expected
        validate(expected, revision, definition)


@pytest.mark.feature("RES-09")
@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
def test_resource_contents_shapes(revision):
    text = TextContents("file:///a.txt", "hello", mime_type="text/plain")
    blob = BlobContents("file:///b.bin", PNG, mime_type="application/octet-stream")
    assert text.to_dict() == {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}
    assert blob.to_dict() == {"uri": "file:///b.bin", "mimeType": "application/octet-stream", "blob": PNG}
    assert TextContents("file:///a", "").to_dict() == {"uri": "file:///a", "text": ""}
    assert BlobContents("file:///b", "").to_dict() == {"uri": "file:///b", "blob": ""}
    validate(text.to_dict(), revision, "TextResourceContents")
    validate(blob.to_dict(), revision, "BlobResourceContents")
    if revision >= "2025-06-18":
        with_meta = TextContents("file:///a", "x", meta=META).to_dict()
        assert with_meta == {"uri": "file:///a", "text": "x", "_meta": META}
        validate(with_meta, revision, "TextResourceContents")


@pytest.mark.feature("RES-15")
def test_blob_round_trip_and_embedding():
    raw = bytes(range(256)) * 3
    blob = BlobContents.from_bytes("file:///all-bytes", raw, mime_type="application/octet-stream")
    assert base64.b64decode(blob.to_dict()["blob"]) == raw
    embedded = EmbeddedResource(blob).to_dict()
    assert embedded["type"] == "resource" and base64.b64decode(embedded["resource"]["blob"]) == raw
    assert EmbeddedResource(TextContents("file:///t", "text")).to_dict()["resource"] == \
        {"uri": "file:///t", "text": "text"}
    as_dict = {"uri": "file:///d", "text": "given as a dict"}
    assert EmbeddedResource(as_dict).to_dict() == {"type": "resource", "resource": as_dict}
    validate(embedded, "2025-11-25", "EmbeddedResource")


def test_resource_link():
    minimal = ResourceLink("file:///report.pdf", "report")
    assert minimal.to_dict() == {"type": "resource_link", "uri": "file:///report.pdf", "name": "report"}
    icons = [{"src": "https://example.test/pdf.png", "mimeType": "image/png"}]
    full = ResourceLink("file:///report.pdf", "report", title="Q3 report", description="Numbers",
                        mime_type="application/pdf", size=1024, icons=icons,
                        annotations=ANNOTATIONS, meta=META)
    assert full.to_dict() == {
        "type": "resource_link", "uri": "file:///report.pdf", "name": "report", "title": "Q3 report",
        "description": "Numbers", "size": 1024, "icons": icons, "mimeType": "application/pdf",
        "annotations": ANNOTATIONS, "_meta": META,
    }
    assert ResourceLink("file:///e", "e", size=0).to_dict()["size"] == 0
    validate(minimal.to_dict(), "2025-06-18", "ResourceLink")
    validate(minimal.to_dict(), "2025-06-18", "ContentBlock")
    validate(full.to_dict(), "2025-11-25", "ResourceLink")
    validate(full.to_dict(), "2025-11-25", "ContentBlock")


def test_to_wire_passes_dicts_through():
    block = {"type": "text", "text": "already a dict"}
    assert to_wire(block) is block
    assert to_wire(Text("t")) == {"type": "text", "text": "t"}


# JSON Schema bounds -----------------------------------------------------------------------------
def _nested(depth: int) -> dict:
    """A schema whose dict nesting is exactly ``depth`` levels (properties -> x -> ...)."""
    schema: dict = {"type": "string"}
    for _ in range((depth - 1) // 2):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return 1 + max((_depth(v) for v in node), default=0)
    return 0


@pytest.mark.feature("TOOL-09")
def test_schema_depth_bound():
    deepest_allowed = _nested(MAX_SCHEMA_DEPTH - 1)
    assert MAX_SCHEMA_DEPTH == 64 and _depth(deepest_allowed) <= MAX_SCHEMA_DEPTH
    json_schema.check_schema(deepest_allowed)
    too_deep = _nested(MAX_SCHEMA_DEPTH + 2)
    assert _depth(too_deep) > MAX_SCHEMA_DEPTH
    with pytest.raises(SchemaError, match="MAX_SCHEMA_DEPTH"):
        json_schema.check_schema(too_deep)


@pytest.mark.feature("TOOL-09")
def test_schema_subschema_count_bound():
    def with_properties(count: int) -> dict:
        # The root plus ``count`` property schemas plus the properties object itself.
        return {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(count)}}

    assert MAX_SUBSCHEMA_COUNT == 10_000
    json_schema.check_schema(with_properties(MAX_SUBSCHEMA_COUNT - 2))
    with pytest.raises(SchemaError, match="MAX_SUBSCHEMA_COUNT"):
        json_schema.check_schema(with_properties(MAX_SUBSCHEMA_COUNT))


@pytest.mark.feature("TOOL-09")
@pytest.mark.parametrize("schema", [
    {"$ref": "https://example.test/schema.json"},
    {"properties": {"a": {"$ref": "other.json#/x"}}},
    {"allOf": [{"$ref": "file:///etc/passwd"}]},
    {"$dynamicRef": "https://example.test/s#meta"},
    {"items": {"$ref": 5}},
])
def test_only_same_document_references(schema, monkeypatch):
    attempts: list[Any] = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, *a: attempts.append(a))
    with pytest.raises(SchemaError, match="same-document"):
        json_schema.check_schema(schema)
    with pytest.raises(SchemaError, match="same-document"):
        Tool.define(lambda arguments: "ok", name="remote", input_schema=schema)
    assert attempts == []


@pytest.mark.feature("TOOL-09")
def test_local_references_validate_without_io(monkeypatch):
    schema = {
        "$defs": {"word": {"type": "string", "minLength": 2}},
        "type": "object",
        "properties": {"w": {"$ref": "#/$defs/word"},
                       "list": {"type": "array", "items": {"$ref": "#/$defs/word"}}},
    }
    attempts: list[Any] = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, *a: attempts.append(a))
    json_schema.check_schema(schema)
    assert json_schema.validation_errors(schema, {"w": "ok", "list": ["fine"]}) == []
    problems = json_schema.validation_errors(schema, {"w": "x", "list": ["ok", 3]})
    assert len(problems) == 2 and problems[0].startswith("list/1:") and problems[1].startswith("w:")
    assert attempts == []


@pytest.mark.feature("TOOL-10")
def test_metaschema_check_and_validator_cache():
    for bad in ({"type": 5}, {"required": "a"}, {"minLength": -1}, ["not", "a", "schema"], "string"):
        with pytest.raises(SchemaError):
            json_schema.check_schema(bad)
    with pytest.raises(SchemaError):
        Tool.define(lambda arguments: "ok", name="bad", input_schema={"properties": {"a": {"type": 5}}})
    assert json_schema._validator.cache_info().maxsize == json_schema.VALIDATOR_CACHE_SIZE == 1000
    schema = {"type": "object", "properties": {"unique-for-cache-test": {"type": "integer"}}}
    json_schema.check_schema(schema)
    hits = json_schema._validator.cache_info().hits
    json_schema.check_schema(json.loads(json.dumps(schema)))  # an equal schema, another object
    assert json_schema._validator.cache_info().hits == hits + 1


def test_with_draft():
    assert json_schema.with_draft({"type": "object"}) == \
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}
    own = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert json_schema.with_draft(own) is own


def test_envelope_classification_and_validation():
    from mcp_protocol import envelope
    from mcp_protocol.errors import MCPError

    meta = {envelope.PROTOCOL_VERSION_KEY: "2026-07-28",
            envelope.CLIENT_CAPABILITIES_KEY: {"roots": {}},
            envelope.CLIENT_INFO_KEY: {"name": "c", "version": "1"},
            envelope.LOG_LEVEL_KEY: "debug"}
    parsed = envelope.parse_envelope({"_meta": meta})
    assert parsed == envelope.Envelope("2026-07-28", {"roots": {}}, {"name": "c", "version": "1"},
                                       "debug")
    # A progress token or trace keys alone keep a request in the handshake era (MOD-04).
    assert envelope.parse_envelope({"_meta": {"progressToken": 1, "traceparent": "x"}}) is None
    assert not envelope.is_enveloped({"_meta": {"progressToken": 1}})
    with pytest.raises(MCPError) as malformed:
        envelope.parse_envelope({"_meta": {envelope.PROTOCOL_VERSION_KEY: "2026-07-28",
                                           envelope.CLIENT_INFO_KEY: "me"}})
    assert malformed.value.code == -32602
    assert malformed.value.data == {"invalidKeys": [envelope.CLIENT_CAPABILITIES_KEY,
                                                    envelope.CLIENT_INFO_KEY]}
    with pytest.raises(MCPError) as unknown:
        envelope.parse_envelope({"_meta": {envelope.PROTOCOL_VERSION_KEY: "2025-11-25",
                                           envelope.CLIENT_CAPABILITIES_KEY: {}}})
    assert unknown.value.code == -32022
    assert unknown.value.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
