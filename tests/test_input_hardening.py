"""Bad input gets a clean answer, and no request stalls or bloats a process.

Decoding (``mcp_protocol.jsonrpc.decode``) is checked on its own, then on the Streamable HTTP
endpoint (in process, and on a daphne process for what reaches the database and for uploads over
the limit) and over stdio. Every message the server writes is checked against the schema of its
revision.
"""

from __future__ import annotations

import io
import json
import select
import socket

import pytest

from mcp_protocol import jsonrpc
from mcp_protocol.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mcp_server import Server, StdioTransport
from mcp_server.handlers.params import MAX_SUBSCRIPTION_URI_LENGTH
from mcp_server.http import StreamableHTTPTransport
from mcp_server.http.checks import MAX_ORIGIN_LENGTH
from mcp_server.models import ResourceSubscription, Session

from .http_support import Client, call_asgi, error_of, post_headers, running, split_reply
from .wire import check_server_message

MIB = 1024 * 1024
REFUSED_STRING = "Invalid Request: strings must not contain NUL characters or lone UTF-16 surrogates"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def ping(request_id: object = 1, **params: object) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": params}


def refusal(text: str | bytes, max_depth: int = jsonrpc.MAX_JSON_DEPTH,
            max_containers: int = jsonrpc.MAX_JSON_CONTAINERS) -> dict:
    with pytest.raises(jsonrpc.DecodeError) as refused:
        jsonrpc.decode(text, max_depth, max_containers)
    answer = refused.value.response()
    check_server_message(answer, "2025-11-25")
    return answer


# Decoding ----------------------------------------------------------------------------------------
@pytest.mark.feature("CORE-02")
@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "[1e999]", "-1E400",
                                  "[" + "9" * 400 + ".0]"])
def test_nan_infinities_and_overflowing_numbers_are_invalid_json(text):
    answer = refusal(text)
    assert answer["error"]["code"] == PARSE_ERROR
    assert answer["error"]["message"].startswith("Parse error: Invalid JSON")
    assert jsonrpc.decode("[1e308, -0.5, 12]") == [1e308, -0.5, 12]


@pytest.mark.feature("CORE-02")
@pytest.mark.parametrize("limit", [10, 64, 200])
def test_the_configured_depth_is_the_limit_applied_and_named(limit):
    assert jsonrpc.decode(nested(limit), limit) is not None
    assert jsonrpc.decode(json.dumps({"id": 1, "x": json.loads(nested(limit - 1))}), limit)
    answer = refusal(nested(limit + 1), limit)
    assert answer["error"] == {"code": PARSE_ERROR,
                               "message": f"Parse error: JSON nested deeper than {limit} levels"}
    # Objects count as arrays do, and the id of a request that parsed is kept.
    deep = json.dumps({"id": 7, "x": json.loads('{"a":' * limit + "1" + "}" * limit)})
    assert refusal(deep, limit)["id"] == 7


def test_brackets_in_strings_and_many_siblings_are_not_depth():
    assert jsonrpc.decode(json.dumps(["[{" * 5000, "\\[" * 100]), 2) == ["[{" * 5000, "\\[" * 100]
    assert len(jsonrpc.decode("[" + ",".join(["[]"] * 10_000) + "]", 2)) == 10_000
    assert jsonrpc.decode('{"a":[],"b":{"c":[1,{}]}}', 4) == {"a": [], "b": {"c": [1, {}]}}
    refusal('{"a":[],"b":{"c":[1,{}]}}', 3)


@pytest.mark.feature("CORE-02")
def test_input_too_deep_for_the_decoder_is_a_parse_error_not_a_recursion_error():
    for text in ("[" * 200_000, nested(100_000), '{"a":' * 100_000):
        assert refusal(text, 100_000, 10**9)["error"]["code"] == PARSE_ERROR


