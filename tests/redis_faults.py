"""Redis failures made on purpose: a Redis of the test's own on a free port (to flush or stop
without touching anyone else's), a loopback TCP proxy in front of it that stops forwarding on
demand while keeping every connection open, as a Redis that hangs does, and a primary with a
replica and three sentinels, for failovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .http_harness import free_port, stop_process
from .services import reachable, require


class RedisServer:
    """``redis-server`` on a free loopback port, with no persistence; stopped by :meth:`stop`."""

    def __init__(self, tmp_path: Path, port: int | None = None, replica_of: int | None = None):
        binary = shutil.which("redis-server")
        require(binary is not None, "needs redis-server installed to start a Redis of the test's own")
        self.port = port or free_port()
        self.log_path = tmp_path / f"redis-{self.port}.log"
        # ``replica_of``: a replica of the Redis on that loopback port.
        replication = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else []
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(tmp_path), "--logfile", str(self.log_path), *replication],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        from .http_cluster import wait_until

        wait_until(lambda: self.process.poll() is not None or reachable("127.0.0.1", self.port, 0.2),
                   30, "redis-server to listen")
        assert self.process.poll() is None, self.log_path.read_text()

    def url(self, db: int = 0, port: int | None = None) -> str:
        return f"redis://127.0.0.1:{port or self.port}/{db}"

    def client(self, db: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, db=db, decode_responses=True)

    def stop(self) -> None:
        stop_process(self.process)


@contextlib.contextmanager
def redis_server(tmp_path: Path, port: int | None = None) -> Iterator[RedisServer]:
    """A Redis of the test's own (on ``port``: a restart of one that stopped)."""
    server = RedisServer(tmp_path, port)
    try:
        yield server
    finally:
        server.stop()


class PausableProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port``; :meth:`pause` holds every byte
    (in both directions, on open and new connections alike) until :meth:`resume`, as a network
    partition does: what a connection closed meanwhile had sent is dropped."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.connections = 0  # accepted so far
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="redis-proxy", daemon=True)
        self._thread.start()
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task] = set()
        self._serving: set[asyncio.Task] = set()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> int:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, upstream_writer))
        pumps = [asyncio.create_task(self._pump(reader, upstream_writer)),
                 asyncio.create_task(self._pump(upstream_reader, writer))]
        self._pumps.update(pumps)
        serving = asyncio.current_task()
        self._serving.add(serving)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._pumps.difference_update(pumps)
            self._serving.discard(serving)
            for each in (writer, upstream_writer):
                self._writers.discard(each)
                each.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            await self._flowing.wait()
            if reader.at_eof():
                break  # its sender is gone: lost with the partition, as on a real network
            writer.write(data)
            await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pause(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def close(self) -> None:
        async def shut() -> None:
            self._flowing.set()
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            for pump in list(self._pumps):
                pump.cancel()
            await asyncio.gather(*self._serving, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def pausable_proxy(target_port: int) -> Iterator[PausableProxy]:
    proxy = PausableProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()


SERVICE_NAME = "mcp-primary"


class SentinelGroup:
    """A primary, a replica of it and three sentinels watching them, each ``redis-server`` on a
    free loopback port, with no persistence. The sentinels see the primary down after
    ``down_after_ms`` and promote the replica; :meth:`url` is the ``redis+sentinel://`` URL of the
    group. Stopped by :meth:`stop`."""

    def __init__(self, tmp_path: Path, down_after_ms: int = 1000, failover_timeout_ms: int = 5000,
                 lagging: bool = False):
        # ``lagging``: the replica follows the primary through a PausableProxy (``self.link``), so
        # that pausing it leaves the replica without what the primary receives meanwhile.
        self.tmp_path = tmp_path
        self.primary = RedisServer(tmp_path)
        self.link = PausableProxy(self.primary.port) if lagging else None
        self.replica = RedisServer(tmp_path, replica_of=self.link.port if self.link else self.primary.port)
        self.sentinels: list[subprocess.Popen] = []
        self.sentinel_ports: list[int] = []
        self.down_after_ms = down_after_ms
        try:
            for _ in range(3):
                self._start_sentinel(down_after_ms, failover_timeout_ms)
            from .http_cluster import wait_until

            wait_until(self._ready, 60, "the replica to be in sync and the sentinels to know each other")
        except BaseException:
            self.stop()
            raise

    def _start_sentinel(self, down_after_ms: int, failover_timeout_ms: int) -> None:
        port = free_port()
        config = self.tmp_path / f"sentinel-{port}.conf"  # rewritten by the sentinel as it learns
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.tmp_path}\n"
            f"logfile {self.tmp_path / f'sentinel-{port}.log'}\n"
            f"sentinel monitor {SERVICE_NAME} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE_NAME} {down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE_NAME} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SERVICE_NAME} 1\n")
        self.sentinels.append(subprocess.Popen([shutil.which("redis-server"), str(config), "--sentinel"],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        self.sentinel_ports.append(port)

    def sentinel_client(self, index: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.sentinel_ports[index], decode_responses=True,
                           socket_timeout=2)

    def _ready(self) -> bool:
        import redis

        try:
            with self.replica.client() as replica:
                if replica.info("replication").get("master_link_status") != "up":
                    return False
            for index in range(len(self.sentinels)):
                with self.sentinel_client(index) as sentinel:
                    if len(sentinel.sentinel_sentinels(SERVICE_NAME)) != 2 or \
                            not sentinel.sentinel_slaves(SERVICE_NAME):
                        return False
                    sentinel.execute_command("SENTINEL CKQUORUM", SERVICE_NAME)
        except (redis.ConnectionError, redis.ResponseError):
            return False
        return True

    def primary_port(self) -> int | None:
        """The port of the primary a majority of the sentinels name now (None: no majority)."""
        import redis

        ports = []
        for index in range(len(self.sentinels)):
            with contextlib.suppress(redis.RedisError), self.sentinel_client(index) as sentinel:
                address = sentinel.sentinel_get_master_addr_by_name(SERVICE_NAME)
                if address:
                    ports.append(int(address[1]))
        for port in set(ports):
            if ports.count(port) >= 2:
                return port
        return None

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE_NAME}/{db}"

    def stop(self) -> None:
        for process in self.sentinels:
            stop_process(process)
        self.replica.stop()
        self.primary.stop()
        if self.link is not None:
            self.link.close()


@contextlib.contextmanager
def sentinel_group(tmp_path: Path, **options: Any) -> Iterator[SentinelGroup]:
    group = SentinelGroup(tmp_path, **options)
    try:
        yield group
    finally:
        group.stop()
