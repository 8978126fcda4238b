"""The one command (``scripts/test``) ends with the official conformance suite through
``scripts/conformance``, which skips it with a warning where Node.js is missing, and fails then
where every part of the suite is required (``MCP_TESTS_REQUIRE_SERVICES=1``, as ``.ci/run`` sets)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import REPO


def run_without_node(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``scripts/conformance`` with a PATH that holds bash and dirname and nothing else."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    for tool in ("bash", "dirname"):
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    return subprocess.run([str(tools / "bash"), "scripts/conformance"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={"PATH": str(tools), **env})


@pytest.mark.feature("CONF-03")
def test_without_node_the_conformance_suite_is_skipped_with_a_warning(tmp_path):
    done = run_without_node(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning: Node.js (node, npm, npx) not found: the conformance suite was skipped" in done.stderr


@pytest.mark.feature("CONF-03")
def test_where_the_suite_is_required_a_missing_node_fails(tmp_path):
    done = run_without_node(tmp_path, MCP_TESTS_REQUIRE_SERVICES="1")
    assert done.returncode == 1
    assert "MCP_TESTS_REQUIRE_SERVICES=1 requires it" in done.stderr


@pytest.mark.feature("CONF-03")
def test_with_node_the_step_runs_the_suite_and_both_commands_end_with_it():
    done = subprocess.run(["scripts/conformance", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--two-processes" in done.stdout  # conformance/run's own usage: the suite's runner ran
    last = {name: (REPO / name).read_text().strip().splitlines()[-1] for name in ("scripts/test", ".ci/run")}
    assert last == {"scripts/test": "exec scripts/conformance",
                    ".ci/run": "exec scripts/conformance --two-processes"}
