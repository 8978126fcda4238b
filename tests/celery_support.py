"""Real ``celery -A project worker`` processes for the background-call tests, beside the daphne
processes of :mod:`tests.http_cluster` (same settings, same database, same Redis).

The broker is Redis (a database index of its own) or RabbitMQ (guest/guest on 127.0.0.1:5672).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from .harness import REPO
from .http_cluster import REDIS_HOST, REDIS_PORT, redis_client
from .http_harness import ChildProcess, database_env
from .services import reachable, require
from .waiting import PATIENCE, wait_until

RABBITMQ_HOST, RABBITMQ_PORT = "127.0.0.1", 5672
RABBITMQ_URL = f"amqp://guest:guest@{RABBITMQ_HOST}:{RABBITMQ_PORT}//"


def redis_broker(db: int) -> str:
    """A Redis broker URL on database ``db``, emptied first (no task left from an earlier run)."""
    with redis_client(db) as client:
        client.flushdb()
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def require_rabbitmq() -> None:
    require(reachable(RABBITMQ_HOST, RABBITMQ_PORT), f"needs RabbitMQ on {RABBITMQ_HOST}:{RABBITMQ_PORT}")


def purge_rabbitmq_queue(queue: str = "celery") -> None:
    """Drop tasks an earlier run left in a RabbitMQ queue (by default Celery's ``celery``)."""
    from kombu import Connection

    with Connection(RABBITMQ_URL) as connection:
        channel = connection.channel()
        with contextlib.suppress(Exception):  # no such queue yet
            channel.queue_purge(queue)


@contextlib.contextmanager
def rabbitmq_queue() -> Iterator[dict]:
    """The environment of processes that queue and take tasks on a RabbitMQ queue of their own
    (``MCP_TEST_CELERY_QUEUE``, read by tests/http_settings.py): another checkout's worker on
    the same RabbitMQ never takes them. The queue is purged first and deleted afterwards."""
    from kombu import Connection

    queue = f"mcp-tests-{uuid.uuid4().hex[:12]}"
    purge_rabbitmq_queue(queue)
    try:
        yield {"CELERY_BROKER_URL": RABBITMQ_URL, "MCP_TEST_CELERY_QUEUE": queue}
    finally:
        with Connection(RABBITMQ_URL) as connection, contextlib.suppress(Exception):
            connection.channel().queue_delete(queue)


class CeleryWorker(ChildProcess):
    """One ``celery -A project worker`` process (the solo pool: the task runs in the process
    itself, so killing the process kills the call), started with the test settings; with
    ``prefork=N``, Celery's default pool of N child processes instead."""

    def __init__(self, *, broker_url: str, redis_url: str, mcp_settings_json: str = "{}",
                 settings_module: str = "tests.http_settings", name: str = "worker",
                 env: dict | None = None, prefork: int = 0):
        self.name = name
        self.log_path = Path(f"/tmp/mcp-celery-{os.getpid()}-{name}-{id(self)}.log")
        inherited = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        child_env = {
            **inherited,
            "DJANGO_SETTINGS_MODULE": settings_module,
            "MCP_TEST_HTTP_SETTINGS": mcp_settings_json,
            "PYTHONUNBUFFERED": "1",
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": broker_url,
            **database_env(),
            **(env or {}),
        }
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "project", "worker",
             *(["--pool=prefork", f"--concurrency={prefork}"] if prefork else ["--pool=solo"]),
             "--loglevel=info", "--without-gossip", "--without-mingle", "--without-heartbeat",
             f"--hostname={name}-{id(self)}@%h"],
            cwd=REPO, env=child_env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        wait_until(self._ready, PATIENCE, f"celery worker {name} to be ready")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"celery worker exited with {self.process.returncode}:\n{self.log}")
        return " ready." in self.log


@contextlib.contextmanager
def celery_worker(**options: object) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(**options)  # type: ignore[arg-type]
    try:
        yield worker
    finally:
        if worker.process.poll() is None:
            worker.stop()
        else:
            with contextlib.suppress(Exception):
                worker._log.close()


def worker_beside(redis_db: int, env: dict,
                  mcp_settings: dict) -> contextlib.AbstractContextManager[CeleryWorker]:
    """A worker beside daphne processes of :func:`tests.http_cluster.cluster` started with ``env``
    and ``mcp_settings`` on Redis database ``redis_db`` (its broker is ``env["CELERY_BROKER_URL"]``)."""
    return celery_worker(broker_url=env["CELERY_BROKER_URL"],
                         redis_url=f"redis://{REDIS_HOST}:{REDIS_PORT}/{redis_db}",
                         mcp_settings_json=json.dumps(mcp_settings), env=env)


@contextlib.contextmanager
def processes_and_worker(*, redis_db: int, broker_db: int, mcp_settings: dict,
                         count: int = 2) -> Iterator[tuple[list, CeleryWorker]]:
    """``count`` daphne processes and one worker, on one (flushed) Redis database and one broker."""
    from .http_cluster import cluster, listening, require_services

    require_services()
    env = {"CELERY_BROKER_URL": redis_broker(broker_db)}
    # The worker starts while daphne boots: both take seconds of CPU.
    with cluster(count, redis_db=redis_db, mcp_settings=mcp_settings, env=env, wait=False) as servers, \
            worker_beside(redis_db, env, mcp_settings) as worker:
        listening(servers)
        yield servers, worker