@pytest.mark.feature("CORE-02")
def test_too_many_containers_are_refused_before_decoding():
    limit = 1000
    assert len(jsonrpc.decode("[" + ",".join(["[]"] * (limit - 1)) + "]", 64, limit)) == limit - 1
    for text in ("[" + ",".join(["[]"] * limit) + "]", "[" + ",".join(['{"a":1}'] * limit) + "]",
                 "[" * 4_000_000):
        message = f"Parse error: more than {limit} objects and arrays in one message"
        assert refusal(text, 64, limit)["error"] == {"code": PARSE_ERROR, "message": message}
    # Brackets inside strings are not containers.
    assert jsonrpc.decode(json.dumps({"x": "[]{}" * 10 * limit}), 64, limit)


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800", "\\udfff", "\\uDBFFx", "a\\ud83d"])
def test_nul_and_lone_surrogates_are_refused_with_the_request_id(escape):
    for text in (f'{{"jsonrpc":"2.0","id":"r1","method":"ping","params":{{"s":"{escape}"}}}}',
                 f'{{"jsonrpc":"2.0","id":"r1","method":"ping","params":{{"{escape}":1}}}}'):
        assert refusal(text) == {"jsonrpc": "2.0", "id": "r1",
                                 "error": {"code": INVALID_REQUEST, "message": REFUSED_STRING}}
    assert refusal(f'["{escape}"]')["id"] is None


def test_what_the_server_writes_is_always_utf8():
    text = jsonrpc.encode({"a": "x\ud800y", "\udfff": ["😀", "\ud83d\ude00"]})
    assert text.encode("utf-8") and json.loads(text) == {"a": "x\ufffdy", "\ufffd": ["😀", "😀"]}
    assert jsonrpc.encode({"a": "é"}) == '{"a":"é"}'


def test_pairs_and_escaped_backslashes_are_not_refused():
    assert jsonrpc.decode('["\\ud83d\\ude00", "\\\\u0000", "\\\\ud800"]') == ["😀", "\\u0000", "\\ud800"]
    # Encoded as bytes (not escaped), a surrogate is invalid UTF-8; from memory, a str that holds
    # one cannot be encoded.
    assert refusal(b'["\xed\xa0\x80"]')["error"]["code"] == PARSE_ERROR
    assert refusal('["\ud800"]')["error"]["code"] == PARSE_ERROR


# The endpoint, in process ------------------------------------------------------------------------
async def post_stateless(body: bytes, **options: object) -> tuple[int, dict]:
    transport = StreamableHTTPTransport(Server("hardening"), stateless=True, **options)
    reply = await call_asgi(transport.as_asgi(), "POST", post_headers(), [body])
    answer = json.loads(reply.body.decode("utf-8"))
    check_server_message(answer, "2025-11-25")
    return reply.start["status"], answer


@pytest.mark.feature("HTTP-07")
@pytest.mark.parametrize("limit", [10, 200])
async def test_max_json_depth_of_the_transport_is_honoured(limit):
    deep_enough = json.dumps(ping(1, x=json.loads(nested(limit - 2)))).encode()
    assert await post_stateless(deep_enough, max_json_depth=limit) == (
        200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    too_deep = json.dumps(ping(2, x=json.loads(nested(limit - 1)))).encode()
    status, answer = await post_stateless(too_deep, max_json_depth=limit)
    assert (status, answer["id"]) == (400, 2)
    assert answer["error"] == {"code": PARSE_ERROR,
                               "message": f"Parse error: JSON nested deeper than {limit} levels"}


async def test_max_json_containers_of_the_transport_is_honoured():
    few = json.dumps(ping(1, x=[[]] * 97)).encode()  # with the envelope, params and x: 100
    answered = await post_stateless(few, max_json_containers=100)
    assert answered == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    status, answer = await post_stateless(json.dumps(ping(2, x=[[]] * 98)).encode(), max_json_containers=100)
    assert status == 400
    assert answer["error"]["message"] == "Parse error: more than 100 objects and arrays in one message"


@pytest.mark.feature("HTTP-07")
@pytest.mark.parametrize(("body", "code", "request_id"), [
    (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":NaN}}', PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":1e999}}', PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\\ud800"}}', INVALID_REQUEST, 3),
    (b'{"jsonrpc":"2.0","id":3,"method":"ping\\u0000","params":{}}', INVALID_REQUEST, 3),
    (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\xed\xa0\x80"}}', PARSE_ERROR, None),
    (b"[" * 100_000, PARSE_ERROR, None),
])
async def test_bad_strings_and_numbers_get_a_400_with_a_json_rpc_error(body, code, request_id):
    status, answer = await post_stateless(body)
    assert status == 400
    assert (answer["error"]["code"], answer["id"]) == (code, request_id)


