"""What the fleet soak (``bench/soak``) relies on: the round-robin proxy passes a request a stopped
upstream refused on to the next one, and the worker-death errors the soak expects are the
project's own. (The soak itself runs from ``bench/soak``; docs/performance.md keeps its figures.)
"""

from __future__ import annotations

import asyncio
import sys

from conformance.proxy import Proxy
from mcp_server.background.launch import WORKER_STOPPED
from mcp_server.http.liveness import REQUEST_STOPPED

from .harness import REPO
from .http_harness import free_port


def test_the_worker_death_errors_the_soak_expects_are_the_projects_own():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert (soak.WORKER_STOPPED, soak.REQUEST_STOPPED) == (WORKER_STOPPED, REQUEST_STOPPED)


async def test_the_proxy_passes_a_request_a_stopped_upstream_refused_to_the_next_one():
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nserved")
        await writer.drain()
        writer.close()

    live = await asyncio.start_server(upstream, "127.0.0.1", 0)
    stopped = free_port()  # nothing listens there: the connection is refused
    proxy = Proxy([("127.0.0.1", stopped), ("127.0.0.1", live.sockets[0].getsockname()[1])], None)
    front = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", front.sockets[0].getsockname()[1])
        for _ in range(3):  # on one kept-alive connection, whichever upstream's turn it is
            writer.write(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            assert await reader.readexactly(6) == b"served"
        writer.close()
        assert (proxy.counts, proxy.skipped) == ([0, 3], [3, 0])
    finally:
        front.close()
        live.close()
