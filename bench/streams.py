"""Memory per session holding an open GET stream: open sessions with their listening streams and
read the server's resident memory; and the time a notification sent to all of them takes to reach
the last one (``broadcast``).

Each session is initialize + notifications/initialized on a pool of keep-alive connections, then
a GET (Accept: text/event-stream) on a connection of its own that stays open. The measure is
(RSS with the streams open - RSS before) / number of streams, so it includes the session itself.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rawhttp import PROTOCOL_VERSION, Connection, delete_session, open_session

POOL = 32
RETRIES = 3


async def _open_streams(host: str, port: int, count: int, streams: list[Connection]) -> int:
    """Open ``count`` more into ``streams``; returns how many times a keep-alive connection of the
    pool was reset by the server before it answered an initialize (it is then opened again and the
    initialize sent again, at most ``RETRIES`` times a session)."""
    resets = 0
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
                for attempt in range(RETRIES + 1):
                    try:
                        session_id = await open_session(connection)
                        break
                    except (ConnectionResetError, asyncio.IncompleteReadError):
                        nonlocal resets
                        resets += 1
                        connection.close()
                        if attempt == RETRIES:
                            raise
                stream = Connection(host, port)
                status, _headers = await stream.send_head("GET", {
                    "Accept": "text/event-stream", "Mcp-Session-Id": session_id,
                    "MCP-Protocol-Version": PROTOCOL_VERSION,
                })
                if status != 200:
                    raise RuntimeError(f"GET stream refused with {status}")
                stream.session_id = session_id
                streams.append(stream)
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(POOL)))
    return resets


async def end_sessions(host: str, port: int, streams: list[Connection]) -> None:
    """Close the streams and DELETE their sessions (warm-up sessions are not left counting
    against the server's ``MAX_SESSIONS``)."""
    connection = Connection(host, port)
    try:
        for stream in streams:
            stream.close()
            await delete_session(connection, stream.session_id)
    finally:
        connection.close()


async def measure(host: str, port: int, counts: list[int], rss: Callable[[], int],
                  settle: float = 2.0) -> list[tuple[int, int]]:
    """For each count (ascending), open streams up to it; returns ``(count, bytes per stream)``."""
    streams: list[Connection] = []
    # Warm up: a few sessions with streams, closed again, so lazy imports and pools are counted out.
    await _open_streams(host, port, 20, streams)
    await end_sessions(host, port, streams)
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


async def open_streams(host: str, port: int, count: int) -> tuple[list[Connection], int]:
    """``count`` sessions, each with its GET stream open (the caller closes them), and the
    connection resets met on the way (see ``_open_streams``)."""
    streams: list[Connection] = []
    try:
        resets = await _open_streams(host, port, count, streams)
    except BaseException:
        for stream in streams:
            stream.close()
        raise
    return streams, resets


async def _wait_for(stream: Connection, marker: bytes) -> float:
    """Read ``stream`` until ``marker`` went by; returns when (``time.monotonic()``)."""
    tail = b""
    while True:
        data = await stream.reader.read(65536)
        if not data:
            raise ConnectionError("the stream ended before the notification")
        # A marker may straddle two reads: keep the end of the previous one.
        if marker in tail + data:
            return time.monotonic()
        tail = data[-len(marker):]


@dataclass
class Broadcast:
    streams: int
    received: int
    first_s: float | None   # from the trigger to the first stream that had it
    median_s: float | None
    last_s: float | None    # to the last one: the time to broadcast to every stream


async def broadcast(streams: list[Connection], trigger: Callable[[], Awaitable[float]],
                    marker: bytes, timeout: float) -> Broadcast:
    """Time one notification to every stream: ``trigger`` sends it and returns when it began
    (``time.monotonic()``, which is one clock for every process of the machine); every stream is
    read at once until ``marker`` shows, for at most ``timeout`` seconds after the trigger."""
    readers = [asyncio.ensure_future(_wait_for(stream, marker)) for stream in streams]
    try:
        await asyncio.sleep(0.5)  # the readers are waiting (and have read what came before)
        started = await trigger()
        done, _pending = await asyncio.wait(readers, timeout=timeout)
    finally:
        for reader in readers:
            reader.cancel()
    arrivals = sorted(reader.result() - started for reader in done
                      if not reader.cancelled() and reader.exception() is None)
    if not arrivals:
        return Broadcast(len(streams), 0, None, None, None)
    return Broadcast(len(streams), len(arrivals), arrivals[0], arrivals[len(arrivals) // 2], arrivals[-1])
