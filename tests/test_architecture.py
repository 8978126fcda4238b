"""The floors of docs/architecture.md hold: no import cycle among the packages, counting every
import that runs (deferred ones inside functions too; only ``if TYPE_CHECKING:`` ones are free),
every module of mcp_server on a floor of the import-linter contract that ``lint-imports`` checks,
and a package face that loads nothing until a name of it is used."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .import_graph import cycles, edges, module_files, path_within

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mcp_protocol", "mcp_server", "mcp_client")
# Package faces above the floors: they load their names lazily and nothing below imports them.
FACES = {"mcp_server", "mcp_server.extensions"}


def test_no_import_cycle_among_the_packages():
    graph = edges(module_files(ROOT, PACKAGES))
    found = cycles(graph)
    assert not found, "import cycles (every import that runs counts):\n" + "\n".join(
        f"{len(component)} modules, closing as {' -> '.join(path_within(graph, component))}"
        for component in found)


def test_the_cycle_check_sees_deferred_imports_and_not_type_checking_ones(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def later():\n    from .high import thing\n    return thing\n")
    (package / "high.py").write_text("from . import low\nthing = 1\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import thing\n")
    (package / "uses_typed.py").write_text("from .typed import TYPE_CHECKING\n")
    graph = edges(module_files(tmp_path, ["pkg"]))
    assert cycles(graph) == [["pkg.high", "pkg.low"]]
    assert graph["pkg.typed"] == set()
    assert path_within(graph, ["pkg.high", "pkg.low"]) in (["pkg.high", "pkg.low", "pkg.high"],)


def _floors() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("containers") == ["mcp_server"]]
    return [[part.strip() for part in layer.replace("|", ":").split(":")] for layer in contract["layers"]]


def test_every_module_of_mcp_server_is_on_a_floor():
    floors = [f"mcp_server.{part}" for layer in _floors() for part in layer]
    unplaced = [name for name in module_files(ROOT, ["mcp_server"])
                if name not in FACES and not any(name == f or name.startswith(f + ".") for f in floors)]
    assert not unplaced, f"modules on no floor of pyproject.toml's import-linter contract: {unplaced}"


def test_settings_is_the_bottom_floor_alone():
    assert _floors()[-1] == ["settings"]


def _loaded_by(code: str) -> dict:
    script = ("import json, sys\n"
              "import django\nfrom django.conf import settings\nsettings.configure()\n"
              "before = set(sys.modules)\n" + code + "\n"
              "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('mcp_'))))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_importing_the_package_loads_nothing_more():
    assert _loaded_by("import mcp_server") == ["mcp_server"]


@pytest.mark.parametrize("name", ["Tool", "Content", "tool", "ServerContext", "StdioTransport"])
def test_each_name_of_the_face_loads_its_own_module(name):
    loaded = _loaded_by(f"import mcp_server\nmcp_server.{name}")
    assert "mcp_server.http.transport" not in loaded
    assert len(loaded) > 1


def test_the_face_exports_what_it_lists():
    import mcp_server

    assert mcp_server.__all__ == sorted(mcp_server._EXPORTS)
    for name in mcp_server.__all__:
        assert getattr(mcp_server, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        mcp_server.Nothing  # noqa: B018
