"""The docs hold: every Python snippet compiles, settings and urls snippets can be added as they are
to a project ``django-admin startproject`` made, the generated reference is up to date and names
every setting, management command and system check id, and the site builds with warnings as errors.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from .services import require

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# A fenced block, indented as a list item's may be: (indent, language, body).
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.DOTALL | re.MULTILINE)
APPEND = re.compile(r"^# (?P<path>\S+): add at the end")


def snippets(language: str) -> list[tuple[str, str]]:
    """(``page:line``, code) of every fenced block in ``language``, dedented."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(2) != language:
                continue
            indent = len(match.group(1))
            code = "\n".join(line[indent:] for line in match.group(3).splitlines())
            line = text[:match.start()].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", code))
    return found


PYTHON = snippets("python")


def test_the_pages_have_python_snippets():
    assert len(PYTHON) > 30
    assert any(where.startswith("README.md") for where, _ in PYTHON)


@pytest.mark.parametrize("code", [code for _, code in PYTHON], ids=[where for where, _ in PYTHON])
def test_every_python_snippet_compiles(code):
    compile(code, "<snippet>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


APPENDED = [(where, code) for where, code in PYTHON if APPEND.match(code)]


def startproject(tmp_path: Path) -> Path:
    call_command("startproject", "mysite", str(tmp_path))
    return tmp_path / "mysite"


def test_settings_and_urls_snippets_say_where_they_go():
    """A snippet that sets INSTALLED_APPS or urlpatterns is one to add to a project's file."""
    for where, code in PYTHON:
        if re.search(r"^(INSTALLED_APPS|urlpatterns)\b", code, re.MULTILINE):
            assert APPEND.match(code), f"{where} should start with '# mysite/...: add at the end'"
    assert {APPEND.match(code)["path"] for _, code in APPENDED} == {"mysite/settings.py", "mysite/urls.py"}


@pytest.mark.parametrize("code", [code for where, code in APPENDED if "settings.py" in code.split("\n")[0]],
                         ids=[where for where, code in APPENDED if "settings.py" in code.split("\n")[0]])
def test_a_settings_snippet_runs_at_the_end_of_a_startproject_settings_file(code, tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("MCP_CLIENT_OAUTH_KEY", "a key")
    path = startproject(tmp_path) / "settings.py"
    namespace = {"__file__": str(path), "__name__": "mysite.settings"}
    exec(compile(path.read_text() + "\n" + code, str(path), "exec"), namespace)
    apps = namespace["INSTALLED_APPS"]
    assert len(apps) == len(set(apps)), "an app twice"
    # Each app the snippet names exists (but the app the page has the reader make).
    unknown = [app for app in apps if app != "shop" and importlib.util.find_spec(app) is None]
    assert not unknown


@pytest.mark.parametrize("code", [code for where, code in APPENDED if "urls.py" in code.split("\n")[0]],
                         ids=[where for where, code in APPENDED if "urls.py" in code.split("\n")[0]])
def test_a_urls_snippet_runs_at_the_end_of_a_startproject_urls_file(code, tmp_path):
    path = startproject(tmp_path) / "urls.py"
    namespace = {"__file__": str(path), "__name__": "mysite.urls"}
    exec(compile(path.read_text() + "\n" + code, str(path), "exec"), namespace)
    assert len(namespace["urlpatterns"]) == 2


def test_the_readme_is_a_quickstart_and_links():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    start, end = "<!-- --8<-- [start:quickstart] -->", "<!-- --8<-- [end:quickstart] -->"
    assert readme.index(start) < readme.index("## Quickstart") < readme.index(end)
    # The quickstart is included in docs/index.md, where a link relative to the README would break.
    assert "](" not in readme[readme.index(start):readme.index(end)]
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link
    assert '--8<-- "README.md:quickstart"' in (DOCS / "index.md").read_text()


def test_the_reference_is_what_the_code_makes():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "reference_docs.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def setting_names(defaults: dict, prefix: str) -> list[str]:
    names = []
    for key, value in defaults.items():
        name = f'{prefix}["{key}"]' if prefix else key
        names.append(name)
        if isinstance(value, dict) and name not in ('AUTHORIZATION_SERVER["SCOPES"]',):
            names.extend(setting_names(value, name))
    return names


def test_every_setting_is_in_the_reference():
    from mcp_client.contrib.django.conf import DEFAULTS as CLIENT_DEFAULTS
    from mcp_server.settings import (
        AUTHORIZATION_SERVER_DEFAULTS,
        DEFAULTS,
        RATE_LIMITS_DEFAULTS,
        RESOURCE_SERVER_DEFAULTS,
    )

    server = {**DEFAULTS, "RESOURCE_SERVER": RESOURCE_SERVER_DEFAULTS,
              "AUTHORIZATION_SERVER": AUTHORIZATION_SERVER_DEFAULTS, "RATE_LIMITS": RATE_LIMITS_DEFAULTS}
    reference = (REFERENCE / "settings.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", reference, re.MULTILINE))
    missing = [name for name in setting_names(server, "") + setting_names(CLIENT_DEFAULTS, "")
               if name not in documented]
    assert not missing
    assert 'RESOURCE_SERVER["JWT"]["JWKS_URL"]' in documented


def test_every_management_command_is_in_the_reference():
    commands = sorted(path.stem for package in ("mcp_server", "mcp_client")
                      for path in (ROOT / package).rglob("management/commands/*.py")
                      if path.stem != "__init__")
    assert "mcp_stdio" in commands and "mcp_client_rotate_keys" in commands
    reference = (REFERENCE / "commands.md").read_text()
    assert [name for name in commands if f"\n## {name}\n" not in reference] == []


def test_every_system_check_id_is_in_the_reference():
    ids = sorted({found for package in ("mcp_server", "mcp_client") for path in (ROOT / package).rglob("*.py")
                  for found in re.findall(r'id="(mcp_[a-z_]+\.[EW]\d{3})"', path.read_text())})
    assert "mcp_server.W001" in ids
    reference = (REFERENCE / "checks.md").read_text()
    assert [ident for ident in ids if f"\n## {ident}\n" not in reference] == []


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    installed = all(importlib.util.find_spec(name) is not None for name in ("mkdocs", "material"))
    require(installed, "mkdocs and mkdocs-material are not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    index = (site / "index.html").read_text()
    assert "count_to" in index and 'id="quickstart"' in index  # the README's quickstart, included
    assert (site / "reference" / "settings" / "index.html").exists()
