"""A round-robin HTTP/1.1 proxy on loopback: every request goes to the next upstream.

    python conformance/proxy.py --port 8000 --upstream 127.0.0.1:8001 --upstream 127.0.0.1:8002

It alternates per request, not per connection: a client that keeps one connection alive still
sends its requests to every upstream in turn, so the requests of one MCP session really land on
different processes (what a load balancer without sticky sessions does). Each request is
forwarded on a new upstream connection; the response, streamed as it comes (SSE), goes back
byte for byte, and the client connection stays open for its next request. A client that goes
away mid-response closes the upstream connection, so the server sees the disconnect.

A request goes to the next upstream when the one chosen refuses the connection (a stopped
process, as nginx's ``proxy_next_upstream error`` does) or closes it before any byte of a response
(a process that began to drain as the request reached it: it closes the connections it has not
started to serve). nginx retries the second kind only for idempotent methods; this proxy retries
POSTs too, which is safe for a draining process (it answers every request it started) but would
run a request twice on a process killed mid-request before it answered: the soak kills none.
502 only when every upstream failed so.

``--log FILE`` appends one line per request, once an upstream answers it:
``<upstream index> <method> <path> <session id>``.
Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
import sys

MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024


class ProtocolError(Exception):
    pass


class Reader:
    """A StreamReader with a push-back buffer (bytes read while watching for a disconnect)."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader
        self.buffer = bytearray()

    async def head(self) -> bytes | None:
        """Bytes up to and including the blank line; None at a clean end of stream."""
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > MAX_HEAD:
                raise ProtocolError("header section too large")
            data = await self.reader.read(CHUNK)
            if not data:
                if self.buffer:
                    raise ProtocolError("connection closed inside a header section")
                return None
            self.buffer += data
        end = self.buffer.index(b"\r\n\r\n") + 4
        head, self.buffer = bytes(self.buffer[:end]), self.buffer[end:]
        return head

    async def some(self, limit: int = CHUNK) -> bytes:
        if self.buffer:
            data, self.buffer = bytes(self.buffer[:limit]), self.buffer[limit:]
            return data
        return await self.reader.read(limit)

    async def exactly(self, size: int) -> bytes:
        parts = []
        while size > 0:
            data = await self.some(min(size, CHUNK))
            if not data:
                raise ProtocolError("connection closed inside a body")
            parts.append(data)
            size -= len(data)
        return b"".join(parts)

    async def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            data = await self.reader.read(CHUNK)
            if not data:
                raise ProtocolError("connection closed inside a chunked body")
            self.buffer += data
        end = self.buffer.index(b"\r\n") + 2
        line, self.buffer = bytes(self.buffer[:end]), self.buffer[end:]
        return line


def parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip().lower(), value.strip()))
    return lines[0], headers


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


async def copy_body(reader: Reader, writer: asyncio.StreamWriter, headers: list[tuple[str, str]],
                    until_close: bool) -> bool:
    """Copy one message body as framed; True when the connection may carry another message."""
    if "chunked" in (header(headers, "transfer-encoding") or "").lower():
        while True:
            line = await reader.line()
            writer.write(line)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = await reader.line()
                    writer.write(trailer)
                    if trailer == b"\r\n":
                        break
                await writer.drain()
                return True
            writer.write(await reader.exactly(size + 2))
            await writer.drain()
    length = header(headers, "content-length")
    if length is not None:
        remaining = int(length)
        while remaining > 0:
            data = await reader.some(min(remaining, CHUNK))
            if not data:
                raise ProtocolError("connection closed inside a body")
            writer.write(data)
            await writer.drain()
            remaining -= len(data)
        return True
    if not until_close:
        return True  # a request without a body
    while data := await reader.some():
        writer.write(data)
        await writer.drain()
    return False


