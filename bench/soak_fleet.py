"""The soak's fleet: daphne processes restarted in turn, Celery workers killed, and the memory of
every generation of each (``bench/soak.py``).

A web process restarts as a deploy restarts it: SIGTERM, its exit awaited (it drains: see
``mcp_server/http/drain.py``), then a new process of the same command on the same port, awaited
until it listens. A worker is killed with SIGKILL (no warm shutdown: its call in flight ends as a
worker death ends it, docs/background.md) and started again. Each process, first or restarted, is
a *generation*: its resident memory is sampled once its own warm-up is over, and its change is
measured from its first sample to its last (before its stop, or at the end of the run).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from run import Config, Server

ROOT = Path(__file__).resolve().parent.parent
RSS_TARGET = 0.10  # the change from warm-up to end that the report calls flat, either way
EXIT_PATIENCE = 90.0  # seconds a SIGTERMed web process may take: DRAIN_TIMEOUT (30) and more
READY_PATIENCE = 90.0  # seconds a new process may take to listen (a loaded 2-core machine)


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class Generation:
    """One process of a slot: when it started, its memory samples, how it ended."""

    label: str
    pid: int
    process: subprocess.Popen
    started: float
    warm_after: float
    samples: list[int] = field(default_factory=list)
    ended: str = ""  # "SIGTERM, exit 0 after 1.2 s", "SIGKILL", or "" while it runs

    def sample(self, now: float) -> None:
        if not self.ended and now >= self.warm_after and self.process.poll() is None:
            found = rss_bytes(self.pid)
            if found is not None:
                self.samples.append(found)

    @property
    def change(self) -> float | None:
        if len(self.samples) < 2:
            return None
        return (self.samples[-1] - self.samples[0]) / self.samples[0]


@dataclass
class Incident:
    """Something the fleet did to itself, with its times (monotonic) for the report."""

    at: float
    text: str


class Fleet:
    """The web processes and the workers, with every generation of each and what happened."""

    def __init__(self, workdir: Path, env: dict[str, str], daphne_argv: list[str], settings: dict[str, str],
                 warmup: float):
        self.workdir, self.env, self.argv, self.settings = workdir, env, daphne_argv, settings
        self.warmup = warmup
        self.web: list[Server] = []
        self.workers: list[subprocess.Popen] = []
        self.generations: list[Generation] = []
        self.incidents: list[Incident] = []
        # When each SIGKILL was sent: noted at once, as a call the kill ends may end before the
        # worker is ready again (a loaded machine takes its time to start one).
        self.kills: list[float] = []
        self.problems: list[str] = []  # a process that would not stop or start: a failure
        self.restarts = 0
        self._web_gens: list[int] = []
        self._worker_gens: list[int] = []
        self._worker_logs: list = []
        self.started = time.monotonic()

    # Web processes --------------------------------------------------------------------------------
    def _web(self, slot: int, port: int | None) -> Server:
        generation = self._web_gens[slot]
        config = Config(f"daphne-{slot + 1}-g{generation}", f"daphne {slot + 1} (generation {generation})",
                        "ours", "stateful", self.argv, self.settings)
        server = Server(config, self.workdir, port)
        now = time.monotonic()
        self.generations.append(Generation(config.label, server.pid, server.process, now, now + self.warmup))
        return server

    def start_web(self, count: int) -> None:
        for slot in range(count):
            self._web_gens.append(1)
            self.web.append(self._web(slot, None))

    def web_ports(self) -> list[int]:
        return [server.port for server in self.web]

    async def restart_web(self, slot: int) -> None:
        """SIGTERM, the exit awaited, the same command on the same port, awaited until it listens."""
        old = self.web[slot]
        generation = self._generation(old.pid)
        sent = time.monotonic()
        old.process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(old.process.wait, EXIT_PATIENCE)
        except subprocess.TimeoutExpired:
            old.process.kill()
            code = await asyncio.to_thread(old.process.wait, 15)
            self.problems.append(f"{generation.label} still ran {EXIT_PATIENCE:g} s after SIGTERM: killed")
        exited = time.monotonic()
        generation.ended = f"SIGTERM, exit {code} after {exited - sent:.1f} s"
        if code != 0:
            self.problems.append(f"{generation.label} exited with {code} after SIGTERM")
        old.stop()  # closes its log
        self._web_gens[slot] += 1
        try:
            self.web[slot] = await asyncio.to_thread(self._web, slot, old.port)
        except RuntimeError as exc:
            self.problems.append(f"daphne {slot + 1} did not start again: {str(exc)[:300]}")
            raise
        self.restarts += 1
        self.incidents.append(Incident(sent, f"daphne {slot + 1}: SIGTERM, drained and exited {code} in "
                                             f"{exited - sent:.1f} s, listening again "
                                             f"{time.monotonic() - exited:.1f} s later"))

    # Celery workers -------------------------------------------------------------------------------
    def _worker(self, slot: int) -> subprocess.Popen:
        generation = self._worker_gens[slot]
        log_path = self.workdir / f"celery-{slot + 1}-g{generation}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._worker_logs.append(log)
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "project", "worker", "--pool=solo", "--loglevel=info",
             "--without-gossip", "--without-mingle", "--without-heartbeat",
             f"--hostname=soak-{slot + 1}-g{generation}-{os.getpid()}@%h"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_PATIENCE
        while " ready." not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"celery worker {slot + 1} did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        now = time.monotonic()
        self.generations.append(Generation(f"celery worker {slot + 1} (generation {generation})", process.pid,
                                           process, now, now + self.warmup))
        return process

    def start_workers(self, count: int) -> None:
        for slot in range(count):
            self._worker_gens.append(1)
            self.workers.append(self._worker(slot))

    async def kill_worker(self, slot: int) -> None:
        old = self.workers[slot]
        generation = self._generation(old.pid)
        sent = time.monotonic()
        old.send_signal(signal.SIGKILL)
        self.kills.append(sent)
        await asyncio.to_thread(old.wait, 15)
        generation.ended = "SIGKILL"
        self._worker_gens[slot] += 1
        try:
            self.workers[slot] = await asyncio.to_thread(self._worker, slot)
        except RuntimeError as exc:
            self.problems.append(str(exc)[:300])
            raise
        ready = time.monotonic()
        self.incidents.append(Incident(sent, f"celery worker {slot + 1}: SIGKILL, ready again "
                                             f"{ready - sent:.1f} s later"))

    def killed_during(self, start: float, end: float) -> bool:
        """A worker was killed while a call ran from ``start`` to ``end`` (its call may have died)."""
        return any(start <= sent <= end for sent in self.kills)

    # Both -------------------------------------------------------------------------------------------
    def _generation(self, pid: int) -> Generation:
        return next(g for g in reversed(self.generations) if g.pid == pid)

    def sample(self) -> None:
        now = time.monotonic()
        for generation in self.generations:
            generation.sample(now)

    def died(self) -> list[str]:
        """Processes that ended though nothing stopped them."""
        return [f"{g.label}: exit {g.process.returncode}" for g in self.generations
                if not g.ended and g.process.poll() is not None]

    def stop(self) -> None:
        for server in self.web:
            server.stop()
        for process in self.workers:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
        for log in self._worker_logs:
            log.close()

    def logs(self) -> list[Path]:
        return sorted(self.workdir.glob("daphne-*.log")) + sorted(self.workdir.glob("celery-*.log"))

    # The report -------------------------------------------------------------------------------------
    def memory_rows(self) -> list[str]:
        lines = ["| process | samples | RSS after its warm-up MiB | RSS last MiB | change | peak MiB "
                 "| ended |",
                 "|---|---:|---:|---:|---:|---:|---|"]
        for g in self.generations:
            first = f"{g.samples[0] / 2**20:.1f}" if g.samples else ""
            last = f"{g.samples[-1] / 2**20:.1f}" if g.samples else ""
            peak = f"{max(g.samples) / 2**20:.1f}" if g.samples else ""
            change = f"{g.change:+.1%}" if g.change is not None else ""
            lines.append(f"| {g.label}, pid {g.pid} | {len(g.samples)} | {first} | {last} | {change} | "
                         f"{peak} | {g.ended or 'ran to the end'} |")
        return lines

    def memory_verdict(self) -> tuple[bool, str]:
        measured = [g for g in self.generations if g.change is not None]
        off = [f"{g.label} {g.change:+.1%}" for g in measured if abs(g.change) > RSS_TARGET]
        unmeasured = len(self.generations) - len(measured)
        tail = f" ({unmeasured} generations too short-lived for two samples)" if unmeasured else ""
        if off:
            return False, f"RSS: changed more than ±{RSS_TARGET:.0%}: {', '.join(off)}{tail}"
        return True, f"RSS: within ±{RSS_TARGET:.0%} in all {len(measured)} generations measured{tail}"

    def incident_lines(self) -> list[str]:
        return [f"- at {incident.at - self.started:6.1f} s: {incident.text}"
                for incident in sorted(self.incidents, key=lambda incident: incident.at)]


async def chaos(fleet: Fleet, deadline: float, restart_period: float, kill_period: float) -> None:
    """Until ``deadline``: a web process restarted every ``restart_period`` seconds, in turn, and a
    worker (each in turn) killed every ``kill_period`` seconds; 0 turns either off. A restart or a
    kill is started only when it can be over well before the deadline."""
    loop_start = time.monotonic()
    next_restart = loop_start + restart_period if restart_period > 0 else float("inf")
    next_kill = loop_start + kill_period if kill_period > 0 else float("inf")
    web_slot = worker_slot = 0
    under_way: set[asyncio.Task] = set()
    margin = 20.0  # a restart takes a few seconds of drain and start
    while True:
        upcoming = min(next_restart, next_kill)
        if upcoming > deadline - margin:
            break
        await asyncio.sleep(max(0.0, upcoming - time.monotonic()))
        if upcoming == next_restart:
            restart = asyncio.create_task(fleet.restart_web(web_slot % len(fleet.web)))
            under_way.add(restart)
            web_slot += 1
            # The next process only once this one serves again: one process down at a time.
            await asyncio.wait({restart})
            next_restart = max(next_restart + restart_period, time.monotonic())
        else:
            under_way.add(asyncio.create_task(fleet.kill_worker(worker_slot % len(fleet.workers))))
            worker_slot += 1
            next_kill += kill_period
    if under_way:
        await asyncio.wait(under_way)
    for task in under_way:
        task.result()  # a process that would not start again is in fleet.problems; this surfaces it