@pytest.mark.parametrize(("headers", "message"), [
    ({"origin": "http://127.0.0.1:99999"}, "Bad Request: malformed Origin header"),
    ({"origin": "http://127.0.0.1:port"}, "Bad Request: malformed Origin header"),
    ({"origin": "http://[::1"}, "Bad Request: malformed Origin header"),
    ({"host": "127.0.0.1:99999", "origin": "http://127.0.0.1"}, "Bad Request: malformed Host header"),
])
async def test_a_malformed_origin_or_host_port_is_a_400(headers, message):
    transport = StreamableHTTPTransport(Server("hardening"), stateless=True)
    reply = await call_asgi(transport.as_asgi(), "POST", post_headers(**headers),
                            [json.dumps(ping()).encode()])
    answer = json.loads(reply.body)
    check_server_message(answer, "2025-11-25")
    assert reply.start["status"] == 400 and answer["error"]["message"] == message


@pytest.mark.parametrize("name", ["mcp-session-id", "origin", "mcp-name"])
async def test_a_control_character_in_a_header_is_a_400(name):
    transport = StreamableHTTPTransport(Server("hardening"), stateless=True)
    reply = await call_asgi(transport.as_asgi(), "POST", post_headers(**{name: "abc\x00def"}),
                            [json.dumps(ping()).encode()])
    answer = json.loads(reply.body)
    check_server_message(answer, "2025-11-25")
    assert reply.start["status"] == 400
    assert answer["error"]["message"] == f"Bad Request: control character in the {name} header"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
@pytest.mark.parametrize(("returned", "sent"), [("half of a pair: \ud800", "half of a pair: \ufffd"),
                                                ("a\x00b", "a\x00b")], ids=["surrogate", "nul"])
async def test_a_result_postgresql_or_utf8_cannot_keep_is_sent_not_lost(
        short_lived_connections, json_response, returned, sent):
    server = Server("hardening")

    @server.tool
    def unwritable() -> str:
        return returned

    transport = StreamableHTTPTransport(server, enable_json_response=json_response)
    app = transport.as_asgi()
    try:
        init = initialize_body("c").encode()
        session_id = (await call_asgi(app, "POST", post_headers(), [init])).header(b"mcp-session-id").decode()
        call = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                           "params": {"name": "unwritable", "arguments": {}}}).encode()
        reply = await call_asgi(app, "POST", post_headers(session_id), [call])
        assert reply.start["status"] == 200
        text = reply.body.decode("utf-8")
        data = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
        answer = json.loads(data[-1] if data else text)
        check_server_message(answer, "2025-11-25", "tools/call")
        assert answer["id"] == 5
        assert answer["result"]["content"][0]["text"] == sent
    finally:
        await transport.close()


# The endpoint, on daphne: what reaches the database, and uploads over the limit --------------------
@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    with running(django_db_blocker) as server:
        yield server


@pytest.fixture(scope="module", params=["daphne", "uvicorn", "hypercorn", "granian"])
def any_server(request, django_db_setup, django_db_blocker):
    """The demo's one-line application (``get_asgi_application()``) under each ASGI server."""
    if request.param == "daphne":
        yield request.getfixturevalue("daphne")
        return
    with running(django_db_blocker, server=request.param) as server:
        yield server


@pytest.fixture
def server(any_server, transactional_db):
    return any_server


@pytest.fixture
def on_daphne(daphne, transactional_db):
    """Data the daphne process writes is committed: these tests run on a transactional database."""
    return daphne


def initialize_body(name: str) -> str:
    return ('{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"' + name + '","version":"1"}}}')


def test_a_nul_or_lone_surrogate_in_the_client_name_opens_no_session(on_daphne):
    client = Client(on_daphne.url)
    for name in ("bad\\u0000name", "bad\\udc00name"):
        response = client.post_raw(initialize_body(name))
        assert response.status_code == 400 and "mcp-session-id" not in response.headers
        assert error_of(response) == {"code": INVALID_REQUEST, "message": REFUSED_STRING}
        assert response.json()["id"] == "init"
    assert not Session.objects.exists()
    client.initialize()  # the process is fine
    assert client.request("ping").response["result"] == {}


