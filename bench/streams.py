"""Memory per session holding an open GET stream: open sessions with their listening streams and
read the server's resident memory.

Each session is initialize + notifications/initialized on a pool of keep-alive connections, then
a GET (Accept: text/event-stream) on a connection of its own that stays open. The measure is
(RSS with the streams open - RSS before) / number of streams, so it includes the session itself.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

from rawhttp import PROTOCOL_VERSION, Connection, open_session

POOL = 32


async def _open_streams(host: str, port: int, count: int, streams: list[Connection]) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(count):
        queue.put_nowait(index)

    async def worker() -> None:
        connection = Connection(host, port)
        try:
            while True:
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                session_id = await open_session(connection)
                stream = Connection(host, port)
                status, _headers = await stream.send_head("GET", {
                    "Accept": "text/event-stream", "Mcp-Session-Id": session_id,
                    "MCP-Protocol-Version": PROTOCOL_VERSION,
                })
                if status != 200:
                    raise RuntimeError(f"GET stream refused with {status}")
                streams.append(stream)
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(POOL)))


async def measure(host: str, port: int, counts: list[int], rss: Callable[[], int],
                  settle: float = 2.0) -> list[tuple[int, int]]:
    """For each count (ascending), open streams up to it; returns ``(count, bytes per stream)``."""
    streams: list[Connection] = []
    # Warm up: a few sessions with streams, closed again, so lazy imports and pools are counted out.
    await _open_streams(host, port, 20, streams)
    for stream in streams:
        stream.close()
    streams.clear()
    await asyncio.sleep(settle)
    gc.collect()
    before = rss()
    results = []
    for count in counts:
        await _open_streams(host, port, count - len(streams), streams)
        await asyncio.sleep(settle)
        results.append((count, (rss() - before) // count))
    for stream in streams:
        stream.close()
    await asyncio.sleep(0.5)
    return results
