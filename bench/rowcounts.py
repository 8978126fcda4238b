"""``bench/run --instructions``: an instruction count beside each timed row.

After a server's timed rows, the same configuration (its argv and environment) starts again under
callgrind (``bench/counting.py``) and each of its rows is counted: its kind of request at its
concurrency, a modest number of calls (whole sessions for the sessions row). The bare ASGI
application of ``bench/floor_app.py`` under the same ASGI server gives each row of ours its floor,
so the table shows ours, ours/theirs, the floor and ours above it. Rows above
``MAX_CONCURRENCY`` are not counted (valgrind runs one thread at a time: 64 connections take too
long for what they add).
"""

from __future__ import annotations

import sys
from pathlib import Path

import counting

MAX_CONCURRENCY = 16


def kind_of(row, modern_section: str) -> str:
    if row.section == modern_section:
        return "modern"
    if row.section.startswith("sessions"):
        return "sessions"
    return row.config.mode


def asgi_server_of(config) -> str:
    if counting.serves_in_child(config.argv):
        return "granian"
    return "uvicorn" if "uvicorn" in config.argv else "daphne"


def phase_of(row, modern_section: str, calls: int, sessions: int) -> counting.Phase:
    kind = kind_of(row, modern_section)
    return counting.Phase(kind, row.concurrency, sessions if kind == "sessions" else calls)


class Counter:
    """Counts rows config by config; keeps the floors it measured, per ASGI server and phase."""

    def __init__(self, root: Path, calls: int, sessions: int, modern_section: str, log=print):
        self.root, self.calls, self.sessions = root, calls, sessions
        self.modern_section = modern_section
        self.floors: dict[tuple[str, counting.Phase], float] = {}
        self.log = log

    def floor_phase(self, phase: counting.Phase) -> counting.Phase:
        # The floor answers JSON whatever the headers: one kind of call serves every call row.
        if phase.kind == "sessions":
            return phase
        return counting.Phase("stateless", phase.concurrency, phase.count)

    def attach(self, config, rows: list) -> None:
        """Count ``rows`` (all of ``config``) and set their ``instructions`` and ``floor``."""
        counted = [row for row in rows if row.concurrency <= MAX_CONCURRENCY]
        for row in rows:
            if row.concurrency > MAX_CONCURRENCY:
                row.note = f"{row.note}; not counted (c>{MAX_CONCURRENCY})".lstrip("; ")
        if not counted:
            return
        phases = [phase_of(row, self.modern_section, self.calls, self.sessions) for row in counted]
        spec = counting.server_spec(config.argv, self.root, config.env)
        for row, phase, total in zip(counted, phases, counting.measure(spec, phases), strict=True):
            row.instructions = total / phase.count
            self.log(f"  {config.key} {phase.kind} c={phase.concurrency}: {row.instructions:,.0f} "
                     f"instructions per {'session' if phase.kind == 'sessions' else 'call'}")
        if config.side != "ours":
            return
        server = asgi_server_of(config)
        missing = list(dict.fromkeys(self.floor_phase(phase) for phase in phases
                                     if (server, self.floor_phase(phase)) not in self.floors))
        if missing:
            found = counting.measure(counting.floor(sys.executable, server), missing)
            for phase, total in zip(missing, found, strict=True):
                self.floors[(server, phase)] = total / phase.count
                self.log(f"  floor under {server} {phase.kind} c={phase.concurrency}: "
                         f"{total / phase.count:,.0f}")
        for row, phase in zip(counted, phases, strict=True):
            row.floor = self.floors[(server, self.floor_phase(phase))]


def columns(row, theirs) -> list[str]:
    """The count columns of a table line: per request, ours/theirs, floor, ours above the floor."""
    def millions(value: float | None) -> str:
        return "" if value is None else f"{value / 1e6:.3f} M"

    if row.instructions is None:
        return ["not counted" if row.concurrency > MAX_CONCURRENCY else "", "", "", ""]
    mine = row.config.side == "ours" and theirs is not None and theirs.instructions
    return [millions(row.instructions), f"{row.instructions / theirs.instructions:.2f}" if mine else "",
            millions(row.floor), millions(None if row.floor is None else row.instructions - row.floor)]