def test_an_origin_too_long_to_keep_opens_no_session(on_daphne):
    origin = f"http://127.0.0.1:{on_daphne.port}"
    allowed = Client(on_daphne.url, headers={"origin": origin})
    allowed.initialize()
    long_origin = origin + "/" + "a" * MAX_ORIGIN_LENGTH
    response = Client(on_daphne.url, headers={"origin": long_origin}).post_raw(initialize_body("c"))
    assert response.status_code == 400
    assert "Origin" in error_of(response)["message"]
    assert Session.objects.count() == 1


def test_subscription_uris_with_nul_or_past_the_column_get_an_error_with_their_id(on_daphne):
    client = Client(on_daphne.url)
    client.initialize()
    response = client.post_raw('{"jsonrpc":"2.0","id":41,"method":"resources/subscribe",'
                               '"params":{"uri":"demo://a\\u0000b"}}')
    assert response.status_code == 400 and response.json()["id"] == 41
    assert error_of(response)["code"] == INVALID_REQUEST
    too_long = "demo://" + "x" * MAX_SUBSCRIPTION_URI_LENGTH
    answer = client.request("resources/subscribe", {"uri": too_long}).response
    assert answer["error"]["code"] == INVALID_PARAMS
    assert str(MAX_SUBSCRIPTION_URI_LENGTH) in answer["error"]["message"]
    longest = "demo://" + "x" * (MAX_SUBSCRIPTION_URI_LENGTH - len("demo://"))
    assert client.request("resources/subscribe", {"uri": longest}).response["result"] == {}
    assert list(ResourceSubscription.objects.values_list("uri", flat=True)) == [longest]
    assert ResourceSubscription._meta.get_field("uri").max_length == MAX_SUBSCRIPTION_URI_LENGTH
    assert Session._meta.get_field("origin").max_length == MAX_ORIGIN_LENGTH


def test_a_lone_surrogate_in_tool_arguments_is_answered_with_its_id(on_daphne):
    client = Client(on_daphne.url)
    client.initialize()
    response = client.post_raw('{"jsonrpc":"2.0","id":"s1","method":"tools/call",'
                               '"params":{"name":"echo","arguments":{"message":"\\ud800"}}}')
    assert response.status_code == 400
    assert response.json()["id"] == "s1" and error_of(response)["message"] == REFUSED_STRING
    assert client.tool("echo", {"message": "fine"}).response["result"]["content"][0]["text"] == "fine"


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak since the last reset) of a process, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {name: int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM")}


def reset_peak(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # VmHWM starts again from VmRSS


def read_reply(sock: socket.socket, timeout: float = 30.0) -> bytes:
    """What the server wrote, until it closes its side."""
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def upload(port: int, path: str, head: dict, chunks: int, chunked: bool, on_the_way=None) -> bytes:
    """POST ``chunks`` MiB, stopping early once the server answers; the server's reply."""
    lines = [f"POST {path} HTTP/1.1", "host: 127.0.0.1", "content-type: application/json",
             "accept: application/json, text/event-stream",
             *(f"{name}: {value}" for name, value in head.items())]
    lines.append("transfer-encoding: chunked" if chunked else f"content-length: {chunks * MIB}")
    piece = (b"%x\r\n%s\r\n" % (MIB, b" " * MIB)) if chunked else b" " * MIB
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode() + b"\r\n\r\n")
        try:
            for sent in range(chunks):
                if select.select([sock], [], [], 0)[0]:
                    break  # answered already
                sock.sendall(piece)
                if sent == 1 and on_the_way is not None:
                    on_the_way()
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection; its answer was sent before
        return read_reply(sock)


@pytest.mark.feature("HTTP-05")
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_upload_is_refused_without_being_held(server, chunked):
    client = Client(server.url)
    client.initialize()
    pid = server.serving_pid
    assert client.request("ping").response["result"] == {}
    reset_peak(pid)
    before = memory(pid)["VmRSS"]
    pings = []
    reply = upload(server.port, "/mcp", {"mcp-session-id": client.session_id}, 64, chunked,
                   on_the_way=lambda: pings.append(client.request("ping").response))
    head, body = split_reply(reply)
    assert head.startswith(b"HTTP/1.1 413"), reply[:300]
    answer = json.loads(body)
    check_server_message(answer, "2025-11-25")
    assert answer["error"]["message"] == f"Payload Too Large: the body exceeds {4 * MIB} bytes"
    peak = memory(pid)["VmHWM"] - before
    assert peak < 16 * MIB, f"the peak RSS grew by {peak / MIB:.1f} MiB for a 64 MiB upload"
    # A ping on another connection is answered while an upload is under way, and after.
    if chunked:  # (a declared length is refused before any of the body is sent)
        assert [ping["result"] for ping in pings] == [{}]
    assert client.request("ping").response["result"] == {}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_client_that_sends_its_whole_oversized_body_before_reading_gets_the_413(server, chunked):
    # As a simple client does: the whole upload first, then the answer. Closing the connection
    # while its body still arrives would reset it, and the 413 would be lost with it.
    size = 8 * MIB
    framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % size
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (size, b" " * size) if chunked else b" " * size
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                     b"accept: application/json, text/event-stream\r\n%s\r\n\r\n" % framing)
        sock.sendall(body)
        reply = read_reply(sock)
    head, answer = split_reply(reply)
    assert head.startswith(b"HTTP/1.1 413"), reply[:300]
    check_server_message(json.loads(answer), "2025-11-25")


