"""The MCP Inspector CLI 2.12 (tests/inspector) checks the demo's skills with its SEP-2640
``--verify``: the conformance of each entry, its frontmatter against the served SKILL.md, and
every file of the manifest against its digest and size, in both eras."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .harness import REPO
from .http_harness import DaphneServer
from .services import require

pytestmark = [pytest.mark.django_db(transaction=True)]

INSPECTOR = REPO / "tests" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
SKILL_URI = "skill://note-keeping/SKILL.md"
FILES = [SKILL_URI, "skill://note-keeping/references/TITLES.md"]


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    require(shutil.which("node") is not None, "node is not installed")
    require(INSPECTOR.exists(), "the MCP Inspector is not installed: npm ci --prefix tests/inspector "
                                "(scripts/setup does it)")
    with django_db_blocker.unblock():
        server = DaphneServer()
        try:
            yield server
        finally:
            server.stop()


def inspect(demo: DaphneServer, tmp_path, *arguments: str) -> tuple[int, list[dict], str]:
    """The CLI's exit code, its JSON reports (one a line) and its stderr."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "MCP_CATALOG_PATH": str(tmp_path / "catalog.json"),
           "MCP_CLIENT_CONFIG_PATH": str(tmp_path / "client.json")}
    finished = subprocess.run([str(INSPECTOR), "--cli", demo.url, *arguments, "--format", "json"],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    reports = [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]
    return finished.returncode, reports, finished.stderr


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.feature("SKILL-08")
def test_the_inspector_verifies_the_demo_skills(demo, tmp_path, era):
    code, reports, stderr = inspect(demo, tmp_path, "--method", "skills/list", "--verify",
                                    "--protocol-era", era)
    assert code == 0, stderr
    [report] = reports
    assert report["uri"] == SKILL_URI and report["ok"] is True and report["outcome"] == "verified"
    assert report["conformance"] == [] and report["frontmatter"] == []
    assert [(f["uri"], f["status"]) for f in report["files"]] == [(uri, "verified") for uri in FILES]
    assert "Verified 1 skill and 2 files: no conformance errors." in stderr


@pytest.mark.feature("SKILL-08")
def test_the_inspector_gets_and_verifies_one_skill(demo, tmp_path):
    code, reports, stderr = inspect(demo, tmp_path, "--method", "skills/get", "--uri", SKILL_URI, "--verify")
    assert code == 0, stderr
    assert [(r["uri"], r["outcome"]) for r in reports] == [(SKILL_URI, "verified")]
    code, reports, stderr = inspect(demo, tmp_path, "--method", "skills/get", "--uri",
                                    "skill://no-such-skill/SKILL.md")
    assert code == 1 and reports == []
    assert json.loads(stderr)["error"]["message"] == \
        "Invalid params: no skill is served at skill://no-such-skill/SKILL.md"