class Collector:
    """A writer that keeps what is written (a request's body, read before an upstream is chosen)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None


class Proxy:
    def __init__(self, upstreams: list[tuple[str, int]], log_path: str | None):
        self.upstreams = upstreams
        self.turn = itertools.cycle(range(len(upstreams)))
        self.log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115
        self.counts = [0] * len(upstreams)  # requests each upstream answered
        self.skipped = [0] * len(upstreams)  # requests it refused or closed unanswered

    async def serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        client = Reader(client_reader)
        try:
            while await self.one_request(client, client_writer):
                pass
        except (ProtocolError, ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            client_writer.close()
            with contextlib.suppress(Exception):
                await client_writer.wait_closed()

    async def one_request(self, client: Reader, client_writer: asyncio.StreamWriter) -> bool:
        head = await client.head()
        if head is None:
            return False
        request_line, headers = parse_head(head)
        method, path = [*request_line.split(" "), "", ""][:2]
        # The body is read whole first, so that the request can go to another upstream when the
        # one chosen turns out to be stopped.
        body = Collector()
        await copy_body(client, body, headers, until_close=False)
        # One request per upstream connection; the Host header is kept (DNS-rebinding checks).
        kept = [(k, v) for k, v in headers if k not in ("connection", "keep-alive")]
        request = (request_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
                   + "connection: close\r\n\r\n").encode("latin-1") + bytes(body.data)
        for _attempt in range(len(self.upstreams)):
            index = next(self.turn)
            host, port = self.upstreams[index]
            try:
                up_reader_raw, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
            except (OSError, TimeoutError):
                self.skipped[index] += 1  # a stopped process (restarting): the next one
                continue
            upstream = Reader(up_reader_raw)
            try:
                try:
                    up_writer.write(request)
                    await up_writer.drain()
                    first = await upstream.head()
                except (OSError, ProtocolError):
                    first = None
                if first is None:
                    # Closed before any byte of a response: a process that stopped as the request
                    # reached it (its listening socket closing) served nothing; the next one does.
                    self.skipped[index] += 1
                    continue
                self.counts[index] += 1
                if self.log:
                    self.log.write(f"{index} {method} {path} {header(headers, 'mcp-session-id') or '-'}\n")
                return await self.relay_response(client, client_writer, upstream, method,
                                                 client_wants_close(request_line, headers), first)
            finally:
                up_writer.close()
                with contextlib.suppress(Exception):
                    await up_writer.wait_closed()
        client_writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await client_writer.drain()
        return False

    async def relay_response(self, client: Reader, client_writer: asyncio.StreamWriter,
                             upstream: Reader, method: str, client_close: bool, first: bytes) -> bool:
        # Watch the client while the response streams: if it goes away, stop (closing upstream).
        watcher = asyncio.ensure_future(client.reader.read(CHUNK))
        relay = asyncio.ensure_future(self._relay(client_writer, upstream, method, first))
        try:
            done, _ = await asyncio.wait({watcher, relay}, return_when=asyncio.FIRST_COMPLETED)
            if relay not in done:
                if not watcher.result():  # the client closed its connection
                    relay.cancel()
                    with contextlib.suppress(BaseException):
                        await relay
                    return False
                client.buffer += watcher.result()  # the next request arrived early: keep it
                reusable = await relay
            else:
                reusable = relay.result()
                if watcher.done():
                    data = watcher.result()
                    if not data:
                        return False
                    client.buffer += data
            return reusable and not client_close
        finally:
            if not watcher.done():
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher
            if not relay.done():
                relay.cancel()

    async def _relay(self, client_writer: asyncio.StreamWriter, upstream: Reader, method: str,
                     head: bytes | None) -> bool:
        while True:
            if head is None:
                head = await upstream.head()
            if head is None:
                raise ProtocolError("upstream closed without a response")
            status_line, headers = parse_head(head)
            status = int(status_line.split(" ")[1])
            kept = [(k, v) for k, v in headers if k not in ("connection", "keep-alive")]
            framed = "transfer-encoding" in dict(kept) or "content-length" in dict(kept)
            no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
            closing = not framed and not no_body
            client_writer.write(
                (status_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
                 + ("connection: close\r\n" if closing else "") + "\r\n").encode("latin-1")
            )
            await client_writer.drain()
            if 100 <= status < 200:
                head = None
                continue  # an interim response; the real one follows
            if no_body:
                return True
            return await copy_body(upstream, client_writer, headers, until_close=True)


def client_wants_close(request_line: str, headers: list[tuple[str, str]]) -> bool:
    connection = (header(headers, "connection") or "").lower()
    if request_line.endswith("HTTP/1.0"):
        return "keep-alive" not in connection
    return "close" in connection


def parse_upstream(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host or "127.0.0.1", int(port)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", action="append", type=parse_upstream, required=True,
                        help="host:port of a server; give it once per server")
    parser.add_argument("--log", help="append one line per request to this file")
    args = parser.parse_args(argv)
    proxy = Proxy(args.upstream, args.log)
    server = await asyncio.start_server(proxy.serve, args.host, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    upstreams = ", ".join(f"{h}:{p}" for h, p in args.upstream)
    print(f"proxy on {args.host}:{args.port} -> {upstreams} (round robin per request)", flush=True)
    async with server:
        await stop.wait()
    print(f"proxy: requests per upstream {proxy.counts}, passed on to the next one {proxy.skipped}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