@pytest.mark.feature("HTTP-05")
def test_the_body_limit_of_the_endpoint_leaves_other_paths_alone(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        body = b"x" * (5 * MIB)
        sock.sendall(b"POST /admin/login/ HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: text/plain\r\n"
                     b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        status = read_reply(sock).split(b" ", 2)[1]
    assert status != b"413"
    # The endpoint takes a body right at the limit (spaces around a ping).
    text = json.dumps(ping("edge")).encode()
    exactly = text + b" " * (4 * MIB - len(text))
    client = Client(server.url)
    client.initialize()
    response = client.post_raw(exactly)
    assert response.status_code == 200 and '{"jsonrpc":"2.0","id":"edge","result":{}}' in response.text


# stdio: every request is answered ----------------------------------------------------------------
def stdio_answers(lines: list[bytes]) -> list[dict]:
    server = Server("hardening-stdio")

    @server.tool
    def echo(message: str) -> str:
        return message

    @server.tool
    def unwritable() -> str:
        return "half of a pair: \ud800"

    stdout = io.BytesIO()
    transport = StdioTransport(server, stdin=io.BytesIO(b"\n".join(lines) + b"\n"), stdout=stdout,
                               stderr=io.StringIO())
    transport.open()
    assert transport.error is None
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    for answer in answers:
        check_server_message(answer, "2025-11-25")
    return answers


@pytest.mark.feature("STDIO-01", "CORE-02")
def test_over_stdio_every_bad_request_is_answered():
    init = initialize_body("c").replace('"init"', "0").encode()
    lines = [
        init,
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":-1e999}}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":'
        b'{"message":"\\ud800"}}}',
        b'{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"a\\u0000"}}',
        b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\xed\xb0\x80"}}',
        json.dumps(ping(6, x=json.loads(nested(70)))).encode(),
        b"[" * 100_000,
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "still here"}}}).encode(),
        # A result UTF-8 cannot carry as it is still goes out, its lone surrogate as U+FFFD.
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                    "params": {"name": "unwritable", "arguments": {}}}).encode(),
    ]
    answers = stdio_answers(lines)
    assert len(answers) == len(lines)
    by_id = {answer["id"]: answer for answer in answers if answer["id"] is not None}
    assert by_id[3]["error"] == by_id[4]["error"] == {"code": INVALID_REQUEST, "message": REFUSED_STRING}
    assert by_id[6]["error"]["message"] == "Parse error: JSON nested deeper than 64 levels"
    assert by_id[7]["result"]["content"][0]["text"] == "still here"
    assert by_id[8]["result"]["content"][0]["text"] == "half of a pair: \ufffd"
    unnamed = [answer["error"]["code"] for answer in answers if answer["id"] is None]
    assert unnamed == [PARSE_ERROR] * 4
