"""``bench/tcpcount.py``, the relay that counts Redis round trips for ``bench/scale.py``: a trip is
a client's write after an answer, so a pipeline (one write of several commands) is one trip."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def bench_tcpcount():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import tcpcount
    finally:
        sys.path.remove(str(REPO / "bench"))
    return tcpcount


async def test_a_trip_is_a_write_after_an_answer_and_a_pipeline_is_one():
    tcpcount = bench_tcpcount()
    held = asyncio.Event()

    async def upstream_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Answers every line so far when a GET comes; a SET alone is held, unanswered.
        waiting: list[bytes] = []
        while line := await reader.readline():
            waiting.append(line)
            if line.startswith(b"SET"):
                held.set()
                continue
            writer.write(b"".join(b"+OK " + item for item in waiting))
            waiting.clear()
            await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(upstream_server, "127.0.0.1", 0)
    totals = tcpcount.Totals()
    relay = await tcpcount.start(0, ("127.0.0.1", upstream.sockets[0].getsockname()[1]), totals)
    reader, writer = await asyncio.open_connection("127.0.0.1", relay.sockets[0].getsockname()[1])
    try:
        for command in (b"GET a\n", b"GET b\n"):
            writer.write(command)
            assert await reader.readline() == b"+OK " + command
        writer.write(b"GET c\nGET d\nGET e\n")  # a pipeline: one write, three answers
        assert [await reader.readline() for _ in range(3)] == [b"+OK GET c\n", b"+OK GET d\n",
                                                               b"+OK GET e\n"]
        assert totals.trips == 3
        # Two writes with no answer between them (the first reached the server): still one trip.
        writer.write(b"SET f\n")
        await asyncio.wait_for(held.wait(), 10)
        writer.write(b"GET g\n")
        assert [await reader.readline() for _ in range(2)] == [b"+OK SET f\n", b"+OK GET g\n"]
        assert (totals.trips, totals.connections) == (4, 1)
        assert totals.sent == len(b"GET a\nGET b\nGET c\nGET d\nGET e\nSET f\nGET g\n")
    finally:
        writer.close()
        relay.close()
        upstream.close()
