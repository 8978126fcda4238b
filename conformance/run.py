"""Run the official MCP conformance suite (npm @modelcontextprotocol/conformance) against our server
and our client.

    conformance/run                    # one process (SQLite, in-memory channel layer)
    conformance/run --two-processes    # and again: two processes on PostgreSQL + Redis behind a
                                       # round-robin proxy (always on when CI is set)
    conformance/run --scenario server-sse-polling --suite 0.1   # one scenario, for debugging
    conformance/run --client           # only the client scenarios (conformance/client)
    conformance/run --client --suite 0.1                        # only 0.1.16's client scenarios
    conformance/run --suite 0.1 --client-scenario auth/basic-cimd --client-scenario sse-retry
    conformance/run --scenario sse-retry                        # one client scenario

It installs the pinned suites (conformance/suite-*/, `npm ci`), starts `conformance/server` on free
loopback ports, runs every server scenario of 0.1.16 (`--suite all`, pending ones included), the
2025-11-25 and 2026-07-28 server scenarios of the 0.2.0 alpha (two legs) and its tasks-* scenarios
(the Tasks extension, each run on its own), then the client scenarios of 0.1.16 (CLIENT_SCENARIOS,
the OAuth ones included), those of the 0.2.0 alpha's 2025-11-25 leg (NEXT_CLIENT_SCENARIOS) and of
its 2026-07-28 leg (MODERN_CLIENT_SCENARIOS, with `--spec-version 2026-07-28`; the lists are
conformance/scenarios.py) with `conformance/client` as the command, and prints one line per scenario
and a final `N passed, M failed` over all of them. A scenario passes when none of its checks is a
FAILURE, a WARNING or SKIPPED: a skipped check proved nothing (a client scenario, whose checks are
often conditional, fails on skips only when all were skipped, and also needs the client to exit 0
in time). It exits non-zero on a failure not listed in
conformance/expected-failures.yml (`server:` and `client:` lists, and `skipped:`, the scenarios whose
checks the suite itself skips whatever the server does), and on a listed scenario that passes (the
list only ever shrinks). A full run writes conformance/RESULTS.md
and the table in docs/conformance.md. Results (checks.json per scenario) and logs go to conformance/results/.
Every wait is bounded. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # conformance/ as a package, as a script too
from conformance import scenarios

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PACKAGE = "@modelcontextprotocol/conformance"
SHIM = HERE / "node" / "fs-globsync.mjs"
EXPECTED_FAILURES = HERE / "expected-failures.yml"
RESULTS_MD = HERE / "RESULTS.md"
RESULTS_PAGE = ROOT / "docs" / "conformance.md"
RESULTS_START, RESULTS_END = "<!-- conformance-results:start -->", "<!-- conformance-results:end -->"

INSTALL_TIMEOUT = 600
LIST_TIMEOUT = 60
SUITE_TIMEOUT = 300
CLIENT_TIMEOUT = 120          # seconds for one client scenario, the suite's own 30 s included
CLIENT_TIMEOUT_MS = 30000     # the suite's `--timeout` for the client command
START_TIMEOUT = 90
STOP_TIMEOUT = 10

# The Redis database and PostgreSQL database the two-process layout uses (made afresh each run).
REDIS_URL = os.environ.get("CONFORMANCE_REDIS_URL", "redis://127.0.0.1:6379/8")
POSTGRES_ADMIN_URL = os.environ.get("CONFORMANCE_POSTGRES_URL") or os.environ.get(
    "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
POSTGRES_DATABASE = os.environ.get("CONFORMANCE_POSTGRES_DATABASE", "mcp_conformance")


# Check statuses that keep a scenario from passing. A skipped check proved nothing: a server
# scenario whose checks were skipped (the server does not declare what they test) would "pass"
# otherwise. A client scenario's checks are often conditional ("if the client declares roots", "for
# each lifecycle request it sends"), and a modern client sends no initialize: it fails on a skip
# only when every check was skipped.
NOT_PASSED = ("FAILURE", "WARNING", "SKIPPED")
NOT_PASSED_CLIENT = ("FAILURE", "WARNING")


@dataclass
class Suite:
    key: str              # what --suite names it
    spec_version: str | None  # only the scenarios of this revision (None: all of them)
    folder_key: str | None = None  # the folder conformance/suite-<folder_key> (default: key)
    tag: str = ""         # told apart from another leg of the same suite in titles and folders
    # Only the listed server scenarios whose names start with this (extension scenarios, which no
    # revision selects), each run on its own: the CLI runs one scenario or one revision's set.
    prefix: str | None = None

    @property
    def folder(self) -> Path:
        return HERE / f"suite-{self.folder_key or self.key}"

    @property
    def title(self) -> str:
        return f"{self.version}{f' {self.tag}' if self.tag else ''}"

    @property
    def version(self) -> str:
        manifest = json.loads((self.folder / "package.json").read_text())
        return manifest["dependencies"][PACKAGE]

    @property
    def installed_version(self) -> str | None:
        manifest = self.folder / "node_modules" / PACKAGE / "package.json"
        return json.loads(manifest.read_text())["version"] if manifest.exists() else None

    def cli(self) -> list[str]:
        # The preload gives the bundle the fs.globSync of Node 22 on Node 20 (a no-op on 22+).
        bundle = self.folder / "node_modules" / PACKAGE / "dist" / "index.js"
        return ["node", "--import", SHIM.as_uri(), str(bundle)]

    def selection(self) -> list[str]:
        return ["--suite", "all"] + (["--spec-version", self.spec_version] if self.spec_version else [])


SUITES = [Suite("0.1", None), Suite("0.2", "2025-11-25"),
          Suite("0.2-modern", "2026-07-28", folder_key="0.2", tag="2026-07-28"),
          # The Tasks extension (SEP-2663): the alpha's tasks-* scenarios, on the 2026-07-28 wire.
          Suite("0.2-tasks", None, folder_key="0.2", tag="tasks", prefix="tasks-"),
          # The Skills extension (SEP-2640): its sep-2640-* server scenarios, on the 2026-07-28 wire.
          Suite("0.2-skills", None, folder_key="0.2", tag="skills", prefix="sep-2640-")]

# The client scenarios (conformance/scenarios.py, the list conformance/client.py answers): the 0.1.16
# suite runs the handshake-era ones and its auth/* ones; the 0.2.0 alpha's 2025-11-25 leg its auth/*
# ones whose scenario server speaks the handshake era; its 2026-07-28 leg (`--spec-version
# 2026-07-28`) the modern client scenarios and the auth/* ones whose server speaks only that revision.
CLIENT = HERE / "client"
CLIENT_SUITE = SUITES[0]
CLIENT_SCENARIOS = scenarios.HANDSHAKE + scenarios.AUTH_0_1
NEXT_CLIENT_SUITE = SUITES[1]
NEXT_CLIENT_SCENARIOS = scenarios.AUTH_0_2
MODERN_CLIENT_SUITE = SUITES[2]
MODERN_CLIENT_SCENARIOS = scenarios.MODERN + scenarios.AUTH_0_2_MODERN
CLIENT_RUNS = [(CLIENT_SUITE, CLIENT_SCENARIOS), (NEXT_CLIENT_SUITE, NEXT_CLIENT_SCENARIOS),
               (MODERN_CLIENT_SUITE, MODERN_CLIENT_SCENARIOS)]


@dataclass
class Layout:
    key: str
    label: str
    processes: int


ONE = Layout("one-process", "one process", 1)
TWO = Layout("two-processes", "two processes", 2)


@dataclass
class Outcome:
    scenario: str
    passed: bool
    problems: list[str] = field(default_factory=list)


def say(text: str = "") -> None:
    print(text, flush=True)


def note(text: str) -> None:
    print(f"conformance: {text}", file=sys.stderr, flush=True)


# Installing ---------------------------------------------------------------------------------
def install(suite: Suite) -> None:
    if suite.installed_version == suite.version:
        return
    note(f"installing {PACKAGE}@{suite.version} in {suite.folder.relative_to(ROOT)} (npm ci)")
    for attempt in (1, 2):  # a second try for a registry hiccup
        try:
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=suite.folder, check=True, timeout=INSTALL_TIMEOUT)
            break
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            if attempt == 2:
                raise
    if suite.installed_version != suite.version:
        raise RuntimeError(f"npm ci installed {suite.installed_version}, not {suite.version}")


def scenarios_of(suite: Suite) -> list[str]:
    command = [*suite.cli(), "list", "--server"]
    if suite.spec_version:
        command += ["--spec-version", suite.spec_version]
    listing = subprocess.run(command, capture_output=True, text=True, check=True, timeout=LIST_TIMEOUT)
    names = re.findall(r"^\s+- (\S+)", listing.stdout, re.MULTILINE)
    if suite.prefix:
        names = [name for name in names if name.startswith(suite.prefix)]
    if not names:
        raise RuntimeError(f"{suite.version} listed no server scenarios:\n{listing.stdout}{listing.stderr}")
    return names


def expected_failures(wanted: str = "server") -> set[str]:
    """The ``server:`` (or ``client:``, or ``skipped:``) list of expected-failures.yml (flat YAML
    lists, read without PyYAML)."""
    names, section = set(), None
    for raw in EXPECTED_FAILURES.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        if not line.startswith((" ", "-")):
            section, _, rest = line.partition(":")
            section = section.strip()
            rest = rest.strip()
            if section == wanted and rest.startswith("[") and rest.endswith("]"):
                names |= {n.strip().strip("'\"") for n in rest[1:-1].split(",") if n.strip()}
        elif section == wanted and line.strip().startswith("- "):
            names.add(line.strip()[2:].strip().strip("'\""))
    return names


# Processes ----------------------------------------------------------------------------------
class Processes:
    """What this run started; each is its own process group, ended by its id."""

    def __init__(self) -> None:
        self.started: list[tuple[subprocess.Popen, object]] = []

    def start(self, command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        self.started.append((process, out))
        return process

    def stop(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                with _suppress():
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process, out in self.started:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with _suppress():
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT)
            out.close()
        self.started.clear()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], (ProcessLookupError, PermissionError))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process on port {port} exited with {process.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"nothing answered /health on port {port} within {START_TIMEOUT} s; see {log}")


def server_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(extra)
    return env


def fresh_services() -> dict[str, str]:
    """A new PostgreSQL database and an empty Redis database for the two-process layout."""
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() \
        else sys.executable
    script = (
        "import sys, psycopg, redis\n"
        "admin, name, redis_url = sys.argv[1:]\n"
        "with psycopg.connect(admin, autocommit=True) as db:\n"
        "    db.execute(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')\n"
        "    db.execute(f'CREATE DATABASE {name}')\n"
        "redis.Redis.from_url(redis_url).flushdb()\n"
    )
    try:
        subprocess.run([python, "-c", script, POSTGRES_ADMIN_URL, POSTGRES_DATABASE, REDIS_URL],
                       check=True, timeout=60)
    except subprocess.SubprocessError:
        raise RuntimeError(f"the two-process layout needs PostgreSQL ({POSTGRES_ADMIN_URL}) and Redis "
                           f"({REDIS_URL}); preparing them failed (above)") from None
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    return {"DATABASE_URL": f"{base}/{POSTGRES_DATABASE}", "REDIS_URL": REDIS_URL}


def start_layout(layout: Layout, processes: Processes, logs: Path) -> tuple[str, Path | None]:
    """Start the layout's servers (and proxy); returns the MCP URL and the proxy's request log."""
    if layout.processes == 1:
        database = logs / "db.sqlite3"
        env = server_env({"CONFORMANCE_SQLITE": str(database)})
        port = free_port()
        log = logs / "server.log"
        server = processes.start([str(HERE / "server"), "--port", str(port)], log, env)
        wait_healthy(port, server, log)
        return f"http://localhost:{port}/mcp", None
    env = server_env(fresh_services())
    upstreams = []
    for number in range(1, layout.processes + 1):
        port = free_port()
        log = logs / f"server-{number}.log"
        # One after the other: the first migrates the fresh database, the next finds it done.
        server = processes.start([str(HERE / "server"), "--port", str(port)], log, env)
        wait_healthy(port, server, log)
        upstreams.append(port)
    port = free_port()
    requests_log = logs / "proxy-requests.log"
    command = [sys.executable, str(HERE / "proxy.py"), "--port", str(port), "--log", str(requests_log)]
    for upstream in upstreams:
        command += ["--upstream", f"127.0.0.1:{upstream}"]
    proxy = processes.start(command, logs / "proxy.log", os.environ.copy())
    for _ in upstreams:  # through the proxy to every server
        wait_healthy(port, proxy, logs / "proxy.log")
    return f"http://localhost:{port}/mcp", requests_log


# Running a suite ----------------------------------------------------------------------------
TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def run_suite(suite: Suite, url: str, out: Path, log: Path, only: str | None,
              listed: list[str]) -> tuple[int, dict[str, Outcome]]:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if only:
        selections = [["--scenario", only]]
    elif suite.prefix:
        selections = [["--scenario", name] for name in listed]
    else:
        selections = [suite.selection()]
    code = 0
    with open(log, "w") as output:
        for selection in selections:
            command = [*suite.cli(), "server", "--url", url, *selection,
                       "--expected-failures", str(EXPECTED_FAILURES), "-o", str(out)]
            try:
                code = subprocess.run(command, cwd=HERE, stdout=output, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=SUITE_TIMEOUT).returncode or code
            except subprocess.TimeoutExpired:
                note(f"{suite.version} did not finish within {SUITE_TIMEOUT} s; see {log}")
                code = -1
    outcomes: dict[str, Outcome] = {}
    for folder in sorted(out.iterdir()):
        checks_file = folder / "checks.json"
        if not folder.name.startswith("server-") or not checks_file.exists():
            continue
        scenario = TIMESTAMP.sub("", folder.name.removeprefix("server-"))
        previous = outcomes.get(scenario)
        outcome = checks_outcome(scenario, checks_file)
        if previous is not None:
            outcome = Outcome(scenario, previous.passed and outcome.passed,
                              previous.problems + outcome.problems)
        outcomes[scenario] = outcome
    return code, outcomes


def checks_outcome(scenario: str, checks_file: Path, client: bool = False) -> Outcome:
    checks = json.loads(checks_file.read_text())
    problems = [f"{c.get('status')} {c.get('id')}: {c.get('errorMessage') or c.get('description')}"
                for c in checks if c.get("status") in (NOT_PASSED_CLIENT if client else NOT_PASSED)]
    ran = [c for c in checks if c.get("status") not in ("INFO", "SKIPPED")]
    if checks and not ran and not problems:
        problems = [f"SKIPPED {scenario}: every check was skipped"]
    return Outcome(scenario, not problems and bool(checks),
                   problems or ([] if checks else ["no checks recorded"]))


def run_client_scenario(suite: Suite, scenario: str, out: Path, log: Path) -> Outcome:
    """One client scenario: the suite starts its scenario server and runs conformance/client with
    its URL; the client must exit 0 in time, and no check may fail or warn."""
    # No --expected-failures here: its exit code would then also count stale entries; record()
    # applies the list.
    command = [*suite.cli(), "client", "--command", str(CLIENT), "--scenario", scenario,
               "--timeout", str(CLIENT_TIMEOUT_MS), "-o", str(out)]
    if suite is MODERN_CLIENT_SUITE:  # its scenario servers then speak 2026-07-28
        command += ["--spec-version", suite.spec_version]
    with open(log, "w") as output:
        try:
            code = subprocess.run(command, cwd=HERE, stdout=output, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=CLIENT_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            return Outcome(scenario, False,
                           [f"the suite did not finish within {CLIENT_TIMEOUT} s; see {log}"])
    found = sorted(out.glob(f"{scenario}-*/checks.json"))
    if not found:
        return Outcome(scenario, False, [f"no checks recorded (exit code {code}); see {log}"])
    outcome = checks_outcome(scenario, found[-1], client=True)
    if code != 0 and outcome.passed:  # the client failed or timed out though no check says so
        stderr = found[-1].parent / "stderr.txt"
        tail = stderr.read_text().strip().splitlines()[-1:] if stderr.exists() else []
        outcome = Outcome(scenario, False, [f"the suite exited with {code}; see {log}", *tail])
    return outcome


def traffic_report(requests_log: Path) -> tuple[str, bool]:
    """How the proxy spread the requests: per process, and per session."""
    per_upstream: dict[str, int] = defaultdict(int)
    per_session: dict[str, list[str]] = defaultdict(list)
    if requests_log.exists():
        for line in requests_log.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) >= 4 and parts[2] == "/mcp":
                per_upstream[parts[0]] += 1
                if parts[3] != "-":
                    per_session[parts[3]].append(parts[0])
    several = [used for used in per_session.values() if len(used) > 1]
    spread = sum(1 for used in several if len(set(used)) > 1)
    counts = ", ".join(f"process {int(k) + 1}: {v}" for k, v in sorted(per_upstream.items()))
    # Modern (2026-07-28) requests have no session: then both processes serving /mcp is the spread.
    ok = len(per_upstream) > 1 and (spread > 0 or not several)
    return (f"/mcp requests {counts or 'none'}; {spread} of the {len(several)} sessions with several "
            f"requests were served by both processes"), ok


# Results ------------------------------------------------------------------------------------
def results_table(columns: list[tuple[str, dict[str, Outcome]]]) -> str:
    scenarios: list[str] = []
    for _, outcomes in columns:
        scenarios += [name for name in outcomes if name not in scenarios]
    lines = ["| scenario | " + " | ".join(title for title, _ in columns) + " |",
             "| --- | " + " | ".join("---" for _ in columns) + " |"]
    for name in scenarios:
        cells = []
        for _, outcomes in columns:
            outcome = outcomes.get(name)
            cells.append("—" if outcome is None else ("pass" if outcome.passed else "**FAIL**"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = []
    for title, outcomes in columns:
        passed = sum(o.passed for o in outcomes.values())
        totals.append(f"{title}: {passed}/{len(outcomes)}")
    return "\n".join(lines) + "\n\nPassed: " + "; ".join(totals) + ".\n"


def write_results(table: str) -> None:
    RESULTS_MD.write_text(
        "# Conformance results\n\n"
        "Server scenarios of the official MCP conformance suite against `conformance/server`, "
        "and its client scenarios against `conformance/client` (the `client` column), written by "
        "`conformance/run --two-processes`. A scenario passes when none of its checks is a failure, "
        "a warning or skipped (a client scenario: when not all of them were skipped).\n\n" + table
    )
    if RESULTS_PAGE.exists():
        text = RESULTS_PAGE.read_text()
        start, end = text.find(RESULTS_START), text.find(RESULTS_END)
        if start != -1 and end > start:
            RESULTS_PAGE.write_text(text[:start + len(RESULTS_START)] + "\n" + table + text[end:])


def only_skipped(outcome: Outcome, skipped: set[str]) -> set[str]:
    """``{scenario}`` when it is listed under ``skipped:`` and skipped checks alone kept it from
    passing (a real failure of it is unexpected), else nothing."""
    if outcome.scenario in skipped and outcome.problems \
            and all(problem.startswith("SKIPPED ") for problem in outcome.problems):
        return {outcome.scenario}
    return set()


def record(outcome: Outcome, where: str, expected: set[str], unexpected: list[str]) -> bool:
    """Say how a scenario went; a failure not listed, or a listed scenario that passes, is unexpected."""
    name = outcome.scenario
    if outcome.passed:
        if name in expected:
            say(f"PASS {name} {where}: listed in expected-failures.yml, remove it")
            unexpected.append(f"{name} {where} (stale expected failure)")
        else:
            say(f"PASS {name} {where}")
        return True
    say(f"{'XFAIL' if name in expected else 'FAIL'} {name} {where}")
    for problem in outcome.problems:
        say(f"    {problem}")
    if name not in expected:
        unexpected.append(f"{name} {where}")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the official MCP conformance suite.")
    parser.add_argument("--two-processes", action="store_true",
                        help="also run on two processes (PostgreSQL + Redis) behind a round-robin proxy")
    parser.add_argument("--suite", choices=[s.key for s in SUITES], help="only this suite")
    parser.add_argument("--scenario", help="only this scenario (results are not written)")
    parser.add_argument("--client", action="store_true",
                        help="only the client scenarios (conformance/client), no server scenarios")
    parser.add_argument("--client-scenario", action="append", metavar="NAME",
                        help="only these client scenarios (repeatable; implies --client)")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="where checks and logs go")
    args = parser.parse_args()
    two = args.two_processes or os.environ.get("CI", "").lower() in ("1", "true", "yes")
    layouts = [ONE, TWO] if two else [ONE]
    # The client part runs on a full run, with --client, or for one of its scenarios.
    client_only = args.client or any(args.scenario in names for _, names in CLIENT_RUNS)
    client_runs = [(suite, [args.scenario] if args.scenario else names) for suite, names in CLIENT_RUNS
                   if args.suite in (None, suite.key) and (not args.scenario or args.scenario in names)]
    if args.client_scenario:
        unknown = set(args.client_scenario) - {name for _, names in CLIENT_RUNS for name in names}
        if unknown:
            parser.error(f"not client scenarios of this client: {', '.join(sorted(unknown))}")
        client_only = True
        client_runs = [(suite, [n for n in names if n in args.client_scenario])
                       for suite, names in client_runs]
    client_scenarios = [name for _, names in client_runs for name in names]
    if client_only:
        layouts = []
    suites = [s for s in SUITES if args.suite in (None, s.key)] if layouts else []
    expected = expected_failures()
    expected_client = expected_failures("client")
    # Not passed when a check was skipped, expected when listed (the suite, which reads only
    # server: and client:, counts a skip as no failure and would call a server: entry stale).
    skipped = expected_failures("skipped")

    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        say(f"FAIL setup: {' and '.join(missing)} not found (the suite runs on Node.js 20 or newer)")
        say("0 passed, 1 failed")
        return 1
    try:
        for suite in suites + [s for s, _ in client_runs if s not in suites]:
            install(suite)
        listed = {suite.key: scenarios_of(suite) for suite in suites}
    except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
        say(f"FAIL setup: {exc}")
        say("0 passed, 1 failed")
        return 1

    passed = failed = 0
    unexpected: list[str] = []
    columns: list[tuple[str, dict[str, Outcome]]] = []
    for layout in layouts:
        logs = args.results / layout.key
        if logs.exists():
            shutil.rmtree(logs)
        logs.mkdir(parents=True)
        processes = Processes()
        try:
            try:
                url, requests_log = start_layout(layout, processes, logs)
            except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                say(f"FAIL start ({layout.label}): {exc}")
                failed += 1
                unexpected.append(f"start ({layout.label})")
                continue
            for suite in suites:
                before = len(unexpected)
                name = suite.title.replace(" ", "-")
                code, outcomes = run_suite(suite, url, logs / name, logs / f"{name}.log", args.scenario,
                                           listed[suite.key])
                wanted = [args.scenario] if args.scenario else listed[suite.key]
                for name in wanted:
                    outcome = outcomes.setdefault(name, Outcome(name, False, ["the scenario did not run"]))
                    if record(outcome, f"({suite.title}, {layout.label})",
                              expected | only_skipped(outcome, skipped), unexpected):
                        passed += 1
                    else:
                        failed += 1
                if code != 0 and len(unexpected) == before:
                    failed += 1
                    unexpected.append(f"{suite.title} CLI exit code {code} ({layout.label})")
                    say(f"FAIL {suite.title} ({layout.label}): the suite exited with {code}; "
                        f"see {logs / f'{name}.log'}")
                column = {scenario: outcomes[scenario] for scenario in wanted}
                columns.append((f"{suite.title}, {layout.label}", column))
            if requests_log is not None:
                report, spread = traffic_report(requests_log)
                say(f"     proxy ({layout.label}): {report}")
                if not spread:
                    failed += 1
                    unexpected.append(f"proxy ({layout.label}): requests did not alternate between processes")
                    say(f"FAIL proxy ({layout.label}): requests did not alternate between processes")
        finally:
            processes.stop()

    server_columns = len(columns)
    if client_scenarios:
        logs = args.results / "client"
        if logs.exists():
            shutil.rmtree(logs)
        logs.mkdir(parents=True)
    for client_suite, names in client_runs:
        version = client_suite.title.replace(" ", "-")  # the two legs of 0.2.0 apart
        column = {}
        for name in names:
            log = f"{version}-{name.replace('/', '-')}"  # auth/* names: one folder of logs
            outcome = run_client_scenario(client_suite, name, logs / version, logs / f"{log}.log")
            if not outcome.passed and name not in expected_client:
                # Client scenarios time our client against the suite's server on a loaded machine
                # (sse-retry's reconnect window, a 30 s scenario limit); a failure is run once more,
                # said here, and both logs are kept.
                note(f"{name} (client) failed ({'; '.join(outcome.problems)[:300]}); running it once more")
                outcome = run_client_scenario(client_suite, name, logs / version, logs / f"{log}.again.log")
            column[name] = outcome
            if record(column[name], f"({version}, client)",
                      expected_client | only_skipped(column[name], skipped), unexpected):
                passed += 1
            else:
                failed += 1
        columns.append((f"{client_suite.title}, client", column))

    if not args.scenario and not args.suite and not args.client and two \
            and server_columns == len(layouts) * len(suites):
        # Grouped by suite version: each version's layouts side by side (its client column last).
        columns.sort(key=lambda column: [s.title for s in suites].index(column[0].split(",")[0]))
        write_results(results_table(columns))
    if unexpected:
        note("unexpected: " + "; ".join(unexpected))
    say(f"{passed} passed, {failed} failed")
    return 1 if unexpected else 0


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # so that the servers this run started are stopped on the way out


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
