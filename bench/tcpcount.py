"""A loopback TCP relay that counts round trips: put it between web processes and their Redis.

    python bench/tcpcount.py --port 7000 --upstream 127.0.0.1:6379

A round trip is a client's burst of bytes that follows an answer (or opens the connection): a
Redis client waits for its reply before it sends again on a connection (a pipeline or a script is
one write, so one trip), which makes each client-to-server read after server-to-client bytes one
trip. On SIGUSR1 it prints ``COUNT <trips> <client bytes> <server bytes> <connections>`` (totals
since it started). Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

CHUNK = 64 * 1024


class Totals:
    def __init__(self) -> None:
        self.trips = self.sent = self.received = self.connections = 0

    def line(self) -> str:
        return f"COUNT {self.trips} {self.sent} {self.received} {self.connections}"


async def start(port: int, upstream: tuple[str, int], totals: Totals) -> asyncio.Server:
    """The relay, listening on ``port`` (0: any) of 127.0.0.1; ``totals`` counts what passes."""

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        totals.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.close()
            return
        answered = [True]  # the first bytes on a connection begin a trip

        async def up() -> None:
            while data := await client_reader.read(CHUNK):
                if answered[0]:
                    totals.trips += 1
                    answered[0] = False
                totals.sent += len(data)
                server_writer.write(data)
                await server_writer.drain()
            server_writer.close()

        async def down() -> None:
            while data := await server_reader.read(CHUNK):
                answered[0] = True
                totals.received += len(data)
                client_writer.write(data)
                await client_writer.drain()
            client_writer.close()

        tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            client_writer.close()
            server_writer.close()

    return await asyncio.start_server(relay, "127.0.0.1", port)


async def serve(port: int, upstream: tuple[str, int], totals: Totals) -> None:
    server = await start(port, upstream, totals)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(totals.line(), flush=True))
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    print("LISTENING", flush=True)
    async with server:
        await stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="host:port")
    args = parser.parse_args()
    host, port = args.upstream.rsplit(":", 1)
    asyncio.run(serve(args.port, (host, int(port)), Totals()))


if __name__ == "__main__":
    main()
