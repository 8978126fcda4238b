"""A broadcast reaches every GET stream of a process with one message: it is encoded to JSON once,
not once per stream, and each stream writes the same text."""

from __future__ import annotations


async def test_a_broadcast_is_encoded_once_for_every_stream_that_writes_it(monkeypatch):
    from types import SimpleNamespace

    from mcp_protocol import jsonrpc
    from mcp_server.http import listen

    encoded = []
    encode = jsonrpc.encode
    monkeypatch.setattr(jsonrpc, "encode", lambda message: encoded.append(message) or encode(message))

    class SSE:
        def __init__(self) -> None:
            self.written: list[tuple[str, str | None]] = []

        async def event(self, data: str, event_id: str | None = None) -> bool:
            self.written.append((data, event_id))
            return True

    transport = SimpleNamespace(options=SimpleNamespace(max_queued_stream_events=10))
    streams = [listen.ListenStream(transport, f"s{index}", "get", SSE(), "t") for index in range(3)]
    message = jsonrpc.notification("notifications/tools/list_changed", {})
    for stream in streams:
        assert await stream._emit(7, message, "")
    assert encoded == [message]
    assert {stream.sse.written[0][0] for stream in streams} == {encode(message)}
    other = jsonrpc.notification("notifications/resources/list_changed", {})
    assert await streams[0]._emit(8, other, "")
    assert streams[0].sse.written[1][0] == encode(other)  # another message: encoded afresh
